// Prefill-sized products on integer GGUF weights (Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q8_0) without AMX:
// the tokens in the vector lanes.
//
// The decode-sized integer kernels (int8_dots.h) give each (row, token) pair its own accumulators,
// unpacking a row's codes for every four tokens. Here 16 tokens share every instruction: the
// activations' int8 planes (the same X8Rows quantisation, so the same integers) are packed so that
// a 64-byte vector holds four consecutive values of each of 16 tokens, and a row's four codes,
// broadcast to the 16 lanes, meet them in one VPDPBUSD (64 products). A sub-block's integer sums
// then take its scale and offset in fp32, per row, for the 16 tokens at once. Codes and scales are
// unpacked once per row and work item (for every token block of the item).
//
// The integer sums equal the decode kernels'; only the fp32 order of the scaled sums differs (~1e-7
// relative). AVX-512 VNNI (a block's 16 tokens in one vector) or AVX-VNNI (two vectors of 8).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ft/engine/expert_kernels.h"
#include "ft/engine/matrix.h"
#include "ft/engine/scratch.h"
#include "ops/cpu/int8_dots.h"

namespace ft::engine::cpu {

inline constexpr std::size_t kTileTokens = 16;  // tokens per packed block (a vector's lanes)
// Tokens from which a product takes the tiles (below, the decode kernels: docs/perf-notes.md).
inline constexpr std::size_t kInt8TileTokens = 16;

// Rows [t0, t0 + n) of an X8Rows packed in blocks of 16 tokens (the last block's missing tokens
// repeat its first; their outputs are dropped). Per block: for each 4 values a 64-byte row of the
// hi plane (token j's 4 bytes at 4 j), the same for lo; per 256 values the tokens' d1 and d2; per
// 16 and per 32 values their sums of x. Lives in the Scratch it was taken from.
struct X8Tiles {
  std::size_t tokens = 0, cols = 0;
  std::int8_t* hi = nullptr;
  std::int8_t* lo = nullptr;
  float* d1 = nullptr;   // [block][cols / 256][16]
  float* d2 = nullptr;   // [block][cols / 256][16]
  float* s16 = nullptr;  // [block][cols / 16][16]
  float* s32 = nullptr;  // [block][cols / 32][16]
  std::size_t blocks() const { return (tokens + kTileTokens - 1) / kTileTokens; }
};
// x8_tiles packs rows [t0, t0 + n) of x, its blocks in parallel.
X8Tiles x8_tiles(Scratch& scratch, CpuIsa isa, const X8Rows& x, std::size_t t0, std::size_t n);
// Packs into `tiles` (blocks [b0, ...) of a larger X8Tiles) rows [t0, t0 + n) of x, or with `rows`
// x's rows rows[t0], ..., rows[t0 + n - 1] (a MoE's assignments, each naming its token's row).
void x8_tiles_pack(CpuIsa isa, const X8Rows& x, std::size_t t0, std::size_t n, const X8Tiles& tiles, std::size_t b0,
                   const std::size_t* rows = nullptr);
// An X8Tiles of `blocks` blocks, unpacked, for x8_tiles_pack to fill.
X8Tiles x8_tiles_alloc(Scratch& scratch, std::size_t blocks, std::size_t cols);

// Whether the tile kernel takes `w` on `isa` (AVX-512 with VNNI, or AVX2 with AVX-VNNI: 8 tokens a
// vector; Q4_K, Q5_K, Q6_K, Q4_0, Q4_1 or Q8_0 in rows of whole 256 values). Q8_0's signed codes enter as q + 128
// (VPDPBUSD's weights are unsigned), the 128 d taken off through the tokens' sums.
bool int8_tiles_fit(CpuIsa isa, const Matrix& w);

// y[j * ldy + (r - r0)] = row r . x_t for rows [r0, r1) and tokens t = 16 * b + j of the tile
// blocks [b0, b1), j < `valid` counted from block b0's first token.
void int8_tile_rows(CpuIsa isa, const Matrix& w, std::size_t r0, std::size_t r1, const X8Tiles& x, std::size_t b0,
                    std::size_t b1, std::size_t valid, float* y, std::size_t ldy);

}  // namespace ft::engine::cpu

// Matrix products on AMX tiles (Intel Sapphire Rapids and later), the CPU backend's path for
// prefill-sized work and the rest when AMX is there.
//
// A tile product C[16 x 16] += A[16 x 32] . B[32 x 16] is set up so that A is sixteen weight rows
// read straight from the checkpoint's row-major matrix (no repacking of weights), B is sixteen
// tokens' activations packed in the pairwise ("VNNI") layout AMX wants, and C holds
// [weight row][token]. Every C element accumulates over the columns in one fixed order,
// independent of which other rows and tokens share its tiles, so results do not depend on T.
//
// Activations enter the tiles in one of two precisions (AmxPacked::halves):
//   2  bf16x2 as on the AVX512-BF16 path (dots.h): each block of tokens packed twice, high halves
//      then low halves, both products into the same C, high first, per 32 columns; ~2^-17
//      relative, close to fp32 products, as the GPU's prefill products take them. The default.
//   1  bf16: each value rounded once (2^-9 relative), as llama.cpp's CPU path and PyTorch's bf16
//      models take them: half the tile products and half the B traffic, for backends asked for
//      it (BackendOptions::cpu_bf16_activations); logits about twice as far from an fp32
//      reference (docs/perf-notes.md).
#pragma once

#include <algorithm>
#include <cstddef>

#include "ft/engine/bf16.h"
#include "ft/engine/matrix.h"
#include "ft/engine/scratch.h"

namespace ft::engine::cpu {

inline constexpr std::size_t kAmxRows = 16;    // weight rows per tile
inline constexpr std::size_t kAmxTokens = 16;  // tokens per tile
inline constexpr std::size_t kAmxK = 32;       // columns per tile product

// Whether AMX-BF16 can run here: the CPU has it and the kernel granted this process the tile state.
bool amx_usable();
// Loads the tile configuration every AMX kernel here shares (tiles 0-5: 16 rows x 64 bytes) on the
// calling thread, once (later calls return at once).
void amx_load_tile_config();

// Tokens packed for B tiles: block b (tokens [16b, 16b + 16)) is K * 16 bf16 of high halves, then
// (halves 2) K * 16 of low halves, element (token j, column c) at (c / 2) * 32 + 2j + c % 2.
struct AmxPacked {
  bf16_t* data = nullptr;
  std::size_t tokens = 0;
  std::size_t K = 0;
  std::size_t halves = 2;  // 1: bf16, 2: bf16x2 (above)
  std::size_t blocks() const { return (tokens + kAmxTokens - 1) / kAmxTokens; }
  std::size_t block_elems() const { return halves * K * kAmxTokens; }
  bf16_t* block(std::size_t b) const { return data + b * block_elems(); }
  // Block b's low halves; null for bf16.
  bf16_t* block_lo(std::size_t b) const { return halves == 2 ? block(b) + K * kAmxTokens : nullptr; }
};

// The halves of an AmxPacked: 1 for bf16 activations (bf16_x), else 2.
inline std::size_t amx_halves(bool bf16_x) { return bf16_x ? 1 : 2; }

// Room for `tokens` tokens of K columns (K a multiple of 32) with `halves` halves in `scratch`.
AmxPacked amx_alloc(Scratch& scratch, std::size_t tokens, std::size_t K, std::size_t halves);
// Packs columns [c0, c0 + n) of the tokens of block b at once (c0 and n even): token 16 b + i from
// rows[i] (n fp32 values), i < count; the block's other slots get rows[0]'s values (their outputs
// are dropped). A block's rows are 64 bytes of one column pair's 16 tokens, so the 16 tokens are
// packed together: a 16 x 16 transpose and whole-row stores a 32 columns, not a scatter a token.
void amx_pack_block(const AmxPacked& packed, std::size_t b, const float* const* rows, std::size_t count, std::size_t c0,
                    std::size_t n);

// Packs `tokens` tokens into the blocks from b0 on, 16 a block: token j from row_of(j), columns
// [c0, c0 + n) as amx_pack_block takes them.
template <typename RowOf>
void amx_pack_tokens(const AmxPacked& packed, std::size_t b0, std::size_t tokens, const RowOf& row_of, std::size_t c0,
                     std::size_t n) {
  for (std::size_t j0 = 0; j0 < tokens; j0 += kAmxTokens) {
    const float* rows[kAmxTokens];
    const std::size_t count = std::min(kAmxTokens, tokens - j0);
    for (std::size_t i = 0; i < count; ++i) rows[i] = row_of(j0 + i);
    amx_pack_block(packed, b0 + j0 / kAmxTokens, rows, count, c0, n);
  }
}

// Tokens from which decoded weights pay for their decoding on AMX (a panel is decoded once per
// call and work item; below this the integer and fused kernels, which read the stored blocks,
// are faster: docs/perf-notes.md).
inline constexpr std::size_t kAmxDecodedTokens = 16;

// Whether amx_rows takes `w`'s dtype: bf16 as stored, or F16 and the block dtypes (GGUF's, FP8,
// MXFP4, NVFP4) decoded. F32 weights (routers, tiny tensors) keep their full precision elsewhere.
bool amx_takes(const Matrix& w);

// y[j * ldy + (r - r0)] = sum_c W[r, c] * x[t, c] for weight rows r in [r0, r1) (r1 - r0 a
// multiple of 16) and tokens t = 16 * b0 + j of token blocks [b0, b1), j < `valid` (later tokens of
// the blocks are computed and dropped); w.cols == x.K.
//
// A bf16 W is multiplied as stored. Any other dtype amx_takes is decoded, 16 rows at a time, to
// the reference's fp32 values (decode_row) and split as bf16x2 activations are, W = W hi + W lo in
// bf16: with bf16x2 activations three products a k-step (hi x hi, hi x lo, lo x hi; lo x lo, ~2^-18
// of the sum, left out), ~16 significant bits on both sides; with bf16 activations two (W hi x x,
// W lo x x), the weights' decoded values kept to ~16 bits as the GPU's prefill tiles keep them.
void amx_rows(const Matrix& w, std::size_t r0, std::size_t r1, const AmxPacked& x, std::size_t b0, std::size_t b1,
              std::size_t valid, float* y, std::size_t ldy);

}  // namespace ft::engine::cpu

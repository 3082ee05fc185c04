// The inner kernels of the CPU backend's bf16 matrix work: for a tile of kRowTile weight rows and
// up to kTokenChunk tokens, every row-token dot product. Inside, token tiles are the inner loop, so
// the tile's rows stay in L1 while all tokens use them.
//
// Every (row, token) result is computed by the same instruction sequence whatever the tile, chunk
// or thread it lands in (the accumulators of one output never mix with another's), which is what
// makes the CPU backend's results independent of batch composition (backend.h).
#pragma once

#include <cstddef>

#include "ft/engine/bf16.h"
#include "ft/engine/expert_kernels.h"

namespace ft::engine::cpu {

inline constexpr std::size_t kRowTile = 4;      // weight rows per dots() call
inline constexpr std::size_t kTokenChunk = 64;  // tokens per dots() call; bounds the callers' stack buffers

// out[r * nt + t] = sum_c W[r, c] * X[t, c] for r < kRowTile, t < nt (<= kTokenChunk).
// w points at the tile's first row (row stride cols); rows >= nr repeat the last valid row and
// their outputs are to be ignored. x has row stride ldx (elements) and is, per path:
//   kAvx2, kAvx512  fp32 (the weights are widened: exact products, fp32 sums)
//   kAvx512Bf16, kAmxBf16  "bf16x2": each fp32 activation as two bf16s, hi = bf16(x) and
//                   lo = bf16(x - hi), stored [hi row (cols) | lo row (cols)] per token. VDPBF16PS
//                   multiplies both exactly, so a dot product carries x to about 2^-16 relative
//                   (fp32 products would give 2^-24; a single bf16 only 2^-8, which flips MoE
//                   routing near ties far more often). The weight stream, what decode is bound by,
//                   is the same; the extra instructions are hidden behind it.
using DotsFn = void (*)(const bf16_t* w, std::size_t nr, const void* x, std::size_t ldx, std::size_t nt,
                        std::size_t cols, float* out);

// The dots kernel of a path; null for kScalar.
DotsFn dots_for(CpuIsa isa);
// Whether the path wants its activations as bf16x2 (kAvx512Bf16) rather than fp32.
inline bool wants_bf16_x(CpuIsa isa) { return isa == CpuIsa::kAvx512Bf16 || isa == CpuIsa::kAmxBf16; }
// Bytes one activation column takes in the path's format (2 x 2 for bf16x2, 4 for fp32).
inline std::size_t x_bytes_per_col(CpuIsa isa) { return wants_bf16_x(isa) ? 2 * sizeof(bf16_t) : sizeof(float); }
// Writes one row of n activations in the path's format to dst (x_bytes_per_col(isa) * n bytes).
void prepare_row(CpuIsa isa, const float* src, std::size_t n, void* dst);
// Column c of a row of `cols` activations in the path's format, written one value at a time (for
// producers such as silu(gate) * up that make a row column by column): what prepare_row writes.
inline void put_activation(CpuIsa isa, std::byte* row, std::size_t cols, std::size_t c, float v) {
  if (!wants_bf16_x(isa)) {
    reinterpret_cast<float*>(row)[c] = v;
    return;
  }
  auto* half = reinterpret_cast<bf16_t*>(row);
  half[c] = f32_to_bf16(v);
  half[cols + c] = f32_to_bf16(v - bf16_to_f32(half[c]));
}
void to_bf16(const float* src, bf16_t* dst, std::size_t n);
// hi = bf16(src), lo = bf16(src - hi), both rounded to nearest even.
void split_bf16(const float* src, bf16_t* hi, bf16_t* lo, std::size_t n);
// A path the caller asked for but this CPU cannot run falls back to the best one it can.
CpuIsa usable(CpuIsa isa);

}  // namespace ft::engine::cpu

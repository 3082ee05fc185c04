// Decode-sized products on Q4_K, Q5_K and Q6_K rows with integer arithmetic: the activations quantised
// once per call into two int8 planes (x ~= d1 hi + d2 lo per 256 values, d2 = d1 / 254: within
// 1/64,516 of the block's largest value, what the bf16 hi + lo planes of the other products give),
// the weights' codes multiplied as bytes (VPMADDUBSW, then VPMADDWD with the sub-block scales),
// scaled once per super-block. A fused fp32 kernel decodes every value into a float first; here 32
// values take a handful of integer instructions, so a core streams several times the bytes.
//
// The offsets (Q4_K's mins, Q6_K's -32) multiply fp32 sums of x over their sub-blocks, exact.
// Every token's result is the same instruction sequence whatever the token count (each token has
// its own accumulators), so a batch equals its sequences alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ft/engine/dtype.h"
#include "ft/engine/expert_kernels.h"
#include "ft/engine/matrix.h"
#include "ft/engine/scratch.h"

namespace ft::engine::cpu {

inline constexpr std::size_t kX8Block = 256;  // values per (d1, d2)

// T rows of `cols` activations (cols a multiple of 256) as the integer products read them.
class X8Rows {
 public:
  X8Rows() = default;
  // Quantises x [T, cols] (row stride ld floats) into buffers taken from `scratch` (valid while its
  // frame lives: no allocation on the hot path) with the widest vectors `isa` allows (every path
  // writes the scalar definition's bits).
  void quantize(Scratch& scratch, const float* x, std::size_t T, std::size_t cols, std::size_t ld, CpuIsa isa);

  // This X8Rows read through an index: row t of the result is row rows[t] of this one (`rows` must
  // outlive it). A token's row quantised once then serves every expert it chose.
  X8Rows gathered(const std::size_t* rows) const {
    X8Rows g = *this;
    g.rows_ = rows;
    return g;
  }

  std::size_t cols() const { return cols_; }
  const std::int8_t* hi(std::size_t t) const { return hi_ + row(t) * cols_; }
  const std::int8_t* lo(std::size_t t) const { return lo_ + row(t) * cols_; }
  const float* scales(std::size_t t) const { return d_ + row(t) * (cols_ / kX8Block) * 2; }  // d1, d2 per block
  const float* sums16(std::size_t t) const { return s16_ + row(t) * (cols_ / 16); }          // sum of every 16 values
  const float* sums32(std::size_t t) const { return s32_ + row(t) * (cols_ / 32); }          // sum of every 32 values

 private:
  std::size_t row(std::size_t t) const { return rows_ ? rows_[t] : t; }

  std::size_t cols_ = 0;
  std::int8_t *hi_ = nullptr, *lo_ = nullptr;
  float *d_ = nullptr, *s16_ = nullptr, *s32_ = nullptr;
  const std::size_t* rows_ = nullptr;  // gathered(): the underlying row of each row
};

// out[j] = row . x_{t0 + j} for j < n (n <= kInt8DotTokens): the row's super-blocks against the
// quantised rows.
inline constexpr std::size_t kInt8DotTokens = 4;
using Int8DotsFn = void (*)(const std::uint8_t* row, std::size_t cols, const X8Rows& x, std::size_t t0, std::size_t n,
                            float* out);

// Whether the 512-bit VNNI integer products run on `isa` (AVX-512 with VNNI, FT_CPU_INT8 neither 0
// nor avx2): what int8_tiles.h needs.
bool int8_vnni512(CpuIsa isa);
// Whether the 256-bit VNNI ones can run (AVX2 path, the CPU has AVX-VNNI, FT_CPU_INT8 not 0): the
// tiles' kernel for CPUs without AVX-512.
bool int8_vnni256(CpuIsa isa);

// The integer kernel for `dtype` on `isa` (AVX2 and up: Q4_K, Q5_K, Q6_K, with AVX-VNNI where the
// CPU has it; 64 values a vector on AVX-512 with VNNI), or null. FT_CPU_INT8=0 turns them off (the fp32
// fused kernels then serve, as on CPUs without AVX2); FT_CPU_INT8=avx2 keeps the 256-bit ones.
Int8DotsFn int8_dots_for(CpuIsa isa, DType dtype);
// The 256-bit kernel for `dtype` (Q4_K, Q5_K, Q6_K) with AVX-VNNI's VPDPWSSD (vnni) or without it, or null
// where the CPU lacks the path: int8_dots_for picks VNNI where the CPU has it; both give the same
// bits.
Int8DotsFn int8_dots256_for(DType dtype, bool vnni);

// The kernel for matrix m (whose rows are whole 256-value blocks), or null.
Int8DotsFn int8_dots_for(CpuIsa isa, const Matrix& m);

// out[j] = row . x_{t0 + j} for any n, kInt8DotTokens tokens a call (the same kernel at any n).
inline void int8_row_dots(Int8DotsFn dots, const std::uint8_t* row, std::size_t cols, const X8Rows& x, std::size_t t0,
                          std::size_t n, float* out) {
  for (std::size_t t = 0; t < n; t += kInt8DotTokens)
    dots(row, cols, x, t0 + t, n - t < kInt8DotTokens ? n - t : kInt8DotTokens, out + t);
}

}  // namespace ft::engine::cpu

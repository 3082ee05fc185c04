// Rows of GGUF block-dtype matrices decoded for the CPU products: AVX-512 versions of the
// reference dequantisers (src/ops/reference/dequant.cpp) for the types quantised models are mostly
// made of (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, MXFP4, and safetensors' FP8 and NVFP4 as row blocks), equal to them
// bit for bit
// (each value is the same conversions and roundings, 16 at a time); the other types, and CPUs without AVX-512, take the
// reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ft/engine/expert_kernels.h"
#include "ft/engine/matrix.h"

namespace ft::engine::cpu {

// Row r of `m` as m.cols floats (any dtype: dense ones widened, block ones decoded).
void decode_row(CpuIsa isa, const Matrix& m, int64_t r, float* out);

// Whether `isa` has a decoder of its own for `dtype` (else decode_row uses the reference).
bool has_fast_decoder(CpuIsa isa, DType dtype);

// out[t] = row . x_t for min(T, kBlockDotTokens) fp32 rows x_t = x + t * ldx: the row's blocks decoded
// in registers (the decoders' values exactly) and multiplied into 16-lane accumulators, added
// in a fixed tree. A decode-sized product reads its weights once and writes nothing else.
inline constexpr std::size_t kBlockDotTokens = 4;
using BlockDotsFn = void (*)(const std::uint8_t* row, std::size_t cols, const float* x, std::size_t ldx, std::size_t T,
                             float* out);
// The fused kernel for `dtype` on `isa`, or null (use decode_row and a dot).
BlockDotsFn block_dots_for(CpuIsa isa, DType dtype);
// The fused kernels' sum for a row decode_row has already decoded (cols a multiple of 32), equal
// to theirs bit for bit: many tokens decode a row once and still get the few-token results, so an
// output never depends on how many tokens a call has. Only where block_dots_for gives a kernel.
float dot_decoded(const float* row, const float* x, std::size_t cols);

}  // namespace ft::engine::cpu

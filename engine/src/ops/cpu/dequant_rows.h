// Rows of GGUF block-dtype matrices decoded for the CPU products: AVX-512 versions of the
// reference dequantisers (src/ops/reference/dequant.cpp) for the types quantised models are mostly
// made of (Q8_0, Q4_0, Q4_K, Q6_K, MXFP4), equal to them bit for bit (each value is the same
// conversions and roundings, 16 at a time); the other types, and CPUs without AVX-512, take the
// reference.
#pragma once

#include <cstdint>

#include "ft/engine/expert_kernels.h"
#include "ft/engine/matrix.h"

namespace ft::engine::cpu {

// Row r of `m` as m.cols floats (any dtype: dense ones widened, block ones decoded).
void decode_row(CpuIsa isa, const Matrix& m, int64_t r, float* out);

// Whether `isa` has a decoder of its own for `dtype` (else decode_row uses the reference).
bool has_fast_decoder(CpuIsa isa, DType dtype);

}  // namespace ft::engine::cpu

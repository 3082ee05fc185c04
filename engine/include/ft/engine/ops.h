// CPU reference ops: plain loops, fp32 accumulation, written to be read. Each CUDA op in
// cuda_ops.h is checked against its twin here.
#pragma once

#include <cstddef>

namespace ft::engine::ref {

// RMSNorm over the last dimension of x[rows, dim]:
//   out = x / sqrt(mean(x^2) + eps) * (zero_centered ? 1 + w : w)
// zero_centered is the Qwen3-Next/3.5 variant whose stored weight is an offset from 1.
void rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim,
              float eps, bool zero_centered);

}  // namespace ft::engine::ref

// Element-wise work of the CPU backend, vectorised on the AVX-512 paths (exp by exp512, simd.h)
// and plain loops otherwise; one fixed formula per path, so results never depend on the split.
#pragma once

#include <cstddef>

#include "ft/engine/expert_kernels.h"

namespace ft::engine::cpu {

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void silu_mul(CpuIsa isa, const float* gate, const float* up, float* out, std::size_t n);

// ref::rms_norm of `rows` rows (out may alias x): the sum of squares in double as the reference
// takes it, over eight lanes and four accumulators instead of one chain (the same sum to ~1e-12
// relative: the float scale it gives is the reference's but within a rounding boundary's width),
// the scaling in the reference's order.
void rms_norm(CpuIsa isa, const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim, float eps,
              bool zero_centered);

}  // namespace ft::engine::cpu

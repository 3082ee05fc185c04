// Element-wise work of the CPU backend, vectorised on the AVX-512 paths (exp by exp512, simd.h)
// and plain loops otherwise; one fixed formula per path, so results never depend on the split.
#pragma once

#include <cstddef>

#include "ft/engine/expert_kernels.h"

namespace ft::engine::cpu {

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void silu_mul(CpuIsa isa, const float* gate, const float* up, float* out, std::size_t n);

}  // namespace ft::engine::cpu

#include "ft/engine/cpu_experts.h"

#include "ops/cpu/moe.h"

namespace ft::engine {

CpuExperts::CpuExperts(int threads, std::optional<CpuIsa> isa)
    : arena_(threads > 0 ? threads : tbb::task_arena::automatic),
      isa_(isa && cpu_isa_supported(*isa) ? *isa : best_cpu_isa()) {}

void CpuExperts::run(const MoeWeights& w, const float* x, std::size_t T, std::size_t K, const int32_t* chosen,
                     const float* weights, float* out) {
  // Decode-sized calls stream weights, which AVX-512 does faster than AMX tiles (as CpuBackend).
  const CpuIsa isa = isa_ == CpuIsa::kAmxBf16 && T <= 16 ? CpuIsa::kAvx512 : isa_;
  arena_.execute([&] { cpu::moe_experts(scratch_, isa, w, x, T, K, chosen, weights, out); });
}

}  // namespace ft::engine

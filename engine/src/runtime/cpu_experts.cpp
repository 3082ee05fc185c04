#include "ft/engine/cpu_experts.h"

#include <immintrin.h>

#include <thread>

#include "ops/cpu/moe.h"

namespace ft::engine {

// No slot reserved for a caller: submitted tasks run on worker threads alone.
CpuExperts::CpuExperts(int threads, std::optional<CpuIsa> isa)
    : arena_(threads > 0 ? threads : tbb::task_arena::automatic, 0),
      isa_(isa && cpu_isa_supported(*isa) ? *isa : best_cpu_isa()) {}

CpuExperts::~CpuExperts() {
  while (warming_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
}

void CpuExperts::run(const MoeWeights& w, const float* x, std::size_t T, std::size_t K, const int32_t* chosen,
                     const float* weights, float* out, CpuMoePhases* phases) {
  // Decode-sized calls stream weights, which AVX-512 does faster than AMX tiles (as CpuBackend).
  const CpuIsa isa = isa_ == CpuIsa::kAmxBf16 && T <= 16 ? CpuIsa::kAvx512 : isa_;
  arena_.execute(
      [&] { cpu::moe_experts(scratch_, isa, w, x, T, K, chosen, weights, out, nullptr, false, phases, &loops_); });
}

void CpuExperts::submit(std::function<void()> task) {
  pending_.fetch_add(1);
  arena_.enqueue([this, task = std::move(task)] {
    task();
    pending_.fetch_sub(1, std::memory_order_release);
  });
}

void CpuExperts::warm(std::chrono::microseconds horizon) {
  using Clock = std::chrono::steady_clock;
  const unsigned loops = loops_.load(std::memory_order_acquire);
  const Clock::time_point until = Clock::now() + horizon;
  const int n = arena_.max_concurrency() - 1 - warming_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    warming_.fetch_add(1, std::memory_order_acq_rel);
    arena_.enqueue([this, loops, until] {
      while (loops_.load(std::memory_order_acquire) == loops && Clock::now() < until) _mm_pause();
      warming_.fetch_sub(1, std::memory_order_acq_rel);
    });
  }
}

void CpuExperts::drain() {
  while (pending_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
}

}  // namespace ft::engine

// The CPU half of an offloaded MoE layer: routed experts computed where their weights lie in host
// memory, with the CPU runtime's expert kernels, on a thread arena of its own (the GPU backend's
// thread issues the layer's GPU work, then runs this while the GPU computes its share).
#pragma once

#include <tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "ft/engine/backend.h"
#include "ft/engine/expert_kernels.h"
#include "ft/engine/scratch.h"

namespace ft::engine {

class CpuExperts {
 public:
  // threads 0: every core; isa: the best this CPU runs unless given.
  explicit CpuExperts(int threads = 0, std::optional<CpuIsa> isa = std::nullopt);
  // Waits for the threads that warm() woke (each ends within its horizon).
  ~CpuExperts();
  CpuExperts(const CpuExperts&) = delete;
  CpuExperts& operator=(const CpuExperts&) = delete;

  int threads() const { return arena_.max_concurrency(); }
  CpuIsa isa() const { return isa_; }
  // out [T, H] = for each token the sum over its choices k with chosen[t K + k] >= 0 of
  // weights[t K + k] * expert(x_t), in ascending expert order; negative choices are another
  // device's. x, chosen, weights and out are host memory; the experts' weights must be readable
  // on the host (Matrix::data).
  // With `phases`, the call's time phase by phase is added there.
  void run(const MoeWeights& w, const float* x, std::size_t T, std::size_t K, const int32_t* chosen,
           const float* weights, float* out, CpuMoePhases* phases = nullptr);
  // Runs `task` on the arena's threads and returns at once (the caller, a GPU backend's thread,
  // goes on issuing work). A task that calls run() must end before the next one is submitted
  // (they share a scratch); the GPU backend's layers are ordered so.
  void submit(std::function<void()> task);
  // Waits until every submitted task has finished.
  void drain();
  // Wakes the arena's other threads ahead of a run() expected within `horizon`: each spins until the
  // run's first parallel loop begins (then takes its items) or the horizon ends.
  void warm(std::chrono::microseconds horizon);
  int warming() const { return warming_.load(std::memory_order_acquire); }

 private:
  tbb::task_arena arena_;
  CpuIsa isa_;
  Scratch scratch_;
  std::atomic<int> pending_{0};
  std::atomic<unsigned> loops_{0};  // runs' first loops begun: what a warmed thread waits to change
  std::atomic<int> warming_{0};
};

}  // namespace ft::engine

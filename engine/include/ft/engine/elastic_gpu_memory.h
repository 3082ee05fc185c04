// GPU memory that gives way to other processes. With the routed experts in host RAM, the expert
// cache is the elastic part of a model's GPU plan, and then the KV pool's free chunks (the weights
// and the workspace keep their size; Model::resize_gpu_memory): a watcher polls the driver's free
// memory and, when another process has taken it down to `headroom`, shrinks them until twice that
// is free again (twice as much again at each
// poll in a row that still finds too little: a process loading a model takes gigabytes, and each
// poll it waits costs it time); when the other process
// is done and more than three times the headroom is free, the cache grows back toward the
// ceiling (--gpu-mem, or the budget an operator set since), leaving twice the headroom free. The
// band in between keeps it from see-sawing. Requests keep running: a resize waits for the pass in
// progress, and the experts it drops are fetched again or computed on the CPU like any miss.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "ft/common/result.h"
#include "ft/engine/model.h"

namespace ft::engine {

struct ElasticInputs {
  std::uint64_t free_bytes = 0;     // the device's free memory now
  std::uint64_t budget_bytes = 0;   // what the plan takes now
  std::uint64_t ceiling_bytes = 0;  // the budget wanted while memory allows
  std::uint64_t floor_bytes = 0;    // the least the plan can take (fewest slots, the KV pool's first chunk)
  std::uint64_t headroom_bytes = 0;
  std::uint64_t step_bytes = 1;  // the least change worth making (one expert slot)
  int pressed_polls = 0;         // polls in a row just before this one that gave memory back
};

// The budget to move to: budget_bytes when nothing should change.
std::uint64_t elastic_budget(const ElasticInputs& in);

class ElasticGpuMemory {
 public:
  struct Options {
    std::uint64_t headroom_bytes = std::uint64_t(512) << 20;  // 0: never resize by itself
    std::chrono::milliseconds poll{100};
  };
  struct Stats {
    std::uint64_t ceiling_bytes = 0, budget_bytes = 0, device_free_bytes = 0, headroom_bytes = 0;
    std::uint64_t shrinks = 0, grows = 0;  // resizes the watcher made
    std::string last_error;                // of the last resize that failed ("" when none)
  };

  // `model` must keep its experts in host RAM (placement().experts_on_host) and outlive this.
  ElasticGpuMemory(const Model& model, Options options);
  ~ElasticGpuMemory();
  ElasticGpuMemory(const ElasticGpuMemory&) = delete;
  ElasticGpuMemory& operator=(const ElasticGpuMemory&) = delete;

  // A new ceiling, moved to now (as far as the GPU has room): an operator's `ctl memory --gpu-mem`.
  Result<PlacementPlan> set_ceiling(std::uint64_t bytes);
  Stats stats() const;

 private:
  void watch(std::stop_token stop);
  // One look at the free memory and the resize it calls for.
  void poll_once();

  const Model& model_;
  const Options options_;
  mutable std::mutex mu_;  // ceiling_, stats_; held across a resize so two never interleave
  std::condition_variable_any wake_;
  std::uint64_t ceiling_;
  Stats stats_;
  int pressed_polls_ = 0;
  std::jthread thread_;  // last: stops before the members it uses go
};

}  // namespace ft::engine

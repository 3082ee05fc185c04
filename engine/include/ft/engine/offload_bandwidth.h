// The split planner's starting costs (moe_split.h), measured per machine: pinned host -> GPU
// copies of experts, the CPU expert kernels over experts in host RAM, and both at once (they share
// host memory). `freetoken bench bw` measures them; an offloaded model loads them from a cache file
// (measuring and writing it on first use, or with --recalibrate) and then follows what serving
// measures.
#pragma once

#include <filesystem>
#include <string>

#include "ft/common/result.h"
#include "ft/engine/backend.h"
#include "ft/engine/cpu_experts.h"
#include "ft/engine/host_expert_layer.h"
#include "ft/engine/moe_split.h"

namespace ft::engine {

// Each path for about `seconds`, over `w`'s experts (the CPU computes one token through
// top-k of them at a time, the copies cycle through them into a few device buffers). GPU builds
// only (kUnavailable otherwise).
Result<SplitCosts> measure_offload_bandwidth(const MoeWeights& w, CpuExperts& cpu, double seconds);

// A layer of `experts` random bf16 experts of the given shape in registered (pinned) host memory,
// for measuring without a model (Qwen3-30B-A3B: 128 x 2048 x 768).
class SyntheticExpertLayer {
 public:
  static Result<SyntheticExpertLayer> create(int experts, int hidden, int inter, int top_k);
  SyntheticExpertLayer(SyntheticExpertLayer&&) noexcept;
  SyntheticExpertLayer& operator=(SyntheticExpertLayer&&) noexcept;
  ~SyntheticExpertLayer();
  const MoeWeights& weights() const { return host_.w; }

 private:
  SyntheticExpertLayer() = default;
  void release();
  HostExpertLayer host_;
  bool registered_ = false;
};

// The cache file: the costs with the GPU and thread count they were measured for. A file for
// another GPU or thread count, or none, is kNotFound.
Result<SplitCosts> load_offload_costs(const std::filesystem::path& file, const std::string& device, int threads);
Status save_offload_costs(const std::filesystem::path& file, const SplitCosts& costs, const std::string& device,
                          int threads);

}  // namespace ft::engine

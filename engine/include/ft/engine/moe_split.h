// How an offloaded MoE layer serves its cache misses in decode: each missed expert is either
// fetched over PCIe into a GPU slot (then computed there) or computed on the CPU where it lies,
// both at once. The planner picks how many to fetch from a cost model of the two paths (bytes,
// PCIe and CPU GB/s, per-copy and per-layer overheads, tokens per expert); fixed policies stay
// selectable for comparison (`--moe-policy adaptive|fetch|cpu|ratio:Q|direct[:Q|:auto]`).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"

namespace ft::engine {

struct MoePolicy {
  // kDirect: decode reads the misses in place from pinned host memory (in_place_experts.h), a share
  // of the uncached experts (ratio) computed on the CPU instead; with auto_share (direct:auto) the
  // share is found while decoding (share_tuner.h).
  enum class Kind { kAdaptive, kFetch, kCpu, kRatio, kDirect };
  Kind kind = Kind::kAdaptive;
  double ratio = 0;  // kRatio: the share of a layer's misses fetched; kDirect: of the uncached experts on the CPU
  bool auto_share = false;
  std::string name() const;
};
// "adaptive", "fetch", "cpu", "ratio:Q", "direct[:Q]" (0 <= Q <= 1) or "direct:auto";
// kInvalidArgument otherwise.
Result<MoePolicy> parse_moe_policy(std::string_view text);

// The cost model's rates. `freetoken bench bw` measures them; serving re-estimates them from the
// times it sees (SplitModel). The shared rates apply while both paths run at once (they share
// host memory bandwidth); 0 means "as alone".
struct SplitCosts {
  double pcie_gbps = 20;  // pinned host -> GPU copies
  double cpu_gbps = 30;   // CPU expert kernels reading bf16 weights, at the pool's threads
  double pcie_shared_gbps = 0;
  double cpu_shared_gbps = 0;
  double fetch_overhead_s = 5e-6;  // per fetched expert (its copies' issue and completion)
  double cpu_overhead_s = 40e-6;   // per layer with CPU work: activations out, threads woken, result back
  double cpu_token_s = 0;          // per (token, expert) computed on the CPU, beyond the weight reads
};

struct SplitMiss {
  int expert = 0;
  int tokens = 1;  // this step's tokens that chose the expert
};

struct SplitPlan {
  std::vector<int> fetch;  // experts to fetch into slots
  std::vector<int> cpu;    // experts to compute on the CPU
  double predicted_s = 0;  // the model's time for the misses
};

// The model's time for fetching `fetch` (after `committed` fetches already decided) and computing
// `cpu` at once.
double split_seconds(const SplitCosts& c, std::span<const SplitMiss> fetch, std::span<const SplitMiss> cpu,
                     std::size_t expert_bytes, int committed = 0);

// Splits a layer's misses. At most `max_fetch` are fetched (the slots the step can still take);
// `committed` fetches are already on their way (experts the cache admits). The adaptive policy
// fetches the busiest experts first (a CPU expert's cost grows with its tokens, a fetch's does
// not) and picks the count with the least predicted time, the larger count on a tie.
SplitPlan plan_split(const MoePolicy& policy, const SplitCosts& costs, std::span<const SplitMiss> misses,
                     std::size_t expert_bytes, int max_fetch, int committed = 0);

// The costs, re-estimated from measured times (exponential moving averages of the rates).
class SplitModel {
 public:
  explicit SplitModel(SplitCosts initial = {}) : c_(initial) {}
  const SplitCosts& costs() const { return c_; }
  void set_costs(const SplitCosts& c) { c_ = c; }
  // `experts` experts (`bytes` in all) fetched in `seconds`, from the first copy's issue to the
  // last one's completion; `concurrent`: while the CPU computed others.
  void observe_fetch(std::size_t bytes, int experts, double seconds, bool concurrent);
  // Experts of `bytes` in all computed on the CPU in `seconds` (the layer's whole CPU share).
  void observe_cpu(std::size_t bytes, double seconds, bool concurrent);

 private:
  SplitCosts c_;
};

}  // namespace ft::engine

// A loaded model and its forward pass. One recipe per architecture family under
// engine/src/models/, each a short composition of the shared blocks in engine/src/blocks/;
// load_model() picks it from config.json. The weights stay in the mapped checkpoint in their
// stored dtype; the ops run on the backend chosen at load (backend.h).
#pragma once

#include <cstdint>
#include <functional>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include <optional>

#include "ft/common/result.h"
#include "ft/engine/backend.h"
#include "ft/engine/kv_pool.h"
#include "ft/engine/placement.h"
#include "ft/engine/sampling.h"
#include "ft/engine/model_config.h"
#include "ft/engine/sequence_state.h"

namespace ft::engine {

class Checkpoint;

// Which rows of logits forward() writes.
enum class LogitsMode {
  kAll,   // [T, vocab]: one row per input token (scoring, golden tests)
  kLast,  // [1, vocab]: only the last token's (generation)
  kNone,  // none: prefill whose logits are not needed
};

// One sequence's part of a batched forward pass.
struct BatchSlice {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;  // appended at state->position()
  float* logits_out = nullptr;      // rows per `mode`; null: not copied out (kNone, or only sampled)
  LogitsMode mode = LogitsMode::kLast;
  // With kLast: the next token drawn from the last row's logits, written to *token_out, on the
  // backend's device where it has one (only the token crosses to the host).
  const SampleRequest* sample = nullptr;
  int32_t* token_out = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  // Family plus a hash of config.json and the tensor shapes; stamped into state snapshots.
  virtual const std::string& fingerprint() const = 0;
  // The KV page layout of this model's states; nullopt without attention layers.
  virtual std::optional<KvLayout> kv_layout() const = 0;
  virtual KvPoolStats kv_stats() const = 0;
  // The pool this model's sequences take KV pages from (a checkpoint tier may keep pages of it:
  // kv_page_tier.h); null without attention layers.
  virtual std::shared_ptr<KvPool> kv_pool() const = 0;
  // With routed experts in host RAM: the expert cache and the split so far; nullopt otherwise.
  virtual std::optional<ExpertOffloadStats> expert_offload_stats() const { return std::nullopt; }
  // Switches how decode serves expert cache misses (between passes; no effect without offload).
  virtual void set_moe_policy(const MoePolicy& policy) const { (void)policy; }
  virtual BackendKind backend_kind() const = 0;
  // Where the weights, KV pages, state and workspace live (printed at load, in /v1/stats): a copy,
  // since the expert cache may be resized meanwhile.
  virtual PlacementPlan placement() const = 0;
  // Rows a prefill pass should take on this model's device, 0 where the caller's own size serves:
  // on the GPU as many as its workspace holds (PlacementPlan::pass_rows): longer passes keep the
  // GEMMs busy and, with routed experts in host RAM, stream the experts fewer times.
  virtual int64_t pass_rows() const { return 0; }
  // With routed experts in host RAM: resizes the expert cache so the plan's GPU memory is at most
  // `budget_bytes` (growing: as far as the GPU has room), waiting for the pass in progress; the
  // weights, KV pool and workspace keep their size. Returns the plan after it. kUnsupported
  // without expert offload; kInvalidArgument below what the rest of the plan and the fewest slots
  // need.
  virtual Result<PlacementPlan> resize_gpu_memory(std::uint64_t budget_bytes) const {
    (void)budget_bytes;
    return unsupported("this model keeps no expert cache on a GPU");
  }
  // The GPU's free and total memory as the driver reports them (other processes included);
  // nullopt on the host.
  virtual std::optional<Backend::DeviceMemoryInfo> device_memory() const { return std::nullopt; }
  // Records the experts every MoE layer chooses from now on (null: stop). Not thread-safe with
  // forward passes in flight.
  virtual void set_routing_trace(RoutingTrace* trace) const = 0;
  // Routes every MoE layer as `forced` records from now on (Backend::set_forced_routing; null:
  // stop); false where the backend cannot. Same caveat.
  virtual bool set_forced_routing(const RoutingTrace* forced) const = 0;
  // Accumulates the time of every op into `profile` from now on (null: stop); same caveat.
  virtual void set_profile(OpProfile* profile) const = 0;
  virtual int threads() const = 0;
  // An empty state (position 0) with this model's layer layout.
  virtual SequenceState new_state() const = 0;
  // Appends `tokens` at state.position(), updating the state, and writes logits per `mode` into
  // logits_out (may be null for kNone). Errors (state untouched): kInvalidArgument for an empty
  // token list, an id outside [0, vocab) or a state of another model; kUnavailable when the KV
  // budget has no page left for the new tokens.
  Status forward(SequenceState& state, std::span<const int32_t> tokens, float* logits_out,
                 LogitsMode mode = LogitsMode::kAll) const {
    const BatchSlice one{&state, tokens, logits_out, mode};
    return forward_batch({&one, 1});
  }
  // Several sequences in one pass (continuous batching): the token-wise work (embedding, norms,
  // projections, experts, lm_head) runs over the rows of all slices together, so each weight is
  // read once per step instead of once per sequence; attention and recurrences run per slice.
  // Every slice is validated before any state changes; the states must be distinct.
  virtual Status forward_batch(std::span<const BatchSlice> batch) const = 0;

  int64_t vocab_size() const { return config().vocab_size; }
};

struct LoadOptions {
  BackendKind backend = BackendKind::kCpu;
  int threads = 0;                   // 0: every core
  std::uint64_t kv_budget_bytes = 0;  // KV page pool; 0: a quarter of physical RAM (reserved, not committed),
                                      // on the GPU what the budget leaves after weights and workspace
  std::uint64_t gpu_mem_bytes = 0;    // kCuda: GPU memory the model may use; 0: all that is free
  int64_t kv_page_tokens = 64;       // token positions per KV page
  // One sequence's longest context (the engine's --ctx): the KV pool's default size holds it when
  // the memory allows (placement.h); 0: no such floor.
  int64_t context_tokens = 0;
  // kCuda, linear-attention models: sequences whose recurrent state the GPU budget keeps room for
  // beside the KV pool (a server's running sequences, a batched benchmark's batch).
  int state_sequences = 16;
  bool deterministic = false;        // same bits batched or alone on every CPU (backend.h)
  bool cpu_bf16_activations = false;  // BackendOptions::cpu_bf16_activations
  // kCuda with routed experts in host RAM (when the budget cannot hold them all): how decode
  // serves cache misses, and (> 0) an expert cache of exactly this many slots, offloading even
  // when everything would fit (tests, experiments).
  MoePolicy moe_policy;
  int expert_slots = 0;
  // The split's per-machine costs (offload_bandwidth.h): cache file ("" : measured, not kept),
  // and whether to measure again instead of reading it.
  std::string offload_costs_cache;
  bool recalibrate = false;
  // Called as weights are placed (mapped in place, or copied to the GPU): bytes so far of the
  // model's total, after each layer and once more with done = true.
  std::function<void(std::uint64_t placed, std::uint64_t total, bool done)> progress = nullptr;
};

// Reads config.json, picks the family and maps its weights as views into `checkpoint`, which the
// model keeps alive. Loading reads tensor headers only, never converts a matrix. Errors:
// kUnsupported for an unknown architecture or a weight dtype without kernels; kNotFound for a
// missing tensor; kInvalidArgument for a tensor of the wrong shape (both name the tensor);
// kUnavailable when the GPU's budget cannot hold the weights, the workspace and one KV page
// (saying how much is needed).
Result<std::unique_ptr<Model>> load_model(std::shared_ptr<const Checkpoint> checkpoint, const LoadOptions& options = {});
// Convenience: Checkpoint::open(dir) then load_model.
Result<std::unique_ptr<Model>> load_model(const std::filesystem::path& dir, const LoadOptions& options = {});

}  // namespace ft::engine

// Where a loaded model lives: the placement plan printed when a model loads (`freetoken engine`,
// `generate`, `bench`) and reported in the engine's status (/v1/stats). Weights by kind, the KV
// page pool, the per-sequence linear-attention state and the workspace kept for a pass's
// temporaries, against the memory budget of the device (GPU: --gpu-mem or all it has free).
#pragma once

#include <cstdint>
#include <string>

#include "ft/common/result.h"

namespace ft::engine {

struct PlacementPlan {
  std::string device;                  // "cpu (host RAM)" or e.g. "cuda:0 NVIDIA H200 (sm_90)"
  std::uint64_t budget_bytes = 0;      // GPU memory the plan may use; 0 on the host (no cap)
  std::uint64_t embedding_bytes = 0;   // token embedding and lm_head (once when tied)
  std::uint64_t dense_bytes = 0;       // attention, linear attention, dense MLPs, routers, shared experts, norms
  std::uint64_t routed_expert_bytes = 0;
  // The largest layer's expert (gate, up, down): a quantised file may store some layers' experts
  // in a wider type (Q4_K_M's Q6_K downs), and a slot must hold any. 0: the average is used.
  std::uint64_t largest_expert_bytes = 0;
  std::uint64_t kv_page_bytes = 0;     // one page: page_tokens positions of every attention layer
  std::uint64_t kv_pages = 0;          // the pool's budget in pages
  std::uint64_t kv_tokens = 0;         // positions those pages hold, over all sequences
  std::uint64_t context_tokens = 0;    // one sequence's context the pool was sized for (--ctx); 0: none asked
  std::uint64_t linear_state_bytes = 0;  // DeltaNet conv + recurrent state of one sequence
  // GPU: sequences whose linear state the budget keeps room for (taken as they start, outside the
  // KV pool, so the pool must leave it free).
  std::uint64_t linear_state_sequences = 0;
  std::uint64_t workspace_bytes = 0;  // kept free for a pass's temporaries (GPU)
  // GPU: the rows of a prefill pass whose temporaries the workspace holds (at most 8,192), the pass
  // size a server takes for long prompts (offloaded, each pass streams the experts the cache
  // lacks); 0: none set (a model without routed experts).
  std::uint64_t pass_rows = 0;
  // GPU, offloaded: the least workspace an elastic budget may shrink it to (a prefill pass of 256
  // rows), once the expert cache and the KV pool have given what they can; 0: fixed.
  std::uint64_t least_workspace_bytes = 0;
  // Host buffers set aside (at load) for the KV pages' copies to the host at checkpoints.
  std::uint64_t checkpoint_staging_bytes = 0;
  // Expert offload (GPU): the routed experts stay in host RAM and a cache of expert-sized slots
  // in VRAM holds the ones in use; the decode split and prefill streaming serve the rest.
  std::uint64_t moe_layers = 0;  // layers with routed experts
  std::uint64_t experts_per_layer = 0;
  bool experts_on_host = false;
  bool experts_pinned = false;  // host copies run from page-locked memory
  std::uint64_t expert_slots = 0;
  std::uint64_t expert_slot_bytes = 0;  // one expert (gate, up, down), aligned
  std::uint64_t kv_budget_bytes = 0;    // the KV pool the plan set (offload); 0: what the budget leaves
  std::string moe_policy;               // how decode serves cache misses (moe_split.h)

  std::uint64_t weight_bytes() const { return embedding_bytes + dense_bytes + routed_expert_bytes; }
  // Weights in the device's memory: all of them, or all but the routed experts when offloaded.
  std::uint64_t device_weight_bytes() const { return weight_bytes() - (experts_on_host ? routed_expert_bytes : 0); }
  std::uint64_t expert_cache_bytes() const { return expert_slots * expert_slot_bytes; }
  std::uint64_t linear_state_room() const { return linear_state_bytes * linear_state_sequences; }
  std::uint64_t total_bytes() const {
    return device_weight_bytes() + kv_pages * kv_page_bytes + linear_state_room() + workspace_bytes +
           expert_cache_bytes();
  }
  // A short table, one line per kind, sizes in GiB.
  std::string to_text() const;
};

// "12.3 GiB": how the plan and its errors write sizes.
std::string gib_text(std::uint64_t bytes);

// What the GPU plan is asked to fit.
struct GpuPlanRequest {
  std::uint64_t budget_bytes = 0;     // GPU memory the plan may use
  std::uint64_t kv_budget_bytes = 0;  // --kv-budget; 0: the plan's default
  // KV bytes of one whole context (--ctx): without --kv-budget the pool holds this when the budget
  // allows (offloading experts for it), at most 3/4 of the room it shares with expert slots.
  std::uint64_t context_kv_bytes = 0;
  int expert_slots = 0;               // > 0: offload the experts with exactly this many slots
  // The workspace one prefill row takes (the largest layer's temporaries) and a pass whatever its
  // rows; 0: not known (the workspace stays at its fixed size and no pass size is set).
  std::uint64_t pass_row_bytes = 0, pass_fixed_bytes = 0;
};

// The rows of a prefill pass whose temporaries a workspace of `workspace_bytes` holds
// (GpuPlanRequest's pass_row_bytes and pass_fixed_bytes): a multiple of 256, from 256 to 8,192.
std::uint64_t pass_rows_for(std::uint64_t workspace_bytes, std::uint64_t pass_row_bytes,
                            std::uint64_t pass_fixed_bytes);
// The workspace a pass of 256 rows takes: the least an elastic budget shrinks it to.
std::uint64_t least_workspace(std::uint64_t pass_row_bytes, std::uint64_t pass_fixed_bytes);

// Decides the GPU's share of `plan` (its weights by kind, kv_page_bytes, moe_layers and
// experts_per_layer filled in): everything resident with a 4 GiB workspace when it fits the
// budget with a whole context of KV; else, for a MoE model, the routed experts in host RAM and
// what the budget leaves after the other weights, the workspace (2 GiB below a 24 GiB budget) and
// the KV pool (--kv-budget; else one context, up to 3/4 of the room; else a quarter of it) as
// expert cache slots. Offloaded, the workspace grows out of the cache's room to hold a prefill
// pass of up to 8,192 rows (a third of the budget at most); pass_rows says how many it holds.
// kUnavailable, saying how much is needed, when not even three slots fit.
Status plan_gpu_memory(PlacementPlan& plan, const GpuPlanRequest& request);

}  // namespace ft::engine

// Where a loaded model lives: the placement plan printed when a model loads (`freetoken engine`,
// `generate`, `bench`) and reported in the engine's status (/v1/stats). Weights by kind, the KV
// page pool, the per-sequence linear-attention state and the workspace kept for a pass's
// temporaries, against the memory budget of the device (GPU: --gpu-mem or all it has free).
#pragma once

#include <cstdint>
#include <string>

namespace ft::engine {

struct PlacementPlan {
  std::string device;                  // "cpu (host RAM)" or e.g. "cuda:0 NVIDIA H200 (sm_90)"
  std::uint64_t budget_bytes = 0;      // GPU memory the plan may use; 0 on the host (no cap)
  std::uint64_t embedding_bytes = 0;   // token embedding and lm_head (once when tied)
  std::uint64_t dense_bytes = 0;       // attention, linear attention, dense MLPs, routers, shared experts, norms
  std::uint64_t routed_expert_bytes = 0;
  std::uint64_t kv_page_bytes = 0;     // one page: page_tokens positions of every attention layer
  std::uint64_t kv_pages = 0;          // the pool's budget in pages
  std::uint64_t kv_tokens = 0;         // positions those pages hold, over all sequences
  std::uint64_t linear_state_bytes = 0;  // DeltaNet conv + recurrent state of one sequence
  std::uint64_t workspace_bytes = 0;   // kept free for a pass's temporaries (GPU)
  std::uint64_t reserved_bytes = 0;    // outside the budget, kept for the GPU checkpoint tier

  std::uint64_t weight_bytes() const { return embedding_bytes + dense_bytes + routed_expert_bytes; }
  std::uint64_t total_bytes() const { return weight_bytes() + kv_pages * kv_page_bytes + workspace_bytes; }
  // A short table, one line per kind, sizes in GiB.
  std::string to_text() const;
};

}  // namespace ft::engine

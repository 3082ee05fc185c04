// The CPU backend's mixture-of-experts block over a whole batch: route every token, group the
// (token, expert) assignments by expert, run each active expert once for all its tokens (gate/up
// rows of every active expert in one parallel pass, then every down projection in another), and
// add each token's experts in ascending expert order. A token's result does not depend on which
// other tokens share its experts.
#pragma once

#include <atomic>
#include <cstddef>

#include "ft/engine/backend.h"
#include "ft/engine/expert_kernels.h"

namespace ft::engine::cpu {

// Backend::moe (router_x: the router's input, or null for x). `chosen_out` (may be null) receives
// the chosen experts [T, top_k]. `profile` (may be null) gets the time of each phase. `by_size`: as
// linear() takes it (linear.h); for the experts, a prefill-sized call is one whose active experts
// average kAmxDecodedTokens assignments. `bf16_x`: as linear() takes it.
void moe(Scratch& scratch, CpuIsa isa, const MoeWeights& w, const float* x, std::size_t T, float* out,
         const float* router_x, int32_t* chosen_out = nullptr, OpProfile* profile = nullptr, bool by_size = false,
         bool bf16_x = false);

// The routed experts alone, for choices already made: out [T, H] = the sum over token t's choices
// k with chosen[t K + k] >= 0 of weights[t K + k] * expert(x_t), in ascending expert order; a
// negative choice is skipped (another device computes it: the GPU's share of an offloaded layer).
// With `phases`, the call's time phase by phase is added there (the bf16 and block experts' paths);
// `loops_begun`, where given, is counted up once: as the experts' first parallel loop begins (at the
// call's end on paths without those loops).
void moe_experts(Scratch& scratch, CpuIsa isa, const MoeWeights& w, const float* x, std::size_t T, std::size_t K,
                 const int32_t* chosen, const float* weights, float* out, OpProfile* profile = nullptr,
                 bool by_size = false, CpuMoePhases* phases = nullptr, std::atomic<unsigned>* loops_begun = nullptr,
                 bool bf16_x = false);

}  // namespace ft::engine::cpu

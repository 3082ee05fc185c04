// CPU reference ops for mixture-of-experts routing: router scores -> top-k experts and weights.
// The expert MLP itself is a SwiGLU made of ref::linear + ref::silu_mul (ops_dense.h); the bf16
// streaming kernels for it are in expert_kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::engine::ref {

enum class RouterScoring {
  kSoftmax,  // Qwen, Mixtral: probabilities over all experts, then top-k
  kSigmoid,  // DeepSeek-V3 style: independent sigmoid scores, then top-k
};

struct RouterSpec {
  std::size_t num_experts = 0;
  std::size_t top_k = 0;
  RouterScoring scoring = RouterScoring::kSoftmax;
  bool renormalize = true;     // divide the k selected scores by their sum (HF norm_topk_prob)
  float scaling = 1.0f;        // multiply the final weights (routed_scaling_factor)
};

// logits [T, num_experts] -> experts [T, top_k] (by descending score; ties to the lower index, as
// torch.topk on CPU does) and weights [T, top_k].
void route_top_k(const float* logits, std::size_t T, const RouterSpec& spec, int32_t* experts,
                 float* weights);

}  // namespace ft::engine::ref

// Qwen2-MoE (model_type "qwen2_moe", Qwen2MoeForCausalLM; Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B):
// softmax attention with q/k/v biases (qkv_bias) but none on o_proj and no q/k norms; the
// feed-forward is a top-k softmax-routed MoE (renormalised only when norm_topk_prob) plus a shared
// expert scaled by sigmoid(shared_expert_gate(x)), or a dense SwiGLU on mlp_only_layers /
// off-step layers.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);  // biases from ModelConfig::qkv_bias
  spec.qk_norm = false;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));  // with the shared expert where the config has one
  return layer;
}

}  // namespace

DecoderRecipe qwen2_moe(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

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
  const std::string p = layer_prefix(i);
  DecoderLayer layer;
  FT_ASSIGN_OR_RETURN(layer.input_norm,
                      w.rms_norm(p + "input_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, false));
  FT_ASSIGN_OR_RETURN(layer.post_norm,
                      w.rms_norm(p + "post_attention_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, false));
  AttentionSpec spec = attention_spec(cfg);  // biases from ModelConfig::qkv_bias
  spec.qk_norm = false;
  FT_ASSIGN_OR_RETURN(layer.attention, AttentionBlock::load(w, p + "self_attn.", spec));
  if (cfg.is_moe_layer(i)) {
    FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p + "mlp.", moe_spec(cfg)));  // with the shared expert
  } else {
    FT_ASSIGN_OR_RETURN(layer.mlp, w.swiglu(p + "mlp.", cfg.hidden_size, cfg.intermediate_size));
  }
  return layer;
}

}  // namespace

DecoderRecipe qwen2_moe(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

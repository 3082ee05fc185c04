// Qwen3-MoE (model_type "qwen3_moe", Qwen3MoeForCausalLM; Qwen3-30B-A3B, Qwen3-235B-A22B):
// every layer is softmax attention with q/k RMSNorm and plain RMSNorms; the feed-forward is a
// top-k softmax-routed MoE (renormalised when norm_topk_prob) without a shared expert, or a dense
// SwiGLU on mlp_only_layers / off-step layers.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  const std::string p = layer_prefix(i);
  DecoderLayer layer;
  FT_ASSIGN_OR_RETURN(layer.input_norm, w.rms_norm(p + "input_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, false));
  FT_ASSIGN_OR_RETURN(layer.post_norm,
                      w.rms_norm(p + "post_attention_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, false));
  FT_ASSIGN_OR_RETURN(layer.attention, AttentionBlock::load(w, p + "self_attn.", attention_spec(cfg)));
  if (cfg.is_moe_layer(i)) {
    FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p + "mlp.", moe_spec(cfg)));
  } else {
    FT_ASSIGN_OR_RETURN(layer.mlp, w.swiglu(p + "mlp.", cfg.hidden_size, cfg.intermediate_size));
  }
  return layer;
}

}  // namespace

DecoderRecipe qwen3_moe(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

// AFMoE (model_type "afmoe", AfmoeForCausalLM; Arcee's Trinity models): GQA with per-head q/k
// RMSNorm, an output gate of its own projection (o_proj(attn * sigmoid(gate_proj(x)))), RoPE on
// the sliding-window layers only (the global layers, every global_attn_every_n_layers-th, take no
// positions), sandwich norms around both the attention and the feed-forward; the first
// num_dense_layers layers dense, the rest a MoE with DeepSeek-V3's sigmoid router (expert_bias for
// the choice, renormalised, route_scale) and ungated shared experts.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);
  spec.gate_proj = true;
  const bool sliding = cfg.is_sliding_layer(i);
  spec.window = sliding ? cfg.sliding_window : 0;
  if (!sliding) spec.rope.rotary_dim = 0;  // AfmoeAttention rotates only on local layers
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  const std::string p = layer_prefix(i);
  FT_ASSIGN_OR_RETURN(layer.mixer_out_norm,
                      w.rms_norm(p + "post_attention_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, false));
  FT_ASSIGN_OR_RETURN(layer.post_norm,
                      w.rms_norm(p + "pre_mlp_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, false));
  FT_ASSIGN_OR_RETURN(layer.ffn_out_norm,
                      w.rms_norm(p + "post_mlp_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, false));
  if (!cfg.is_moe_layer(i)) {
    FT_ASSIGN_OR_RETURN(layer.mlp, w.swiglu(p + "mlp.", cfg.hidden_size, cfg.intermediate_size));
    return layer;
  }
  MoeSpec ms = moe_spec(cfg);
  ms.router_name = "router.gate.weight";
  ms.correction_bias_names = {"expert_bias"};
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p + "mlp.", ms));
  return layer;
}

}  // namespace

DecoderRecipe afmoe(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

// Gemma 4 (model_type "gemma4_text", Gemma4ForCausalLM; the text model of
// Gemma4ForConditionalGeneration under model.language_model.: Gemma 4 26B-A4B, also the dense
// 31B): embeddings scaled by sqrt(hidden_size); sliding-window layers and full-attention layers with
// heads of their own width and count, whose key projection also gives the values
// (attention_k_eq_v) and whose RoPE is proportional (only a quarter of the frequencies turn);
// per-head RMSNorms of q, k and v (v without a weight), scores unscaled; sandwich norms; a GeGLU
// MLP and, with enable_moe_block, a MoE beside it on the same residual (moe_block.h: its router's
// own norm and per-expert scales, GeGLU experts); each layer's output stream times its
// layer_scalar; the final logits softcapped.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

ref::RopeSpec gemma4_rope(const ModelConfig& cfg, bool sliding, int64_t head_dim) {
  ref::RopeSpec r;
  r.head_dim = std::size_t(head_dim);
  r.rotary_dim = std::size_t(head_dim);  // Gemma 4's plain RoPE turns the whole head
  r.theta = sliding ? cfg.rope_theta : cfg.full_rope.theta;
  if (!sliding && cfg.full_rope.proportional) {
    // HF _compute_proportional_rope_parameters: int(partial_rotary_factor * head_dim // 2) angles.
    r.proportional_angles = std::size_t(cfg.full_rope.partial_rotary_factor * double(head_dim) / 2.0);
  }
  return r;
}

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  const bool sliding = cfg.is_sliding_layer(i);
  AttentionSpec spec = attention_spec(cfg);
  spec.head_dim = cfg.attention_head_dim(i);
  spec.kv_heads = cfg.attention_kv_heads(i);
  spec.window = sliding ? cfg.sliding_window : 0;
  spec.rope = gemma4_rope(cfg, sliding, spec.head_dim);
  spec.scale = 1.0f;
  spec.v_norm = true;
  spec.k_eq_v = !sliding && cfg.attention_k_eq_v;

  const std::string p = layer_prefix(i);
  const float eps = cfg.rms_norm_eps;
  const int64_t H = cfg.hidden_size;
  DecoderLayer layer;
  FT_ASSIGN_OR_RETURN(layer.input_norm, w.rms_norm(p + "input_layernorm.weight", H, eps, false));
  FT_ASSIGN_OR_RETURN(layer.attention, AttentionBlock::load(w, p + "self_attn.", spec));
  FT_ASSIGN_OR_RETURN(layer.mixer_out_norm, w.rms_norm(p + "post_attention_layernorm.weight", H, eps, false));
  FT_ASSIGN_OR_RETURN(layer.post_norm, w.rms_norm(p + "pre_feedforward_layernorm.weight", H, eps, false));
  FT_ASSIGN_OR_RETURN(layer.ffn_out_norm, w.rms_norm(p + "post_feedforward_layernorm.weight", H, eps, false));
  FT_ASSIGN_OR_RETURN(SwiGluMatrices mlp, w.swiglu(p + "mlp.", H, cfg.intermediate_size));
  layer.mlp.emplace(mlp, /*gelu=*/true);
  if (cfg.parallel_moe) {
    DecoderLayer::Parallel par;
    FT_ASSIGN_OR_RETURN(par.moe_in_norm, w.rms_norm(p + "pre_feedforward_layernorm_2.weight", H, eps, false));
    FT_ASSIGN_OR_RETURN(par.mlp_out_norm, w.rms_norm(p + "post_feedforward_layernorm_1.weight", H, eps, false));
    FT_ASSIGN_OR_RETURN(par.moe_out_norm, w.rms_norm(p + "post_feedforward_layernorm_2.weight", H, eps, false));
    layer.parallel.emplace(std::move(par));
    MoeSpec ms = moe_spec(cfg);
    ms.router_name = "router.proj.weight";
    ms.gemma4 = true;
    ms.glu.gelu_tanh = true;
    ms.router_norm_eps = eps;
    FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p, ms));
  }
  FT_ASSIGN_OR_RETURN(Vector scalar, w.vector(p + "layer_scalar", {1}));
  layer.output_scale = scalar.host.front();
  return layer;
}

}  // namespace

DecoderRecipe gemma4_text(const Checkpoint& ckpt) {
  // Gemma4ForConditionalGeneration keeps the text model under model.language_model. (lm_head tied).
  if (ckpt.has("model.language_model.embed_tokens.weight")) {
    return {"model.language_model.", /*zero_centered_norms=*/false, build_layer};
  }
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

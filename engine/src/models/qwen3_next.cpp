// Qwen3-Next (model_type "qwen3_next", Qwen3NextForCausalLM; Qwen3-Next-80B-A3B): hybrid layers,
// three Gated DeltaNet layers per softmax-attention layer (layer_types / full_attention_interval).
// Differences from Qwen3-MoE: zero-centred RMSNorms (1 + w) everywhere, gated full attention
// (q_proj also writes a sigmoid output gate), a shared expert behind a sigmoid gate, and DeltaNet
// projections fused per key-head group (in_proj_qkvz / in_proj_ba).
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  const std::string p = layer_prefix(i);
  DecoderLayer layer;
  FT_ASSIGN_OR_RETURN(layer.input_norm, w.rms_norm(p + "input_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, true));
  FT_ASSIGN_OR_RETURN(layer.post_norm,
                      w.rms_norm(p + "post_attention_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, true));
  if (cfg.layer_types[std::size_t(i)] == LayerKind::kLinearAttention) {
    const auto spec = linear_attention_spec(cfg, ref::DeltaNetProjLayout::kQwen3NextFused);
    FT_ASSIGN_OR_RETURN(layer.linear_attention, LinearAttentionBlock::load(w, p + "linear_attn.", spec));
  } else {
    AttentionSpec spec = attention_spec(cfg);
    spec.gated = true;
    spec.zero_centered_qk_norm = true;
    FT_ASSIGN_OR_RETURN(layer.attention, AttentionBlock::load(w, p + "self_attn.", spec));
  }
  if (cfg.is_moe_layer(i)) {
    FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p + "mlp.", moe_spec(cfg)));
  } else {
    FT_ASSIGN_OR_RETURN(layer.mlp, w.swiglu(p + "mlp.", cfg.hidden_size, cfg.intermediate_size));
  }
  return layer;
}

}  // namespace

DecoderRecipe qwen3_next(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/true, build_layer};
}

}  // namespace ft::engine::models

// Llama 4 (model_type "llama4_text", Llama4ForCausalLM; the text model of Llama4ForConditionalGeneration:
// Llama 4 Scout and Maverick): GQA without biases; RoPE on adjacent pairs (Llama 3 scaling where the
// config says) on most layers, which attend in chunks of attention_chunk_size and norm the rotated
// q and k without weights (use_qk_norm); every no_rope_layer_interval-th layer takes no positions,
// sees the whole context and scales its queries by the attention temperature. The feed-forward is
// at feed_forward.: a top-1 MoE whose expert takes the input scaled by its sigmoid score, plus a
// shared expert, on moe_layers; a dense SwiGLU intermediate_size_mlp wide elsewhere.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);
  spec.qk_norm = false;
  if (cfg.is_nope_layer(i)) {
    spec.rope.rotary_dim = 0;
    if (cfg.attn_temperature_tuning) {
      spec.temperature_floor_scale = float(cfg.floor_scale);
      spec.temperature_attn_scale = float(cfg.attn_scale);
    }
  } else if (cfg.use_qk_norm) {
    spec.qk_norm = true;
    spec.qk_norm_unweighted = true;
    spec.qk_norm_after_rope = true;
  }
  if (cfg.is_chunked_layer(i)) spec.chunk = cfg.attention_chunk_size;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  const std::string p = layer_prefix(i) + "feed_forward.";
  if (!cfg.is_moe_layer(i)) {
    FT_ASSIGN_OR_RETURN(layer.mlp, w.swiglu(p, cfg.hidden_size, cfg.intermediate_size));
    return layer;
  }
  MoeSpec ms = moe_spec(cfg);
  ms.llama4 = true;
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p, ms));
  return layer;
}

}  // namespace

DecoderRecipe llama4_text(const Checkpoint& ckpt) {
  // Llama4ForConditionalGeneration keeps the text model and its lm_head under language_model.
  if (ckpt.has("language_model.model.embed_tokens.weight")) {
    return {"language_model.model.", /*zero_centered_norms=*/false, build_layer, "language_model.lm_head.weight"};
  }
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

// ERNIE 4.5 MoE (model_type "ernie4_5_moe", Ernie4_5_MoeForCausalLM; ERNIE-4.5-21B-A3B,
// ERNIE-4.5-300B-A47B, text only): Llama's GQA attention with RoPE on interleaved pairs (HF's
// repeat_interleave'd cos/sin and GLM's rotate_half), no q/k norms; MoE layers where
// (i + 1) % moe_layer_interval == 0 between moe_layer_start_index and moe_layer_end_index, dense
// SwiGLU elsewhere; the router takes softmax scores, chooses by score + moe_statics'
// e_score_correction_bias, renormalises the chosen scores, and ungated shared experts are added.
// use_bias (biases everywhere) is refused by the config parser; the MTP layers are not loaded.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);  // rope_spec: interleaved pairs (cfg.rope_interleave)
  spec.qk_norm = false;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));
  return layer;
}

}  // namespace

DecoderRecipe ernie4_5_moe(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

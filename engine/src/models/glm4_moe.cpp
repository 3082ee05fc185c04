// GLM-4.5 / 4.6 / 4.7 (model_type "glm4_moe", Glm4MoeForCausalLM): GQA softmax attention with
// biases on q/k/v (attention_bias) but none on o_proj, RoPE over the first half of each head
// (partial_rotary_factor, NeoX pairing) and, when use_qk_norm, per-head q/k RMSNorms before it;
// the feed-forward is dense below first_k_dense_replace, above it the DeepSeek-V3 router (sigmoid
// scores, e_score_correction_bias for the choice, expert groups, routed_scaling_factor) with ungated
// shared experts. The multi-token-prediction layer past num_hidden_layers is not loaded.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);
  spec.qk_norm = cfg.use_qk_norm;
  spec.o_bias = false;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));
  return layer;
}

}  // namespace

DecoderRecipe glm4_moe(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

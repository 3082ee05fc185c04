// dots.llm1 (model_type "dots1", Dots1ForCausalLM; rednote-hilab/dots.llm1.base and .inst): Qwen3's
// attention (per-head q/k RMSNorm, biases per attention_bias) with DeepSeek-V3's feed-forward: dense
// below first_k_dense_replace, above it the sigmoid router with e_score_correction_bias, expert
// groups and routed_scaling_factor, plus ungated shared experts. Sliding-window layers are refused by
// the config parser.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, attention_spec(cfg)));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));  // moe_spec(cfg): the sigmoid router
  return layer;
}

}  // namespace

DecoderRecipe dots1(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

// Qwen3-MoE (model_type "qwen3_moe", Qwen3MoeForCausalLM; Qwen3-30B-A3B, Qwen3-235B-A22B):
// every layer is softmax attention with q/k RMSNorm and plain RMSNorms; the feed-forward is a
// top-k softmax-routed MoE (renormalised when norm_topk_prob) without a shared expert, or a dense
// SwiGLU on mlp_only_layers / off-step layers.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, attention_spec(cfg)));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));
  return layer;
}

}  // namespace

DecoderRecipe qwen3_moe(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

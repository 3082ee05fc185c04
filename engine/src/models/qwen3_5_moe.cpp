// Qwen3.5 / Qwen3.6 MoE (model_type "qwen3_5_moe", Qwen3_5MoeForConditionalGeneration): the
// Qwen3-Next text stack inside a multimodal wrapper. Text-only, so the vision tower is not loaded
// and mRoPE reduces to plain RoPE (all three position ids equal). Differences from Qwen3-Next:
// tensors under model.language_model.* (lm_head.weight at the top level), separate DeltaNet
// projections (in_proj_qkv / in_proj_z / in_proj_b / in_proj_a), every layer MoE, and the router
// always renormalises its top-k (ModelConfig forces norm_topk_prob).
#include "ft/engine/checkpoint.h"
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, hybrid_delta_net_layer(w, cfg, i, ref::DeltaNetProjLayout::kQwen3_5Split));
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, layer_prefix(i) + "mlp.", moe_spec(cfg)));
  return layer;
}

}  // namespace

DecoderRecipe qwen3_5_moe(const Checkpoint& ckpt) {
  // The multimodal checkpoint nests the decoder; a text-only export (Qwen3_5MoeForCausalLM) does not.
  const std::string prefix =
      ckpt.has("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  return {prefix, /*zero_centered_norms=*/true, build_layer};
}

}  // namespace ft::engine::models

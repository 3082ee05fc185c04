// DeepSeek-V3 (model_type "deepseek_v3", DeepseekV3ForCausalLM; DeepSeek-V3, DeepSeek-R1, and Kimi K2,
// whose config says "kimi_k2"): multi-head latent attention in every layer (mla_attention_block.h),
// then a dense SwiGLU below first_k_dense_replace and above it a MoE whose router scores with
// sigmoids, chooses with e_score_correction_bias among the topk_group best of n_group expert
// groups, renormalises (norm_topk_prob) and scales by routed_scaling_factor, plus ungated shared
// experts (mlp.shared_experts.*). The multi-token-prediction layers past num_hidden_layers are not
// loaded (HF ignores them too); FP8 weights are refused by the loader (bf16 / fp16 / fp32 only).
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, layer_with_norms(w, cfg, i, /*zero_centered=*/false));
  FT_ASSIGN_OR_RETURN(layer.mla_attention, MlaAttentionBlock::load(w, layer_prefix(i) + "self_attn.", mla_spec(cfg)));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));  // dense below first_k_dense_replace
  return layer;
}

}  // namespace

DecoderRecipe deepseek_v3(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

// GLM-5 (model_type "glm_moe_dsa", GlmMoeDsaForCausalLM): GLM-4.7-Flash's layout (glm4_moe_lite.cpp)
// at a larger size with DeepSeek sparse attention: every layer's latent attention (interleaved rope
// pairs) has a lightning indexer (dsa_indexer.h) whose rope also pairs interleaved dims, so each
// query attends to only the index_topk earlier positions it scores highest. Dense SwiGLU layers
// where mlp_layer_types says (the first first_k_dense_replace by default), elsewhere the
// DeepSeek-V3 router with ungated shared experts. Layers that reuse an earlier layer's top-k
// (indexer_types "shared") are refused by the config parser. The multi-token-prediction layer past
// num_hidden_layers is not loaded (HF ignores it too).
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, layer_with_norms(w, cfg, i, /*zero_centered=*/false));
  MlaSpec spec = mla_spec(cfg);
  spec.indexer = dsa_indexer_spec(cfg);
  FT_ASSIGN_OR_RETURN(layer.mla_attention, MlaAttentionBlock::load(w, layer_prefix(i) + "self_attn.", spec));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));
  return layer;
}

}  // namespace

DecoderRecipe glm_moe_dsa(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

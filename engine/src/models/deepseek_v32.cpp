// DeepSeek-V3.2 (model_type "deepseek_v32", DeepseekV32ForCausalLM; DeepSeek-V3.2-Exp): DeepSeek-V3
// (deepseek_v3.cpp) with DeepSeek sparse attention. Every layer's latent attention (interleaved rope
// pairs, always) has a lightning indexer (dsa_indexer.h: its own query from the q LoRA latent, a
// LayerNorm'd key per token, NeoX rope halves) that lets each query attend to only the index_topk
// earlier positions it scores highest. The feed-forward is a dense SwiGLU where mlp_layer_types
// says "dense" (the first first_k_dense_replace layers by default), elsewhere the DeepSeek-V3 router
// with ungated shared experts. The multi-token-prediction layer past num_hidden_layers is not
// loaded (HF ignores it too); FP8 weights are refused by the loader.
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

DecoderRecipe deepseek_v32(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

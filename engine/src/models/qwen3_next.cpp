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
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, hybrid_delta_net_layer(w, cfg, i, ref::DeltaNetProjLayout::kQwen3NextFused));
  FT_RETURN_IF_ERROR(load_feed_forward(w, cfg, i, layer));
  return layer;
}

}  // namespace

DecoderRecipe qwen3_next(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/true, build_layer};
}

}  // namespace ft::engine::models

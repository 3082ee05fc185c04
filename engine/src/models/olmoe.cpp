// OLMoE (model_type "olmoe", OlmoeForCausalLM; OLMoE-1B-7B): softmax attention whose q_norm and
// k_norm are RMSNorms over the whole q and k projections (hidden_size and kv_heads * head_dim wide),
// not per head, with biases on q/k/v/o when attention_bias; every layer is a top-k softmax-routed
// MoE (renormalised only when norm_topk_prob) without a shared expert. clip_qkv and a sliding window
// are refused by the config parser.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);
  spec.qk_norm_per_head = false;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, layer_prefix(i) + "mlp.", moe_spec(cfg)));
  return layer;
}

}  // namespace

DecoderRecipe olmoe(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

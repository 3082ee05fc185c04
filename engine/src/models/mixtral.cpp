// Mixtral (model_type "mixtral", MixtralForCausalLM; Mixtral-8x7B, Mixtral-8x22B): every layer is
// softmax attention without q/k norms or biases, then a top-k MoE whose router always renormalises
// its top-k softmax weights, no shared expert and no dense layers. The MoE block is
// `block_sparse_moe` with experts.N.w1/w3/w2 in the released checkpoints (and in what HF 5.x
// save_pretrained writes); HF 5.x modules call it `mlp` with fused experts, read as well.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  const std::string p = layer_prefix(i);
  AttentionSpec spec = attention_spec(cfg);
  spec.qk_norm = false;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  const std::string moe = w.has(p + "block_sparse_moe.gate.weight") ? "block_sparse_moe." : "mlp.";
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p + moe, moe_spec(cfg)));
  return layer;
}

}  // namespace

DecoderRecipe mixtral(const Checkpoint&) {
  return {"model.", /*zero_centered_norms=*/false, build_layer};
}

}  // namespace ft::engine::models

// MiniMax-M2 (model_type "minimax_m2", MiniMaxM2ForCausalLM): GQA whose q_norm and k_norm are
// RMSNorms over the whole q and k projections (OLMo 2's attention), no biases, RoPE over the first
// rotary_dim dims of each head (NeoX pairing); every layer a Mixtral-style MoE
// (block_sparse_moe, experts w1/w3/w2 intermediate_size wide, or HF 5.x's fused mlp.experts) whose
// router takes sigmoid scores, chooses by score + e_score_correction_bias (kept beside the router)
// and renormalises the chosen scores; no shared expert. The released weights are FP8, which the
// loader refuses (bf16 / fp16 / fp32 only).
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  const std::string p = layer_prefix(i);
  AttentionSpec spec = attention_spec(cfg);
  spec.qk_norm_per_head = false;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  const std::string moe = w.has(p + "block_sparse_moe.gate.weight") ? "block_sparse_moe." : "mlp.";
  MoeSpec ms = moe_spec(cfg);
  ms.correction_bias_names = {"e_score_correction_bias"};
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p + moe, ms));
  return layer;
}

}  // namespace

DecoderRecipe minimax_m2(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

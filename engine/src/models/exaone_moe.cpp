// EXAONE MoE (model_type "exaone_moe", ExaoneMoeForCausalLM; K-EXAONE): GQA with per-head q/k
// RMSNorm and no biases; sliding-window layers with RoPE and, every sliding_window_pattern-th layer,
// global attention without positions (NoPE: HF rotates only the sliding layers once a window is
// set); dense SwiGLU layers where mlp_layer_types (or first_k_dense_replace) says, else DeepSeek-V3's
// sigmoid router choosing with e_score_correction_bias (kept beside the router), expert groups and
// routed_scaling_factor, plus ungated shared experts.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);  // per-head q/k norms, no biases
  const bool sliding = cfg.is_sliding_layer(i);
  spec.window = sliding ? cfg.sliding_window : 0;
  if (cfg.sliding_window > 0 && !sliding) spec.rope.rotary_dim = 0;  // the global layers: NoPE
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  const std::string p = layer_prefix(i) + "mlp.";
  if (!cfg.is_moe_layer(i)) {
    FT_ASSIGN_OR_RETURN(layer.mlp, w.swiglu(p, cfg.hidden_size, cfg.intermediate_size));
    return layer;
  }
  MoeSpec ms = moe_spec(cfg);
  ms.correction_bias_names = {"e_score_correction_bias", "gate.e_score_correction_bias"};
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p, ms));
  return layer;
}

}  // namespace

DecoderRecipe exaone_moe(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

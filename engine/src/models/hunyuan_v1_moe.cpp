// Hunyuan-A13B (model_type "hunyuan_v1_moe", HunYuanMoEV1ForCausalLM): GQA with biases on q/k/v/o
// when attention_bias, NeoX RoPE over the whole head, and then, unlike Qwen3, per-head RMSNorms of
// the rotated q and k (self_attn.query_layernorm / key_layernorm), so the KV pages hold normed keys;
// every layer a MoE whose router (mlp.gate.wg) takes softmax scores over all experts, keeps the
// moe_topk best and renormalises them, its experts intermediate_size wide, plus an ungated shared
// MLP of the same width (mlp.shared_mlp.*) added to their sum. Cross-layer attention (use_cla) is
// not in HF's code and not here.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);
  spec.qk_norm_after_rope = true;
  spec.q_norm_name = "query_layernorm.weight";
  spec.k_norm_name = "key_layernorm.weight";
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  MoeSpec ms = moe_spec(cfg);
  ms.router_name = "gate.wg.weight";
  ms.shared_gated = false;
  ms.ungated_shared_name = "shared_mlp.";
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, layer_prefix(i) + "mlp.", ms));
  return layer;
}

}  // namespace

DecoderRecipe hunyuan_v1_moe(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

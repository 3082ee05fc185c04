// DeepSeek-V4 (model_type "deepseek_v4", DeepseekV4ForCausalLM; DeepSeek-V4-Flash, -Pro;
// docs/deepseek-v4.md): the residual is hc_mult streams joined by manifold-constrained
// hyper-connections (hyper_connection.h: each sub-layer reads their collapse and writes back into
// every stream; a head collapses them before the final norm). Every layer's attention
// (v4_attention_block.h) is one K = V head with sinks over a sliding window, plus compressed
// entries on compressed_sparse_attention (picked by a lightning indexer) and
// heavily_compressed_attention layers (all visible); every feed-forward a MoE with one clamped
// shared expert, routed from a token-id table on hash_moe layers and by sqrt-softplus scores plus
// a correction bias on moe layers. The multi-token-prediction layers (mtp.*) are not loaded (HF
// drops them too).
//
// Tensor names: the releases' (embed.weight, layers.N.{attn_norm, ffn_norm, hc_attn_*, hc_ffn_*,
// attn.*, ffn.*}, norm.weight, hc_head_{fn,base,scale}, head.weight) or HF 5.17's save_pretrained's,
// the same under "model." but for head.weight and model.embed_tokens.weight, model.hc_head.hc_*
// and attn.norm for attn.kv_norm.
#include "ft/engine/deepseek_v4_specs.h"
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<HyperConnection> connection(const WeightLoader& w, const std::string& name, const ModelConfig& cfg) {
  return HyperConnection::load(w, name + "fn", name + "base", name + "scale", v4_hyper_spec(cfg), /*head=*/false);
}

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  if (cfg.deepseek_v4.mlp_bias) return unsupported("deepseek_v4: mlp_bias (biases on the shared expert)");
  const std::string p = layer_prefix(i);
  const int64_t H = cfg.hidden_size;
  DecoderLayer layer;
  FT_ASSIGN_OR_RETURN(layer.input_norm, w.rms_norm(p + "attn_norm.weight", H, cfg.rms_norm_eps, false));
  FT_ASSIGN_OR_RETURN(layer.post_norm, w.rms_norm(p + "ffn_norm.weight", H, cfg.rms_norm_eps, false));
  FT_ASSIGN_OR_RETURN(HyperConnection mixer, connection(w, p + "hc_attn_", cfg));
  FT_ASSIGN_OR_RETURN(HyperConnection ffn, connection(w, p + "hc_ffn_", cfg));
  layer.hyper.emplace(DecoderLayer::Hyper{std::move(mixer), std::move(ffn)});
  FT_ASSIGN_OR_RETURN(layer.v4_attention, V4AttentionBlock::load(w, p + "attn.", v4_attention_block_spec(cfg, i)));
  MoeSpec ms;
  ms.hidden = H;
  ms.moe_inter = cfg.moe_intermediate_size;
  ms.shared_inter = cfg.shared_expert_intermediate_size;
  ms.router = v4_router_spec(cfg);
  ms.glu = v4_expert_glu(cfg);
  ms.deepseek_v4 = true;
  const bool hash = cfg.deepseek_v4.routers[std::size_t(i)] == V4RouterKind::kHashMoe;
  ms.hash_vocab = hash ? cfg.vocab_size : 0;
  ms.correction_bias = !hash;
  ms.correction_bias_names = {"gate.bias", "gate.e_score_correction_bias"};
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, p + "ffn.", ms));
  return layer;
}

Result<HyperConnection> head(const WeightLoader& w, const ModelConfig& cfg) {
  const std::string name = w.has("hc_head.hc_fn") ? "hc_head.hc_" : "hc_head_";
  return HyperConnection::load(w, name + "fn", name + "base", name + "scale", v4_hyper_spec(cfg), /*head=*/true);
}

}  // namespace

DecoderRecipe deepseek_v4(const Checkpoint& ckpt) {
  const bool released = ckpt.has("embed.weight");
  DecoderRecipe r{released ? "" : "model.", /*zero_centered_norms=*/false, build_layer, "head.weight",
                  released ? "embed.weight" : "embed_tokens.weight"};
  r.hyper_head = head;
  r.check_backend = [](const Backend& be) -> Status {
    if (be.has_v4_ops()) return Status::ok();
    return unsupported("deepseek_v4 (mHC, compressed attention) is not implemented on " + be.device_name() +
                       " yet: use --device cpu");
  };
  return r;
}

}  // namespace ft::engine::models

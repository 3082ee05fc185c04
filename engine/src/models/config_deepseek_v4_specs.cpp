// deepseek_v4_specs.h: the op specs of a parsed deepseek_v4 config.
#include <cmath>
#include <cstddef>

#include "ft/engine/deepseek_v4_specs.h"

namespace ft::engine {
namespace {

V4AttentionKind kind_of(const ModelConfig& cfg, int64_t layer) {
  const auto& kinds = cfg.deepseek_v4.attention;
  return layer >= 0 && std::size_t(layer) < kinds.size() ? kinds[std::size_t(layer)] : V4AttentionKind::kSliding;
}

}  // namespace

HyperSpec v4_hyper_spec(const ModelConfig& cfg) {
  const ModelConfig::DeepseekV4& v4 = cfg.deepseek_v4;
  HyperSpec s;
  s.streams = std::size_t(v4.hc_mult);
  s.dim = std::size_t(cfg.hidden_size);
  s.sinkhorn_iters = std::size_t(v4.hc_sinkhorn_iters);
  s.eps = float(v4.hc_eps);
  s.norm_eps = cfg.rms_norm_eps;
  return s;
}

ref::RopeSpec v4_rope_spec(const ModelConfig& cfg, bool compress) {
  const ModelConfig::DeepseekV4& v4 = cfg.deepseek_v4;
  ref::RopeSpec r;
  r.head_dim = std::size_t(cfg.qk_rope_head_dim);
  r.rotary_dim = std::size_t(cfg.qk_rope_head_dim);
  r.layout = ref::RopeLayout::kGptj;
  r.theta = compress ? v4.compress_rope_theta : cfg.rope_theta;
  if (compress && v4.compress_rope_type == "yarn") {
    r.yarn.factor = v4.compress_yarn.factor;
    r.yarn.beta_fast = v4.compress_yarn.beta_fast;
    r.yarn.beta_slow = v4.compress_yarn.beta_slow;
    r.yarn.original_max_position_embeddings = v4.compress_yarn.original_max_position_embeddings;
    r.yarn.truncate = true;
  }
  r.attention_factor = 1.0f;
  return r;
}

ref::RopeSpec v4_layer_rope_spec(const ModelConfig& cfg, int64_t layer) {
  return v4_rope_spec(cfg, kind_of(cfg, layer) != V4AttentionKind::kSliding);
}

V4AttentionSpec v4_attention_spec(const ModelConfig& cfg, int64_t layer) {
  V4AttentionSpec s;
  s.heads = std::size_t(cfg.num_attention_heads);
  s.head_dim = std::size_t(cfg.head_dim);
  s.rope_dims = std::size_t(cfg.qk_rope_head_dim);
  // HF's scaling is the Python float head_dim ** -0.5, rounded to fp32 where it meets the scores.
  s.scale = float(std::pow(double(cfg.head_dim), -0.5));
  s.window = cfg.sliding_window;
  s.rate = std::size_t(cfg.deepseek_v4.compress_rate(layer));
  return s;
}

CompressorSpec v4_compressor_spec(const ModelConfig& cfg, int64_t layer) {
  CompressorSpec s;
  s.width = std::size_t(cfg.head_dim);
  s.rate = std::size_t(cfg.deepseek_v4.compress_rate(layer));
  s.overlap = kind_of(cfg, layer) == V4AttentionKind::kCsa;
  s.rope_dims = std::size_t(cfg.qk_rope_head_dim);
  s.norm_eps = cfg.rms_norm_eps;
  return s;
}

CompressorSpec v4_index_compressor_spec(const ModelConfig& cfg, int64_t layer) {
  CompressorSpec s;
  s.width = std::size_t(cfg.index_head_dim);
  s.rate = kind_of(cfg, layer) == V4AttentionKind::kCsa ? std::size_t(cfg.deepseek_v4.csa_rate) : 0;
  s.overlap = true;
  s.rope_dims = std::size_t(cfg.qk_rope_head_dim);
  s.norm_eps = cfg.rms_norm_eps;
  return s;
}

IndexerSpec v4_indexer_spec(const ModelConfig& cfg) {
  return v4_indexer_spec(std::size_t(cfg.index_n_heads), std::size_t(cfg.index_head_dim), std::size_t(cfg.index_topk));
}

ref::RouterSpec v4_router_spec(const ModelConfig& cfg) {
  ref::RouterSpec s;
  s.num_experts = std::size_t(cfg.num_experts);
  s.top_k = std::size_t(cfg.num_experts_per_tok);
  s.scoring =
      cfg.deepseek_v4.scoring_func == "sigmoid" ? ref::RouterScoring::kSigmoid : ref::RouterScoring::kSqrtSoftplus;
  s.renormalize = true;
  s.scaling = float(cfg.routed_scaling_factor);
  return s;
}

ref::ExpertGlu v4_expert_glu(const ModelConfig& cfg) {
  ref::ExpertGlu g;
  g.clamped = true;
  g.alpha = 1.0f;
  g.limit = float(cfg.deepseek_v4.swiglu_limit);
  g.up_offset = 0.0f;
  return g;
}

}  // namespace ft::engine

#include "blocks/dsa_indexer.h"

#include <cmath>

#include "blocks/decoder.h"

namespace ft::engine::blocks {
namespace {

// HF builds k_norm as nn.LayerNorm(index_head_dim, eps=1e-6) whatever the config says.
constexpr float kKeyNormEps = 1e-6f;

}  // namespace

DsaIndexerSpec dsa_indexer_spec(const ModelConfig& cfg) {
  DsaIndexerSpec s;
  s.hidden = cfg.hidden_size;
  s.q_lora_rank = cfg.q_lora_rank;
  s.heads = cfg.index_n_heads;
  s.head_dim = cfg.index_head_dim;
  s.top_k = cfg.index_topk;
  s.rope = rope_spec(cfg, cfg.index_head_dim);  // the attention's frequencies (YaRN's too), rotary_dim qk_rope
  s.rope.layout = cfg.index_rope_interleave ? ref::RopeLayout::kGptj : ref::RopeLayout::kNeox;
  return s;
}

Result<DsaIndexer> DsaIndexer::load(const WeightLoader& w, const std::string& prefix, const DsaIndexerSpec& spec) {
  // A backend without the indexer and sparse attention ops refuses the model here rather than run
  // it as dense attention, which would be another model (every backend has them at present).
  if (!w.backend().has_sparse_attention()) {
    return unsupported(
        "DeepSeek sparse attention (the lightning indexer of deepseek_v32 / glm_moe_dsa) is not implemented on " +
        w.backend().device_name() + ": use --device cpu");
  }
  DsaIndexer b;
  b.spec_ = spec;
  const int64_t H = spec.heads, D = spec.head_dim;
  FT_ASSIGN_OR_RETURN(b.wq_b_, w.linear(prefix + "wq_b", H * D, spec.q_lora_rank));
  FT_ASSIGN_OR_RETURN(b.wk_, w.linear(prefix + "wk", D, spec.hidden));
  FT_ASSIGN_OR_RETURN(b.k_norm_weight_, w.vector(prefix + "k_norm.weight", {D}));
  FT_ASSIGN_OR_RETURN(b.k_norm_bias_, w.vector(prefix + "k_norm.bias", {D}));
  FT_ASSIGN_OR_RETURN(b.weights_proj_, w.linear(prefix + "weights_proj", H, spec.hidden));
  FT_ASSIGN_OR_RETURN(b.inv_freq_, w.place(ref::rope_inv_freq(spec.rope)));
  return b;
}

void DsaIndexer::keys(Backend& be, const float* x, std::size_t T, const int64_t* positions, float* k) const {
  wk_.forward(be, x, k, T);
  be.layer_norm(k, k_norm_weight_.data(), k_norm_bias_.data(), k, T, std::size_t(spec_.head_dim), kKeyNormEps);
  be.rope(k, T, 1, spec_.rope, inv_freq_.data(), positions);
}

void DsaIndexer::select(Backend& be, const KvLayout& kv, int64_t kv_layer, int64_t kv_slot, const float* x,
                        const float* q_latent, std::size_t T, std::span<const AttentionSeq> seqs,
                        const int64_t* positions, int32_t* selected) const {
  const std::size_t H = std::size_t(spec_.heads), D = std::size_t(spec_.head_dim);
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);
  float* q = s.floats(T * H * D);
  float* weights = s.floats(T * H);
  wq_b_.forward(be, q_latent, q, T);
  be.rope(q, T, H, spec_.rope, inv_freq_.data(), positions);
  weights_proj_.forward(be, x, weights, T);
  IndexerSpec call;
  call.heads = H;
  call.head_dim = D;
  // HF: softmax_scale = head_dim ** -0.5 and weights * n_heads ** -0.5, Python doubles meeting
  // fp32 tensors as floats.
  call.scale = float(std::pow(double(D), -0.5));
  call.weight_scale = float(std::pow(double(H), -0.5));
  call.top_k = std::size_t(spec_.top_k);
  call.kv_slot = kv_slot;
  be.index_select(kv, kv_layer, q, weights, call, seqs, selected);
}

}  // namespace ft::engine::blocks

#include "blocks/linear_attention_block.h"

namespace ft::engine::blocks {

Result<LinearAttentionBlock> LinearAttentionBlock::load(const WeightLoader& w, const std::string& prefix,
                                                        const LinearAttentionSpec& spec) {
  LinearAttentionBlock b;
  b.spec_ = spec;
  // A Qwen3-Next GGUF holds the split projections (its converter took in_proj_qkvz apart, and
  // gguf_hf.cpp takes in_proj_ba apart): the same values in Qwen3.5's layout.
  if (spec.layout == ref::DeltaNetProjLayout::kQwen3NextFused && !w.has(prefix + "in_proj_qkvz.weight") &&
      w.has(prefix + "in_proj_qkv.weight")) {
    b.spec_.layout = ref::DeltaNetProjLayout::kQwen3_5Split;
  }
  const ref::DeltaNetDims& d = spec.dims;
  const int64_t hidden = int64_t(d.hidden), nv = int64_t(d.num_v_heads);
  const int64_t key_dim = int64_t(d.key_dim()), value_dim = int64_t(d.value_dim());
  if (b.spec_.layout == ref::DeltaNetProjLayout::kQwen3NextFused) {
    FT_ASSIGN_OR_RETURN(b.qkvz_, w.matrix(prefix + "in_proj_qkvz.weight", {2 * key_dim + 2 * value_dim, hidden}));
    FT_ASSIGN_OR_RETURN(b.ba_, w.matrix(prefix + "in_proj_ba.weight", {2 * nv, hidden}));
  } else {
    FT_ASSIGN_OR_RETURN(b.qkv_, w.matrix(prefix + "in_proj_qkv.weight", {2 * key_dim + value_dim, hidden}));
    FT_ASSIGN_OR_RETURN(b.z_, w.matrix(prefix + "in_proj_z.weight", {value_dim, hidden}));
    FT_ASSIGN_OR_RETURN(b.b_, w.matrix(prefix + "in_proj_b.weight", {nv, hidden}));
    FT_ASSIGN_OR_RETURN(b.a_, w.matrix(prefix + "in_proj_a.weight", {nv, hidden}));
  }
  FT_ASSIGN_OR_RETURN(b.conv1d_, w.vector(prefix + "conv1d.weight", {int64_t(d.conv_dim()), 1, int64_t(d.conv_kernel)}));
  FT_ASSIGN_OR_RETURN(b.dt_bias_, w.vector(prefix + "dt_bias", {nv}));
  FT_ASSIGN_OR_RETURN(b.a_log_, w.vector(prefix + "A_log", {nv}));
  FT_ASSIGN_OR_RETURN(b.norm_, w.vector(prefix + "norm.weight", {int64_t(d.head_v_dim)}));
  FT_ASSIGN_OR_RETURN(b.out_proj_, w.matrix(prefix + "out_proj.weight", {hidden, value_dim}));
  FT_RETURN_IF_ERROR(ref::validate_deltanet_dims(d));
  return b;
}

LinearState LinearAttentionBlock::empty_state(int64_t layer) const {
  const ref::DeltaNetDims& d = spec_.dims;
  LinearState s;
  s.layer = layer;
  s.conv_shape = {int64_t(d.conv_dim()), int64_t(d.conv_kernel) - 1};
  s.recurrent_shape = {int64_t(d.num_v_heads), int64_t(d.head_k_dim), int64_t(d.head_v_dim)};
  return s;
}

void LinearAttentionBlock::forward(Backend& be, const float* x, std::size_t T, std::span<const DeltaNetSeq> seqs,
                                   float* out) const {
  const ref::DeltaNetDims& d = spec_.dims;
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);
  float* qkv = s.floats(T * d.conv_dim());
  float* z = s.floats(T * d.value_dim());
  float* b = s.floats(T * d.num_v_heads);
  float* a = s.floats(T * d.num_v_heads);
  if (spec_.layout == ref::DeltaNetProjLayout::kQwen3NextFused) {
    float* qkvz = s.floats(T * std::size_t(qkvz_.rows));
    float* ba = s.floats(T * std::size_t(ba_.rows));
    const Backend::LinearOut outs[] = {{&qkvz_, nullptr, qkvz}, {&ba_, nullptr, ba}};
    be.linears(x, T, outs);
    be.deltanet_unfuse(d, qkvz, ba, T, qkv, z, b, a);
  } else {
    const Backend::LinearOut outs[] = {{&qkv_, nullptr, qkv}, {&z_, nullptr, z}, {&b_, nullptr, b}, {&a_, nullptr, a}};
    be.linears(x, T, outs);
  }
  float* core = s.floats(T * d.value_dim());
  const DeltaNetParams params{conv1d_.data(), dt_bias_.data(), a_log_.data(), norm_.data()};
  be.deltanet(d, params, qkv, z, b, a, seqs, core);
  be.linear(core, T, out_proj_, nullptr, out);
}

}  // namespace ft::engine::blocks

#include "blocks/linear_attention_block.h"

namespace ft::engine::blocks {

Result<LinearAttentionBlock> LinearAttentionBlock::load(const WeightLoader& w, const std::string& prefix,
                                                        const LinearAttentionSpec& spec) {
  LinearAttentionBlock b;
  b.spec_ = spec;
  const ref::DeltaNetDims& d = spec.dims;
  const int64_t hidden = int64_t(d.hidden), nv = int64_t(d.num_v_heads);
  const int64_t key_dim = int64_t(d.key_dim()), value_dim = int64_t(d.value_dim());
  if (spec.layout == ref::DeltaNetProjLayout::kQwen3NextFused) {
    FT_ASSIGN_OR_RETURN(b.qkvz_, w.tensor(prefix + "in_proj_qkvz.weight", {2 * key_dim + 2 * value_dim, hidden}));
    FT_ASSIGN_OR_RETURN(b.ba_, w.tensor(prefix + "in_proj_ba.weight", {2 * nv, hidden}));
  } else {
    FT_ASSIGN_OR_RETURN(b.qkv_, w.tensor(prefix + "in_proj_qkv.weight", {2 * key_dim + value_dim, hidden}));
    FT_ASSIGN_OR_RETURN(b.z_, w.tensor(prefix + "in_proj_z.weight", {value_dim, hidden}));
    FT_ASSIGN_OR_RETURN(b.b_, w.tensor(prefix + "in_proj_b.weight", {nv, hidden}));
    FT_ASSIGN_OR_RETURN(b.a_, w.tensor(prefix + "in_proj_a.weight", {nv, hidden}));
  }
  FT_ASSIGN_OR_RETURN(b.conv1d_, w.tensor(prefix + "conv1d.weight", {int64_t(d.conv_dim()), 1, int64_t(d.conv_kernel)}));
  FT_ASSIGN_OR_RETURN(b.dt_bias_, w.tensor(prefix + "dt_bias", {nv}));
  FT_ASSIGN_OR_RETURN(b.a_log_, w.tensor(prefix + "A_log", {nv}));
  FT_ASSIGN_OR_RETURN(b.norm_, w.tensor(prefix + "norm.weight", {int64_t(d.head_v_dim)}));
  FT_ASSIGN_OR_RETURN(b.out_proj_, w.tensor(prefix + "out_proj.weight", {hidden, value_dim}));
  FT_RETURN_IF_ERROR(ref::validate_deltanet(d, b.weights()));
  return b;
}

ref::DeltaNetWeights LinearAttentionBlock::weights() const {
  auto ptr = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  ref::DeltaNetWeights w;
  w.layout = spec_.layout;
  w.in_proj_qkvz = ptr(qkvz_);
  w.in_proj_ba = ptr(ba_);
  w.in_proj_qkv = ptr(qkv_);
  w.in_proj_z = ptr(z_);
  w.in_proj_b = ptr(b_);
  w.in_proj_a = ptr(a_);
  w.conv1d = ptr(conv1d_);
  w.dt_bias = ptr(dt_bias_);
  w.A_log = ptr(a_log_);
  w.norm = ptr(norm_);
  w.out_proj = ptr(out_proj_);
  return w;
}

LinearState LinearAttentionBlock::empty_state() const {
  const ref::DeltaNetDims& d = spec_.dims;
  LinearState s;
  s.conv_shape = {int64_t(d.conv_dim()), int64_t(d.conv_kernel) - 1};
  s.recurrent_shape = {int64_t(d.num_v_heads), int64_t(d.head_k_dim), int64_t(d.head_v_dim)};
  const ref::DeltaNetStateSizes sizes = ref::deltanet_state_sizes(d);
  s.conv.assign(sizes.conv_floats, 0.0f);
  s.recurrent.assign(sizes.recurrent_floats, 0.0f);
  return s;
}

Status LinearAttentionBlock::forward(const float* x, std::size_t T, LinearState& state, float* out) const {
  return ref::deltanet_forward(spec_.dims, weights(), x, T, {state.conv.data(), state.recurrent.data()}, out);
}

}  // namespace ft::engine::blocks

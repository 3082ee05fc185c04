#include "blocks/moe_block.h"

#include <cstring>

#include "ft/engine/ops_dense.h"

namespace ft::engine::blocks {
namespace {

Result<std::vector<SwiGlu>> load_fused_experts(const WeightLoader& w, const std::string& prefix, int64_t E,
                                               int64_t hidden, int64_t inter) {
  const std::string gate_up = prefix + "experts.gate_up_proj", down = prefix + "experts.down_proj";
  const std::vector<int64_t> gate_up_shape = {E, 2 * inter, hidden}, down_shape = {E, hidden, inter};
  std::vector<SwiGlu> experts(static_cast<std::size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    SwiGlu& m = experts[std::size_t(e)];
    FT_ASSIGN_OR_RETURN(m.gate, w.slice_linear(gate_up, gate_up_shape, e, 0, inter));
    FT_ASSIGN_OR_RETURN(m.up, w.slice_linear(gate_up, gate_up_shape, e, inter, inter));
    FT_ASSIGN_OR_RETURN(m.down, w.slice_linear(down, down_shape, e, 0, hidden));
  }
  return experts;
}

}  // namespace

Result<MoeBlock> MoeBlock::load(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec) {
  MoeBlock b;
  b.spec_ = spec;
  const int64_t E = int64_t(spec.router.num_experts);
  FT_ASSIGN_OR_RETURN(b.router_, w.linear(prefix + "gate", E, spec.hidden));
  if (w.has(prefix + "experts.gate_up_proj")) {
    FT_ASSIGN_OR_RETURN(b.experts_, load_fused_experts(w, prefix, E, spec.hidden, spec.moe_inter));
  } else {
    b.experts_.reserve(std::size_t(E));
    for (int64_t e = 0; e < E; ++e) {
      FT_ASSIGN_OR_RETURN(SwiGlu m, w.swiglu(prefix + "experts." + std::to_string(e) + ".", spec.hidden,
                                                spec.moe_inter));
      b.experts_.push_back(std::move(m));
    }
  }
  if (spec.shared_inter > 0) {
    b.has_shared_ = true;
    FT_ASSIGN_OR_RETURN(b.shared_, w.swiglu(prefix + "shared_expert.", spec.hidden, spec.shared_inter));
    FT_ASSIGN_OR_RETURN(b.shared_gate_, w.linear(prefix + "shared_expert_gate", 1, spec.hidden));
  }
  return b;
}

void MoeBlock::forward(const float* x, float* out, std::size_t T) const {
  const std::size_t H = std::size_t(spec_.hidden), E = spec_.router.num_experts, K = spec_.router.top_k;
  std::vector<float> logits(T * E), weights(T * K);
  std::vector<int32_t> chosen(T * K);
  router_.forward(x, logits.data(), T);
  ref::route_top_k(logits.data(), T, spec_.router, chosen.data(), weights.data());

  // Group tokens by expert so each expert's weights are used once for all its tokens, and add the
  // experts in ascending index order as HF's loop over expert_hit does.
  std::vector<std::vector<std::pair<std::size_t, float>>> routed(E);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t i = 0; i < K; ++i) routed[std::size_t(chosen[t * K + i])].push_back({t, weights[t * K + i]});
  }
  std::fill(out, out + T * H, 0.0f);
  std::vector<float> xs, ys;
  for (std::size_t e = 0; e < E; ++e) {
    const auto& tokens = routed[e];
    if (tokens.empty()) continue;
    const std::size_t n = tokens.size();
    xs.resize(n * H);
    ys.resize(n * H);
    for (std::size_t j = 0; j < n; ++j) std::memcpy(&xs[j * H], x + tokens[j].first * H, H * sizeof(float));
    experts_[e].forward(xs.data(), ys.data(), n);
    for (std::size_t j = 0; j < n; ++j) {
      float* o = out + tokens[j].first * H;
      const float wgt = tokens[j].second;
      for (std::size_t d = 0; d < H; ++d) o[d] += ys[j * H + d] * wgt;
    }
  }
  if (has_shared_) {
    std::vector<float> shared(T * H), gate(T);
    shared_.forward(x, shared.data(), T);
    shared_gate_.forward(x, gate.data(), T);
    for (std::size_t t = 0; t < T; ++t) {
      const float g = ref::sigmoid(gate[t]);
      for (std::size_t d = 0; d < H; ++d) out[t * H + d] += g * shared[t * H + d];
    }
  }
}

}  // namespace ft::engine::blocks

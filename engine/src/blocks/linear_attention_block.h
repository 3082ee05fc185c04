// Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): loads one layer's weights in either
// projection layout and runs ref::deltanet_forward (ops_deltanet.h) on the layer's LinearState.
#pragma once

#include <string>
#include <vector>

#include "blocks/weights.h"
#include "ft/engine/ops_deltanet.h"
#include "ft/engine/sequence_state.h"

namespace ft::engine::blocks {

struct LinearAttentionSpec {
  ref::DeltaNetDims dims;
  ref::DeltaNetProjLayout layout = ref::DeltaNetProjLayout::kQwen3_5Split;
};

class LinearAttentionBlock {
 public:
  // prefix: e.g. "layers.0.linear_attn." (relative to the loader's prefix).
  static Result<LinearAttentionBlock> load(const WeightLoader& w, const std::string& prefix,
                                           const LinearAttentionSpec& spec);

  // A zeroed state of the right shapes (the state before the first token).
  LinearState empty_state() const;

  // x [T, hidden] (already normed) -> out [T, hidden], advancing `state`.
  Status forward(const float* x, std::size_t T, LinearState& state, float* out) const;

 private:
  LinearAttentionSpec spec_;
  // Owned storage behind the raw pointers of ref::DeltaNetWeights.
  std::vector<float> qkvz_, ba_, qkv_, z_, b_, a_, conv1d_, dt_bias_, a_log_, norm_, out_proj_;
  ref::DeltaNetWeights weights() const;
};

}  // namespace ft::engine::blocks

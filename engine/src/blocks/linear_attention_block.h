// Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): one layer's weights in either projection
// layout; the projections and out_proj are backend linears, the conv / delta rule / gated norm in
// between is Backend::deltanet.
#pragma once

#include <span>
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

  // The state of model layer `layer` before the first token: its shapes (the sequence gives it
  // zeroed memory when it first runs).
  LinearState empty_state(int64_t layer) const;

  // x [T, hidden] (already normed) -> out [T, hidden], each sequence's rows advancing its state.
  void forward(Backend& be, const float* x, std::size_t T, std::span<const DeltaNetSeq> seqs, float* out) const;

 private:
  LinearAttentionSpec spec_;
  Matrix qkvz_, ba_, qkv_, z_, b_, a_, out_proj_;
  Vector conv1d_, dt_bias_, a_log_, norm_;
};

}  // namespace ft::engine::blocks

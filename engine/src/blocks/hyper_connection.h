// DeepSeek-V4's manifold-constrained hyper-connections (mHC; HF DeepseekV4HyperConnection and
// DeepseekV4HyperHead, ops_hyper.h): the residual between layers is N = hc_mult streams of the
// hidden size, h [T, N, hidden]. Before each sub-layer pre() collapses the streams into its input
// and makes the weights post() writes the sub-layer's output back into every stream with; the head
// collapses them once more before the model's final norm. The parameters are fp32 (F32 in the
// released checkpoints; widened at load where stored narrower).
#pragma once

#include <string>

#include "blocks/weights.h"
#include "ft/engine/ops_hyper.h"

namespace ft::engine::blocks {

class HyperConnection {
 public:
  // A sub-layer's connection (fn [(2+N)N, N*D], base [(2+N)N], scale [3]) or, with head, the
  // model's head (fn [N, N*D], base [N], scale [1]); the three tensors' names.
  static Result<HyperConnection> load(const WeightLoader& w, const std::string& fn, const std::string& base,
                                      const std::string& scale, const HyperSpec& spec, bool head);

  const HyperSpec& spec() const { return spec_; }
  // h [T, N, D] -> x [T, D], post [T, N], comb [T, N, N].
  void pre(Backend& be, const float* h, std::size_t T, float* x, float* post, float* comb) const {
    be.hc_pre(h, fn_.data(), base_.data(), scale_.data(), T, spec_, x, post, comb);
  }
  // h [T, N, D] in place: every stream k gets post[k] * out + sum_j comb[j, k] * h[j].
  void post(Backend& be, float* h, const float* out, const float* post, const float* comb, std::size_t T) const {
    be.hc_post(h, out, post, comb, T, spec_, h);
  }
  // The head's collapse: h [T, N, D] -> y [T, D].
  void head(Backend& be, const float* h, std::size_t T, float* y) const {
    be.hc_head(h, fn_.data(), base_.data(), scale_.data(), T, spec_, y);
  }

 private:
  HyperSpec spec_;
  Vector fn_, base_, scale_;
};

}  // namespace ft::engine::blocks

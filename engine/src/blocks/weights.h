// Weight containers the blocks are built from, and the loader that fills them from a checkpoint.
// Matrices stay in the mapped file in their stored dtype (Matrix views); only the small vectors
// (norm weights, biases, DeltaNet's per-head parameters) are converted to fp32 at load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/backend.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/matrix.h"

namespace ft::engine::blocks {

// nn.Linear: weight [out, in], optional bias [out].
struct Linear {
  Matrix weight;
  std::vector<float> bias;  // empty: no bias

  int64_t out() const { return weight.rows; }
  const float* bias_or_null() const { return bias.empty() ? nullptr : bias.data(); }
  int64_t in() const { return weight.cols; }
  // y [T, out] = x [T, in] * W^T (+ b).
  void forward(Backend& be, const float* x, float* y, std::size_t T) const {
    be.linear(x, T, weight, bias.empty() ? nullptr : bias.data(), y);
  }
};

// The SwiGLU MLP of dense layers: down(silu(gate(x)) * up(x)).
struct SwiGlu {
  SwiGlu(SwiGluMatrices m) : w(m) {}  // NOLINT: implicit, so a loaded MLP assigns straight in
  SwiGluMatrices w;
  // out [T, hidden] = mlp(x [T, hidden]); out may not alias x.
  void forward(Backend& be, const float* x, float* out, std::size_t T) const;
};

// RMSNorm over the last dimension; zero_centered: the stored weight is an offset from 1 (Qwen3-Next,
// Qwen3.5).
struct RmsNorm {
  std::vector<float> weight;
  float eps = 1e-6f;
  bool zero_centered = false;

  void forward(Backend& be, const float* x, float* out, std::size_t rows) const {  // out may alias x
    be.rms_norm(x, weight.data(), out, rows, weight.size(), eps, zero_centered);
  }
};

// Reads tensors named `prefix + name` (prefix e.g. "model." or "model.language_model.").
class WeightLoader {
 public:
  WeightLoader(const Checkpoint& checkpoint, std::string prefix)
      : ckpt_(checkpoint), prefix_(std::move(prefix)) {}

  const Checkpoint& checkpoint() const { return ckpt_; }
  std::string full_name(const std::string& name) const { return prefix_ + name; }
  bool has(const std::string& name) const { return ckpt_.has(full_name(name)); }

  // A small tensor converted to fp32 (norm weights, biases, per-head parameters).
  Result<std::vector<float>> vector(const std::string& name, const std::vector<int64_t>& shape) const;
  // A matrix (2-D, or a 3-D tensor's [n * R, cols] rows) as a view in its stored dtype; F32, F16
  // and BF16 are accepted, anything else is kUnsupported naming the tensor.
  Result<Matrix> matrix(const std::string& name, const std::vector<int64_t>& shape) const;
  // `name` without ".weight"; name.weight [out, in] and, when `bias`, name.bias [out].
  Result<Linear> linear(const std::string& name, int64_t out, int64_t in, bool bias = false) const;
  Result<RmsNorm> rms_norm(const std::string& name, int64_t dim, float eps, bool zero_centered) const;
  // A SwiGLU MLP: prefix + {gate,up,down}_proj.weight.
  Result<SwiGluMatrices> swiglu(const std::string& prefix, int64_t hidden, int64_t inter) const;
  // Rows [row0, row0 + rows) of slice `index` of a 3-D tensor [n, R, cols]: fused expert tensors
  // are read one expert (and one half) at a time this way, in place.
  Result<Matrix> slice(const std::string& name, const std::vector<int64_t>& shape, int64_t index, int64_t row0,
                       int64_t rows) const;

 private:
  Result<TensorView> float_tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  const Checkpoint& ckpt_;
  std::string prefix_;
};

}  // namespace ft::engine::blocks

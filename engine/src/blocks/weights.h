// Weight containers the blocks are built from, and the loader that fills them from a checkpoint
// (any float dtype -> fp32, with a shape check naming the tensor on mismatch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/checkpoint.h"

namespace ft::engine::blocks {

// nn.Linear: weight [out, in] row-major, optional bias [out].
struct Linear {
  int64_t out = 0;
  int64_t in = 0;
  std::vector<float> weight;
  std::vector<float> bias;  // empty: no bias

  // y [T, out] = x [T, in] * W^T (+ b).
  void forward(const float* x, float* y, std::size_t T) const;
};

// The SwiGLU MLP used for routed experts, the shared expert and dense layers:
//   down(silu(gate(x)) * up(x)).
struct SwiGlu {
  Linear gate;  // [inter, hidden]
  Linear up;    // [inter, hidden]
  Linear down;  // [hidden, inter]

  int64_t hidden() const { return gate.in; }
  int64_t inter() const { return gate.out; }
  // out [T, hidden] = mlp(x [T, hidden]); out may not alias x.
  void forward(const float* x, float* out, std::size_t T) const;
};

// RMSNorm over the last dimension; zero_centered: the stored weight is an offset from 1 (Qwen3-Next,
// Qwen3.5).
struct RmsNorm {
  std::vector<float> weight;
  float eps = 1e-6f;
  bool zero_centered = false;

  void forward(const float* x, float* out, std::size_t rows) const;  // out may alias x
};

// Reads tensors named `prefix + name` (prefix e.g. "model." or "model.language_model.").
class WeightLoader {
 public:
  WeightLoader(const Checkpoint& checkpoint, std::string prefix)
      : ckpt_(checkpoint), prefix_(std::move(prefix)) {}

  const Checkpoint& checkpoint() const { return ckpt_; }
  std::string full_name(const std::string& name) const { return prefix_ + name; }
  bool has(const std::string& name) const { return ckpt_.has(full_name(name)); }

  Result<std::vector<float>> tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // `name` without ".weight"; loads name.weight [out, in] and, when `bias`, name.bias [out].
  Result<Linear> linear(const std::string& name, int64_t out, int64_t in, bool bias = false) const;
  Result<RmsNorm> rms_norm(const std::string& name, int64_t dim, float eps, bool zero_centered) const;
  // A SwiGLU MLP: prefix + {gate,up,down}_proj.weight.
  Result<SwiGlu> swiglu(const std::string& prefix, int64_t hidden, int64_t inter) const;
  // Rows [row0, row0 + rows) of slice `index` of a 3-D tensor [n, R, cols], as a Linear
  // [rows, cols]. Fused expert tensors are read one expert (and one half) at a time this way.
  Result<Linear> slice_linear(const std::string& name, const std::vector<int64_t>& shape, int64_t index,
                              int64_t row0, int64_t rows) const;

 private:
  const Checkpoint& ckpt_;
  std::string prefix_;
};

}  // namespace ft::engine::blocks

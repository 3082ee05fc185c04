// Weight containers the blocks are built from, and the loader that fills them from a checkpoint.
// Matrices stay in the mapped file in their stored dtype (Matrix views); only the small vectors
// (norm weights, biases, DeltaNet's per-head parameters) are converted to fp32 at load. The loader
// places everything where the model's backend reads it (Backend::place: VRAM for the GPU).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/backend.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/matrix.h"

namespace ft::engine::blocks {

// A small fp32 parameter: its values on the host and the pointer the backend's ops read (the host
// values themselves, or their copy in VRAM). Moved, never copied: the pointer may be into `host`.
struct Vector {
  Vector() = default;
  Vector(Vector&&) = default;
  Vector& operator=(Vector&&) = default;
  Vector(const Vector&) = delete;
  Vector& operator=(const Vector&) = delete;

  std::vector<float> host;
  const float* placed = nullptr;

  const float* data() const { return placed; }
  std::size_t size() const { return host.size(); }
  bool empty() const { return host.empty(); }
};

// nn.Linear: weight [out, in], optional bias [out].
struct Linear {
  Matrix weight;
  Vector bias;  // empty: no bias

  int64_t out() const { return weight.rows; }
  const float* bias_or_null() const { return bias.empty() ? nullptr : bias.data(); }
  int64_t in() const { return weight.cols; }
  // y [T, out] = x [T, in] * W^T (+ b).
  void forward(Backend& be, const float* x, float* y, std::size_t T) const {
    be.linear(x, T, weight, bias_or_null(), y);
  }
};

// The SwiGLU MLP of dense layers: down(silu(gate(x)) * up(x)); with gelu_tanh the GeGLU
// down(gelu_tanh(gate(x)) * up(x)) (Gemma); with glu, down(ref::expert_glu(gate(x), up(x)))
// (DeepSeek-V4's shared expert, clamped as its routed experts are).
struct SwiGlu {
  SwiGlu(SwiGluMatrices m, bool gelu = false)
      : w(m), gelu_tanh(gelu) {}  // NOLINT: implicit, so a loaded MLP assigns straight in
  SwiGluMatrices w;
  bool gelu_tanh = false;
  std::optional<ref::ExpertGlu> glu;
  // out [T, hidden] = mlp(x [T, hidden]); out may not alias x.
  void forward(Backend& be, const float* x, float* out, std::size_t T) const;
};

// RMSNorm over the last dimension; zero_centered: the stored weight is an offset from 1 (Qwen3-Next,
// Qwen3.5).
struct RmsNorm {
  Vector weight;
  float eps = 1e-6f;
  bool zero_centered = false;

  void forward(Backend& be, const float* x, float* out, std::size_t rows) const {  // out may alias x
    be.rms_norm(x, weight.data(), out, rows, weight.size(), eps, zero_centered);
  }
  // hidden += delta, then out = norm(hidden): a residual add and the norm after it.
  void add_forward(Backend& be, float* hidden, const float* delta, float* out, std::size_t rows) const {
    be.add_rms_norm(hidden, delta, weight.data(), out, rows, weight.size(), eps, zero_centered);
  }
};

// Reads tensors named `prefix + name` (prefix e.g. "model." or "model.language_model.") and places
// them for `backend`.
class WeightLoader {
 public:
  // `placed_bytes` (optional) counts the bytes of every matrix placed through this loader.
  WeightLoader(const Checkpoint& checkpoint, std::string prefix, Backend& backend,
               std::uint64_t* placed_bytes = nullptr)
      : ckpt_(checkpoint), prefix_(std::move(prefix)), be_(backend), placed_bytes_(placed_bytes) {}

  const Checkpoint& checkpoint() const { return ckpt_; }
  // The backend the weights are placed for (what its ops can do decides what a block may load).
  const Backend& backend() const { return be_; }
  // The same loader for a layer's routed experts: their matrices are placed with
  // Backend::place_expert (left in host memory when the model's experts are offloaded).
  WeightLoader experts() const {
    WeightLoader l = *this;
    l.experts_ = true;
    return l;
  }
  // Values computed at load (e.g. RoPE frequencies), placed like a loaded vector.
  Result<Vector> place(std::vector<float> values) const;
  std::string full_name(const std::string& name) const { return prefix_ + name; }
  bool has(const std::string& name) const { return ckpt_.has(full_name(name)); }

  // A small tensor converted to fp32 (norm weights, biases, per-head parameters).
  Result<Vector> vector(const std::string& name, const std::vector<int64_t>& shape) const;
  // A matrix (2-D, or a 3-D tensor's [n * R, cols] rows) as a view in its stored dtype; F32, F16,
  // BF16 and the GGUF block dtypes are accepted, anything else is kUnsupported naming the tensor.
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
  // Columns col0, col0 + step, ... (`count` of them; -1: to the end) of slice `index` of a 3-D
  // tensor [n, R, C] stored [in, out] (gpt-oss's and Llama 4's experts as HF saves them in bf16),
  // transposed into host memory the backend owns (Backend::host_buffer) as a [out, R] matrix in the
  // stored dtype (exact), and placed: the copy the engine's [out, in] kernels need.
  Result<Matrix> transposed(const std::string& name, const std::vector<int64_t>& shape, int64_t index, int64_t col0,
                            int64_t step, int64_t count = -1) const;
  // Rows row0, row0 + step, ... (`count` of them) of slice `index` of a 3-D tensor [n, R, cols] in
  // its stored dtype (any: rows are whole blocks), copied into host memory the backend owns and
  // placed: gate and up of gpt-oss's block-dtype experts, whose rows interleave.
  Result<Matrix> strided_rows(const std::string& name, const std::vector<int64_t>& shape, int64_t index, int64_t row0,
                              int64_t step, int64_t count) const;

 private:
  // F32, F16 or BF16 (what transposed() can move element by element).
  Result<TensorView> float_tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // Those or a block dtype (the ops read any of them; a backend may still refuse one in place()).
  Result<TensorView> weight_tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  Result<Matrix> placed(Matrix m, const std::string& name) const;  // name: for the backend's refusal
  const Checkpoint& ckpt_;
  std::string prefix_;
  Backend& be_;
  std::uint64_t* placed_bytes_;
  bool experts_ = false;
};

}  // namespace ft::engine::blocks

#include "blocks/weights.h"

#include "ft/engine/ops.h"
#include "ft/engine/ops_dense.h"

namespace ft::engine::blocks {

void Linear::forward(const float* x, float* y, std::size_t T) const {
  ref::linear(x, weight.data(), bias.empty() ? nullptr : bias.data(), y, T, std::size_t(out), std::size_t(in));
}

void SwiGlu::forward(const float* x, float* out, std::size_t T) const {
  const std::size_t n = T * std::size_t(inter());
  std::vector<float> g(n), u(n);
  gate.forward(x, g.data(), T);
  up.forward(x, u.data(), T);
  ref::silu_mul(g.data(), u.data(), g.data(), n);
  down.forward(g.data(), out, T);
}

void RmsNorm::forward(const float* x, float* out, std::size_t rows) const {
  ref::rms_norm(x, weight.data(), out, rows, weight.size(), eps, zero_centered);
}

Result<RmsNorm> WeightLoader::rms_norm(const std::string& name, int64_t dim, float eps, bool zero_centered) const {
  RmsNorm n;
  n.eps = eps;
  n.zero_centered = zero_centered;
  FT_ASSIGN_OR_RETURN(n.weight, tensor(name, {dim}));
  return n;
}

Result<std::vector<float>> WeightLoader::tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  return ckpt_.load_f32(full_name(name), shape);
}

Result<Linear> WeightLoader::linear(const std::string& name, int64_t out, int64_t in, bool bias) const {
  Linear l;
  l.out = out;
  l.in = in;
  FT_ASSIGN_OR_RETURN(l.weight, tensor(name + ".weight", {out, in}));
  if (bias) {
    FT_ASSIGN_OR_RETURN(l.bias, tensor(name + ".bias", {out}));
  }
  return l;
}

Result<SwiGlu> WeightLoader::swiglu(const std::string& prefix, int64_t hidden, int64_t inter) const {
  SwiGlu m;
  FT_ASSIGN_OR_RETURN(m.gate, linear(prefix + "gate_proj", inter, hidden));
  FT_ASSIGN_OR_RETURN(m.up, linear(prefix + "up_proj", inter, hidden));
  FT_ASSIGN_OR_RETURN(m.down, linear(prefix + "down_proj", hidden, inter));
  return m;
}

Result<Linear> WeightLoader::slice_linear(const std::string& name, const std::vector<int64_t>& shape, int64_t index,
                                          int64_t row0, int64_t rows) const {
  FT_ASSIGN_OR_RETURN(TensorView view, ckpt_.tensor(full_name(name), shape));
  const int64_t cols = shape[2];
  Linear l;
  l.out = rows;
  l.in = cols;
  l.weight.resize(std::size_t(rows * cols));
  const std::size_t offset = std::size_t((index * shape[1] + row0) * cols);
  FT_RETURN_IF_ERROR(to_f32(view, l.weight.data(), offset, l.weight.size()));
  return l;
}

}  // namespace ft::engine::blocks

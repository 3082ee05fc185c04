#include "blocks/weights.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ft::engine::blocks {

void SwiGlu::forward(Backend& be, const float* x, float* out, std::size_t T) const {
  Scratch::Frame frame(be.scratch());
  const std::size_t n = T * std::size_t(w.inter());
  float* g = be.scratch().floats(n);
  float* u = be.scratch().floats(n);
  const Backend::LinearOut gate_up[] = {{&w.gate, nullptr, g}, {&w.up, nullptr, u}};
  be.linears(x, T, gate_up);
  if (glu) {
    be.expert_glu(*glu, g, u, g, n);
  } else if (gelu_tanh) {
    be.gelu_tanh_mul(g, u, g, n);
  } else {
    be.silu_mul(g, u, g, n);
  }
  be.linear(g, T, w.down, nullptr, out);
}

Result<TensorView> WeightLoader::float_tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  FT_ASSIGN_OR_RETURN(TensorView view, ckpt_.tensor(full_name(name), shape));
  if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
    return unsupported("tensor '" + view.name + "' has dtype " + dtype_name(view.dtype) +
                       "; this build reads F32, F16 and BF16 weights");
  }
  return view;
}

Result<TensorView> WeightLoader::weight_tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  FT_ASSIGN_OR_RETURN(TensorView view, ckpt_.tensor(full_name(name), shape));
  if (!dtype_is_block(view.dtype) && view.dtype != DType::kF32 && view.dtype != DType::kF16 &&
      view.dtype != DType::kBF16) {
    return unsupported("tensor '" + view.name + "' has dtype " + dtype_name(view.dtype) +
                       "; this build reads F32, F16, BF16 and GGUF's block dtypes");
  }
  return view;
}

Result<Vector> WeightLoader::place(std::vector<float> values) const {
  Vector v;
  v.host = std::move(values);
  FT_ASSIGN_OR_RETURN(v.placed, be_.place(std::span<const float>(v.host)));
  return v;
}

Result<Vector> WeightLoader::vector(const std::string& name, const std::vector<int64_t>& shape) const {
  FT_ASSIGN_OR_RETURN(TensorView view, weight_tensor(name, shape));
  std::vector<float> out(std::size_t(view.numel()));
  FT_RETURN_IF_ERROR(to_f32(view, out.data(), 0, out.size()));
  return place(std::move(out));
}

Result<Matrix> WeightLoader::placed(Matrix m, const std::string& name) const {
  if (Status s = experts_ ? be_.place_expert(m) : be_.place(m); !s.is_ok()) {
    return Status(s.code(), "tensor '" + name + "': " + s.message());
  }
  if (placed_bytes_) *placed_bytes_ += m.bytes();
  return m;
}

Result<Matrix> WeightLoader::matrix(const std::string& name, const std::vector<int64_t>& shape) const {
  FT_ASSIGN_OR_RETURN(TensorView view, weight_tensor(name, shape));
  return placed(matrix_view(view), view.name);
}

Result<Linear> WeightLoader::linear(const std::string& name, int64_t out, int64_t in, bool bias) const {
  Linear l;
  FT_ASSIGN_OR_RETURN(l.weight, matrix(name + ".weight", {out, in}));
  if (bias) {
    FT_ASSIGN_OR_RETURN(l.bias, vector(name + ".bias", {out}));
  }
  return l;
}

Result<RmsNorm> WeightLoader::rms_norm(const std::string& name, int64_t dim, float eps, bool zero_centered) const {
  RmsNorm n;
  n.eps = eps;
  n.zero_centered = zero_centered;
  FT_ASSIGN_OR_RETURN(n.weight, vector(name, {dim}));
  return n;
}

Result<SwiGluMatrices> WeightLoader::swiglu(const std::string& prefix, int64_t hidden, int64_t inter) const {
  SwiGluMatrices m;
  FT_ASSIGN_OR_RETURN(m.gate, matrix(prefix + "gate_proj.weight", {inter, hidden}));
  FT_ASSIGN_OR_RETURN(m.up, matrix(prefix + "up_proj.weight", {inter, hidden}));
  FT_ASSIGN_OR_RETURN(m.down, matrix(prefix + "down_proj.weight", {hidden, inter}));
  return m;
}

namespace {

// out [n, R] = columns col0, col0 + step, ... of src [R, C], in blocks that stay in cache.
template <typename T>
void transpose_columns(const T* src, int64_t R, int64_t C, int64_t col0, int64_t step, int64_t n, T* out) {
  constexpr int64_t kBlock = 64;
  for (int64_t r0 = 0; r0 < R; r0 += kBlock)
    for (int64_t o0 = 0; o0 < n; o0 += kBlock)
      for (int64_t r = r0; r < std::min(R, r0 + kBlock); ++r)
        for (int64_t o = o0; o < std::min(n, o0 + kBlock); ++o) out[o * R + r] = src[r * C + col0 + o * step];
}

}  // namespace

Result<Matrix> WeightLoader::transposed(const std::string& name, const std::vector<int64_t>& shape, int64_t index,
                                        int64_t col0, int64_t step, int64_t count) const {
  FT_ASSIGN_OR_RETURN(TensorView view, float_tensor(name, shape));
  const int64_t R = shape[1], C = shape[2];
  const int64_t n = count >= 0 ? std::min(count, (C - col0 + step - 1) / step) : (C - col0 + step - 1) / step;
  const std::size_t es = dtype_size(view.dtype);
  const std::byte* src = view.data + std::size_t(index * R * C) * es;
  const std::span<std::byte> store = be_.host_buffer(std::size_t(n * R) * es);
  if (es == 2) {
    transpose_columns(reinterpret_cast<const std::uint16_t*>(src), R, C, col0, step, n,
                      reinterpret_cast<std::uint16_t*>(store.data()));
  } else {
    transpose_columns(reinterpret_cast<const std::uint32_t*>(src), R, C, col0, step, n,
                      reinterpret_cast<std::uint32_t*>(store.data()));
  }
  return placed(Matrix{view.dtype, n, R, store.data(), std::size_t(R) * es, nullptr}, view.name);
}

Result<Matrix> WeightLoader::strided_rows(const std::string& name, const std::vector<int64_t>& shape, int64_t index,
                                          int64_t row0, int64_t step, int64_t count) const {
  FT_ASSIGN_OR_RETURN(TensorView view, weight_tensor(name, shape));
  const Matrix all = matrix_view(view, index, 0, shape[1]);
  if (row0 < 0 || step < 1 || count < 0 || row0 + (count - 1) * step >= all.rows)
    return invalid_argument("rows " + std::to_string(row0) + " + " + std::to_string(step) + "k of '" + name +
                            "' run past its " + std::to_string(all.rows) + " rows");
  const std::span<std::byte> store = be_.host_buffer(std::size_t(count) * all.row_bytes);
  for (int64_t r = 0; r < count; ++r)
    std::memcpy(store.data() + std::size_t(r) * all.row_bytes, all.row(row0 + r * step), all.row_bytes);
  return placed(Matrix{view.dtype, count, all.cols, store.data(), all.row_bytes, nullptr}, view.name);
}

Result<Matrix> WeightLoader::slice(const std::string& name, const std::vector<int64_t>& shape, int64_t index,
                                   int64_t row0, int64_t rows) const {
  FT_ASSIGN_OR_RETURN(TensorView view, weight_tensor(name, shape));
  return placed(matrix_view(view, index, row0, rows), view.name);
}

}  // namespace ft::engine::blocks

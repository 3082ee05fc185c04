// Weights as the checkpoint stores them. A Matrix is a view: dtype, [rows, cols] row-major (the
// nn.Linear [out, in] layout), and the address of its bytes inside the mapped checkpoint file. It
// is never converted: every op reads it in its stored dtype. GGUF's block dtypes (Q4_K, Q8_0,
// MXFP4, ...) are dtypes like any other: a row is cols / block elems blocks (row_bytes says how
// many bytes), dequantised a row at a time by the reference path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ft/engine/checkpoint.h"

namespace ft::engine {

struct Matrix {
  DType dtype = DType::kBF16;
  int64_t rows = 0;
  int64_t cols = 0;
  const std::byte* data = nullptr;  // row 0; not owned (the mapped checkpoint)
  std::size_t row_bytes = 0;        // stride between rows
  // Row 0 of the same bytes in a GPU's memory, once a backend placed them there (Backend::place);
  // the same layout and stride. Null while the matrix lives in host memory only.
  const std::byte* device = nullptr;

  bool empty() const { return data == nullptr; }
  const std::byte* row(int64_t r) const { return data + std::size_t(r) * row_bytes; }
  std::size_t bytes() const { return std::size_t(rows) * row_bytes; }
  // Rows [r0, r0 + n) as a matrix of their own (the gate or up half of a fused expert tensor).
  Matrix rows_slice(int64_t r0, int64_t n) const {
    return {dtype, n, cols, row(r0), row_bytes, device ? device + std::size_t(r0) * row_bytes : nullptr};
  }
};

// A view of a 2-D tensor, or of rows [row0, row0 + rows) of slice `index` of a 3-D one
// [n, R, cols] (fused per-expert tensors). The tensor is dense F32/F16/BF16 or of a block dtype
// whose rows are whole blocks (every GGUF tensor is); a row that ends inside a block aborts.
Matrix matrix_view(const TensorView& t);
Matrix matrix_view(const TensorView& t, int64_t index, int64_t row0, int64_t rows);

// Row r of `m` converted to fp32 (`out` holds m.cols floats); block dtypes through the reference
// dequantisers (dequant.h). The reference ops and the fallback paths for dtypes without a fast
// kernel use it; the hot paths read the stored dtype directly.
void matrix_row_f32(const Matrix& m, int64_t r, float* out);
// The whole matrix in fp32: tests and tiny tensors only (never a model's matrices at load).
std::vector<float> matrix_to_f32(const Matrix& m);

// One SwiGLU MLP's matrices (a routed expert, the shared expert or a dense MLP):
//   down(silu(gate(x)) * up(x)), gate/up [inter, hidden], down [hidden, inter].
struct SwiGluMatrices {
  Matrix gate, up, down;
  int64_t hidden() const { return gate.cols; }
  int64_t inter() const { return gate.rows; }
  std::size_t bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

}  // namespace ft::engine

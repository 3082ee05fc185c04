#include "ft/engine/matrix.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ft/engine/bf16.h"
#include "ft/engine/dequant.h"

namespace ft::engine {

namespace {

// Bytes of one row of `cols` values: a whole number of blocks for a block dtype. A row that ends
// inside a block cannot be addressed at all; the GGUF reader refuses such tensors, so meeting one
// here is a bug in the caller.
std::size_t row_bytes_of(const TensorView& t, int64_t cols) {
  const std::optional<std::size_t> n = dtype_bytes(t.dtype, uint64_t(cols));
  if (!n) {
    std::fprintf(stderr, "matrix_view: tensor '%s' (%s): rows of %lld values are not whole blocks\n", t.name.c_str(),
                 dtype_name(t.dtype), static_cast<long long>(cols));
    std::abort();
  }
  return *n;
}

}  // namespace

Matrix matrix_view(const TensorView& t) {
  const int64_t cols = t.shape.empty() ? 0 : t.shape.back();
  const int64_t rows = cols > 0 ? t.numel() / cols : 0;
  return {t.dtype, rows, cols, t.data, row_bytes_of(t, cols)};
}

Matrix matrix_view(const TensorView& t, int64_t index, int64_t row0, int64_t rows) {
  const int64_t per = t.shape.size() == 3 ? t.shape[1] : 0, cols = t.shape.back();
  const std::size_t row_bytes = row_bytes_of(t, cols);
  return {t.dtype, rows, cols, t.data + std::size_t(index * per + row0) * row_bytes, row_bytes};
}

void matrix_row_f32(const Matrix& m, int64_t r, float* out) {
  const std::byte* p = m.row(r);
  const std::size_t n = std::size_t(m.cols);
  switch (m.dtype) {
    case DType::kF32:
      std::memcpy(out, p, n * sizeof(float));
      return;
    case DType::kBF16:
      for (std::size_t i = 0; i < n; ++i) {
        bf16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = bf16_to_f32(v);
      }
      return;
    case DType::kF16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = f16_to_f32(v);
      }
      return;
    default:
      if (dequantize_row(m.dtype, p, out, n)) return;
      break;
  }
  // Loading refuses other dtypes (WeightLoader checks), so this is a programming error.
  std::memset(out, 0, n * sizeof(float));
}

std::vector<float> matrix_to_f32(const Matrix& m) {
  std::vector<float> out(std::size_t(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) matrix_row_f32(m, r, out.data() + std::size_t(r * m.cols));
  return out;
}

}  // namespace ft::engine

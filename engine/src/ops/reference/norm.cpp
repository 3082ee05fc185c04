#include <cmath>

#include "ft/engine/ops.h"

namespace ft::engine::ref {

void rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim,
              float eps, bool zero_centered) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    double sum_sq = 0.0;
    for (std::size_t i = 0; i < dim; ++i) sum_sq += double(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(float(sum_sq / double(dim)) + eps);
    for (std::size_t i = 0; i < dim; ++i) {
      const float w = zero_centered ? 1.0f + weight[i] : weight[i];
      o[i] = xr[i] * inv * w;
    }
  }
}

}  // namespace ft::engine::ref

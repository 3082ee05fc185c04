#include "ft/engine/ops_dense.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/reference/dot.h"

namespace ft::engine::ref {

void embedding(const float* table, std::size_t hidden, const int32_t* tokens, std::size_t T, float* out) {
  for (std::size_t t = 0; t < T; ++t) {
    std::memcpy(out + t * hidden, table + std::size_t(tokens[t]) * hidden, hidden * sizeof(float));
  }
}

void linear(const float* x, const float* w, const float* bias, float* y, std::size_t T, std::size_t out,
            std::size_t in) {
  // Rows of W are split across threads; within a task, a tile of tokens is reused against each W
  // row while the row is in L1, so W streams from memory once per token tile.
  constexpr std::size_t kTokenTile = 8;
  const std::size_t work_per_row = std::max<std::size_t>(1, in * T);
  const std::size_t grain = std::max<std::size_t>(1, (1u << 16) / work_per_row);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, out, grain), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t t0 = 0; t0 < T; t0 += kTokenTile) {
      const std::size_t t1 = std::min(T, t0 + kTokenTile);
      for (std::size_t o = r.begin(); o < r.end(); ++o) {
        const float* wr = w + o * in;
        const float b = bias ? bias[o] : 0.0f;
        for (std::size_t t = t0; t < t1; ++t) y[t * out + o] = dot8(x + t * in, wr, in) + b;
      }
    }
  });
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float silu(float x) { return x * sigmoid(x); }

void silu_mul(const float* gate, const float* up, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

void scale(float* x, std::size_t n, float factor) {
  for (std::size_t i = 0; i < n; ++i) x[i] *= factor;
}

void softcap(float* x, std::size_t n, float cap) {
  for (std::size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void mul_sigmoid(float* x, const float* gate, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] *= sigmoid(gate[i]);
}

void scale_by_top_sigmoid(const float* x, const float* logits, std::size_t T, std::size_t width, std::size_t E,
                          float* out) {
  for (std::size_t t = 0; t < T; ++t) {
    float top = logits[t * E];
    for (std::size_t e = 1; e < E; ++e) top = std::max(top, logits[t * E + e]);
    const float s = sigmoid(top);
    for (std::size_t i = 0; i < width; ++i) out[t * width + i] = x[t * width + i] * s;
  }
}

float attention_temperature_at(int64_t position, float floor_scale, float attn_scale) {
  return std::log1p(std::floor((float(position) + 1.0f) / floor_scale)) * attn_scale + 1.0f;
}

void attention_temperature(float* x, std::size_t T, std::size_t width, const int64_t* positions, float floor_scale,
                           float attn_scale) {
  for (std::size_t t = 0; t < T; ++t) {
    const float s = attention_temperature_at(positions[t], floor_scale, attn_scale);
    for (std::size_t i = 0; i < width; ++i) x[t * width + i] *= s;
  }
}

void add_inplace(float* y, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += x[i];
}

void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                  std::size_t rows, std::size_t width) {
  for (std::size_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_ld, src + (r / repeat) * src_ld, width * sizeof(float));
}

}  // namespace ft::engine::ref

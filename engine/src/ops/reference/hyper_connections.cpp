#include <algorithm>
#include <cmath>
#include <vector>

#include "ft/engine/ops_hyper.h"

namespace ft::engine::ref {

namespace {

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// mix[0, rows) = fn[rows, N*D] @ (token's N*D values, RMS-normalised without a weight). The norm is
// HF's UnweightedRMSNorm: the values times one fp32 factor; the products then sum in double.
void normed_mix(const float* ht, const float* fn, std::size_t rows, const HyperSpec& spec, float* mix) {
  const std::size_t n = spec.streams * spec.dim;
  double sum_sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum_sq += double(ht[i]) * ht[i];
  const float inv = 1.0f / std::sqrt(float(sum_sq / double(n)) + spec.norm_eps);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* w = fn + r * n;
    double acc = 0.0;
    for (std::size_t i = 0; i < n; ++i) acc += double(w[i]) * double(ht[i] * inv);
    mix[r] = float(acc);
  }
}

// x[d] = sum_n pre[n] * ht[n, d], streams in order, in fp32 (HF: (pre[:, None] * h).sum(0)).
void collapse(const float* ht, const float* pre, const HyperSpec& spec, float* x) {
  for (std::size_t d = 0; d < spec.dim; ++d) {
    float acc = 0.0f;
    for (std::size_t s = 0; s < spec.streams; ++s) acc += pre[s] * ht[s * spec.dim + d];
    x[d] = acc;
  }
}

// comb [N, N] in place: row softmax + eps, a column normalisation, then (iters - 1) rounds of rows
// then columns, every divisor (sum + eps) as HF writes it. The last step is a column pass, so the
// columns sum to 1 / (1 + eps) and the rows only approach it.
void sinkhorn(float* comb, const HyperSpec& spec) {
  const std::size_t N = spec.streams;
  const float eps = spec.eps;
  for (std::size_t j = 0; j < N; ++j) {
    float* row = comb + j * N;
    const float max = *std::max_element(row, row + N);
    float sum = 0.0f;
    for (std::size_t k = 0; k < N; ++k) {
      row[k] = std::exp(row[k] - max);
      sum += row[k];
    }
    for (std::size_t k = 0; k < N; ++k) row[k] = row[k] / sum + eps;
  }
  const auto columns = [&] {
    for (std::size_t k = 0; k < N; ++k) {
      float sum = 0.0f;
      for (std::size_t j = 0; j < N; ++j) sum += comb[j * N + k];
      for (std::size_t j = 0; j < N; ++j) comb[j * N + k] /= sum + eps;
    }
  };
  const auto rows = [&] {
    for (std::size_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (std::size_t k = 0; k < N; ++k) sum += comb[j * N + k];
      for (std::size_t k = 0; k < N; ++k) comb[j * N + k] /= sum + eps;
    }
  };
  columns();
  for (std::size_t i = 1; i < spec.sinkhorn_iters; ++i) {
    rows();
    columns();
  }
}

}  // namespace

void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
            const HyperSpec& spec, float* x, float* post, float* comb) {
  const std::size_t N = spec.streams, D = spec.dim;
  std::vector<float> mix(spec.mix_rows()), pre(N);
  for (std::size_t t = 0; t < T; ++t) {
    const float* ht = h + t * N * D;
    normed_mix(ht, fn, mix.size(), spec, mix.data());
    float* post_t = post + t * N;
    float* comb_t = comb + t * N * N;
    for (std::size_t s = 0; s < N; ++s) {
      pre[s] = sigmoid(mix[s] * scale[0] + base[s]) + spec.eps;
      post_t[s] = 2.0f * sigmoid(mix[N + s] * scale[1] + base[N + s]);
    }
    for (std::size_t i = 0; i < N * N; ++i) comb_t[i] = mix[2 * N + i] * scale[2] + base[2 * N + i];
    sinkhorn(comb_t, spec);
    collapse(ht, pre.data(), spec, x + t * D);
  }
}

void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
             const HyperSpec& spec, float* h_new) {
  const std::size_t N = spec.streams, D = spec.dim;
  std::vector<float> column(N);
  for (std::size_t t = 0; t < T; ++t) {
    const float* ht = h + t * N * D;
    const float* comb_t = comb + t * N * N;
    float* ot = h_new + t * N * D;
    for (std::size_t d = 0; d < D; ++d) {
      // Every stream's value of this column first: h_new may be h.
      for (std::size_t j = 0; j < N; ++j) column[j] = ht[j * D + d];
      for (std::size_t k = 0; k < N; ++k) {
        float acc = 0.0f;
        for (std::size_t j = 0; j < N; ++j) acc += comb_t[j * N + k] * column[j];
        ot[k * D + d] = post[t * N + k] * out[t * D + d] + acc;
      }
    }
  }
}

void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
             const HyperSpec& spec, float* y) {
  const std::size_t N = spec.streams, D = spec.dim;
  std::vector<float> mix(N), pre(N);
  for (std::size_t t = 0; t < T; ++t) {
    const float* ht = h + t * N * D;
    normed_mix(ht, fn, N, spec, mix.data());
    for (std::size_t s = 0; s < N; ++s) pre[s] = sigmoid(mix[s] * scale[0] + base[s]) + spec.eps;
    collapse(ht, pre.data(), spec, y + t * D);
  }
}

}  // namespace ft::engine::ref

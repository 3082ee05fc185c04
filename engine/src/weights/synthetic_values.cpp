#include "weights/synthetic_values.h"

#include <cmath>

namespace ft::engine::synthetic {
namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Acklam's rational approximation (relative error 1.15e-9), refined by one Halley step on erfc,
// which brings it to double precision. Only run 65,536 times, once.
double inverse_normal_cdf(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x = 0;
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  };
  if (p < kLow) {
    x = tail(std::sqrt(-2 * std::log(p)));
  } else if (p > 1 - kLow) {
    x = -tail(std::sqrt(-2 * std::log(1 - p)));
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

}  // namespace

const std::vector<double>& normal_quantiles() {
  static const std::vector<double> table = [] {
    constexpr std::size_t kN = 65536;
    std::vector<double> q(kN);
    double sum_sq = 0;
    for (std::size_t i = 0; i < kN; ++i) {
      q[i] = inverse_normal_cdf((double(i) + 0.5) / double(kN));
      sum_sq += q[i] * q[i];
    }
    // Symmetric, so the mean is 0; the truncated tails leave the variance a little under 1.
    const double scale = 1.0 / std::sqrt(sum_sq / double(kN));
    for (double& v : q) v *= scale;
    return q;
  }();
  return table;
}

std::vector<bf16_t> normal_table(double scale, double offset) {
  const std::vector<double>& q = normal_quantiles();
  std::vector<bf16_t> out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) out[i] = f32_to_bf16(float(offset + scale * q[i]));
  return out;
}

uint64_t block_seed(uint64_t seed, std::string_view name, uint64_t block) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (char ch : name) h = (h ^ uint8_t(ch)) * 0x100000001b3ull;
  return mix64(mix64(seed ^ 0x5851f42d4c957f2dull) ^ mix64(h) ^ mix64(block * 0x9e3779b97f4a7c15ull + 1));
}

void BlockGenerator::fill(bf16_t* out, std::size_t count) {
  if (init_.kind == TensorInit::Kind::kNormal) {
    const bf16_t* t = table_;
    std::size_t i = 0;
    for (; i + 4 <= count; i += 4) {
      const uint64_t r = next();
      out[i] = t[r & 0xffff];
      out[i + 1] = t[(r >> 16) & 0xffff];
      out[i + 2] = t[(r >> 32) & 0xffff];
      out[i + 3] = t[r >> 48];
    }
    if (i < count) {
      uint64_t r = next();
      for (; i < count; ++i, r >>= 16) out[i] = t[r & 0xffff];
    }
    return;
  }
  // The uniform rules only cover a few tiny per-head vectors: plain arithmetic is fast enough.
  for (std::size_t i = 0; i < count; ++i) {
    const double u = double(next() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    const double v = init_.lo + (init_.hi - init_.lo) * u;
    out[i] = f32_to_bf16(float(init_.kind == TensorInit::Kind::kLogUniform ? std::log(v) : v));
  }
}

}  // namespace ft::engine::synthetic

// YaRN frequencies, step for step as HF's _compute_yarn_parameters (transformers 5.x): the ramp's
// ends in double precision as Python computes them, every per-frequency value in fp32 as torch does.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ft/engine/ops_attention.h"

namespace ft::engine::ref {
namespace {

// The rotary dimension whose wavelength makes `rotations` turns over the original context.
double correction_dim(double rotations, double dim, double base, double context) {
  return dim * std::log(context / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
  if (mscale != 0 && mscale_all_dim != 0) return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
  return yarn_mscale(factor);
}

std::vector<float> yarn_inv_freq(const RopeSpec& spec) {
  const YarnSpec& y = spec.yarn;
  const std::size_t dim = spec.rotary_dim, half = dim / 2;
  const double base = spec.theta, context = double(y.original_max_position_embeddings);
  double low = correction_dim(y.beta_fast, double(dim), base, context);
  double high = correction_dim(y.beta_slow, double(dim), base, context);
  if (y.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // HF: "prevent singularity"
  // torch casts the Python numbers to fp32 where they meet the fp32 tensors.
  const float lo = float(low), span = float(high - low), factor = float(y.factor), theta = float(base);
  std::vector<float> inv(half);
  for (std::size_t i = 0; i < half; ++i) {
    const float pos_freq = std::pow(theta, float(2 * i) / float(dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((float(i) - lo) / span, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return inv;
}

}  // namespace ft::engine::ref

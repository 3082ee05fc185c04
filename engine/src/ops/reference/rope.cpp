#include <cmath>

#include "ft/engine/ops_attention.h"

namespace ft::engine::ref {

namespace {

// HF _compute_llama3_parameters over the default frequencies, in fp32 as torch computes it (the
// Python float bounds meet fp32 tensors as fp32).
void llama3_scale(std::vector<float>& inv, const Llama3RopeSpec& l) {
  const float factor = float(l.factor), low = float(l.low_freq_factor), high = float(l.high_freq_factor);
  const float old_len = float(l.original_max_position_embeddings);
  const float low_wavelen = float(double(l.original_max_position_embeddings) / l.low_freq_factor);
  const float high_wavelen = float(double(l.original_max_position_embeddings) / l.high_freq_factor);
  for (float& f : inv) {
    const float wavelen = float(2.0 * M_PI) / f;
    const float scaled = wavelen > low_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    if (medium) {
      const float smooth = (old_len / wavelen - low) / (high - low);
      f = (1.0f - smooth) * scaled / factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const RopeSpec& spec) {
  if (spec.yarn.factor > 0) return yarn_inv_freq(spec);
  // HF: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), all in fp32.
  std::vector<float> inv(spec.rotary_dim / 2);
  const float base = float(spec.theta);
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const float exponent = float(2 * i) / float(spec.rotary_dim);
    inv[i] = 1.0f / std::pow(base, exponent);
  }
  if (spec.llama3.factor > 0) llama3_scale(inv, spec.llama3);
  if (spec.proportional_angles > 0) {
    for (std::size_t i = spec.proportional_angles; i < inv.size(); ++i) inv[i] = 0.0f;
  }
  return inv;
}

void rope_rotate(float* v, const float* cos_t, const float* sin_t, const RopeSpec& spec) {
  const std::size_t half = spec.rotary_dim / 2;
  if (spec.layout == RopeLayout::kNeox) {
    // q*cos + rotate_half(q)*sin with rotate_half(q) = [-q2, q1].
    for (std::size_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos_t[i] + (-b) * sin_t[i];
      v[i + half] = b * cos_t[i] + a * sin_t[i];
    }
  } else {
    for (std::size_t i = 0; i < half; ++i) {
      const float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * cos_t[i] - b * sin_t[i];
      v[2 * i + 1] = b * cos_t[i] + a * sin_t[i];
    }
  }
}

void apply_rope(float* x, std::size_t T, std::size_t heads, const RopeSpec& spec,
                const std::vector<float>& inv_freq, int64_t pos0) {
  const std::size_t half = spec.rotary_dim / 2;
  std::vector<float> cos_t(half), sin_t(half);
  for (std::size_t t = 0; t < T; ++t) {
    // HF: freqs = inv_freq * position in fp32, then cos/sin in fp32, times attention_scaling.
    const float pos = float(pos0 + int64_t(t));
    for (std::size_t i = 0; i < half; ++i) {
      const float angle = inv_freq[i] * pos;
      cos_t[i] = std::cos(angle) * spec.attention_factor;
      sin_t[i] = std::sin(angle) * spec.attention_factor;
    }
    for (std::size_t h = 0; h < heads; ++h)
      rope_rotate(x + (t * heads + h) * spec.head_dim, cos_t.data(), sin_t.data(), spec);
  }
}

}  // namespace ft::engine::ref

// Shared by the DeepSeek-V4 reference-op tests: normal random data and the compress rope of the
// shrunk golden config (docs/deepseek-v4.md §8).
#pragma once

#include <random>
#include <vector>

#include "ft/engine/ops_attention.h"

namespace ft::test {

inline std::vector<float> randn(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The compress rope at r dims: theta 160000, YaRN factor 16 over 256 positions, GPT-J pairs.
inline std::vector<float> compress_inv_freq(std::size_t r) {
  engine::ref::RopeSpec spec;
  spec.head_dim = r;
  spec.rotary_dim = r;
  spec.theta = 160000.0;
  spec.layout = engine::ref::RopeLayout::kGptj;
  spec.yarn.factor = 16.0;
  spec.yarn.original_max_position_embeddings = 256;
  return engine::ref::rope_inv_freq(spec);
}

}  // namespace ft::test

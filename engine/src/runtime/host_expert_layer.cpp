#include "ft/engine/host_expert_layer.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ft/engine/bf16.h"

namespace ft::engine {

Result<HostExpertLayer> make_host_expert_layer(int experts, int hidden, int inter, int top_k) {
  HostExpertLayer l;
  const std::size_t mat = std::size_t(hidden) * std::size_t(inter) * sizeof(bf16_t);
  constexpr std::size_t kAlign = std::size_t(2) << 20;
  l.size = (std::size_t(experts) * 3 * mat + kAlign - 1) / kAlign * kAlign;
  l.bytes.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, l.size)));
  if (!l.bytes) return unavailable("cannot allocate " + std::to_string(l.size >> 20) + " MiB of host memory");
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 0.02f);
  std::vector<bf16_t> pattern(1 << 16);
  for (bf16_t& v : pattern) v = f32_to_bf16(n(rng));
  for (std::size_t off = 0; off < l.size; off += pattern.size() * sizeof(bf16_t))
    std::memcpy(l.bytes.get() + off, pattern.data(), std::min(pattern.size() * sizeof(bf16_t), l.size - off));
  l.w.hidden = hidden;
  l.w.router_spec.num_experts = std::size_t(experts);
  l.w.router_spec.top_k = std::size_t(top_k);
  for (int e = 0; e < experts; ++e) {
    const std::byte* base = l.bytes.get() + std::size_t(e) * 3 * mat;
    SwiGluMatrices m;
    m.gate = {DType::kBF16, inter, hidden, base, std::size_t(hidden) * sizeof(bf16_t)};
    m.up = {DType::kBF16, inter, hidden, base + mat, std::size_t(hidden) * sizeof(bf16_t)};
    m.down = {DType::kBF16, hidden, inter, base + 2 * mat, std::size_t(inter) * sizeof(bf16_t)};
    l.w.experts.push_back(m);
  }
  return l;
}

}  // namespace ft::engine

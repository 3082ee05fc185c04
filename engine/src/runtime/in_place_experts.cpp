#include "ft/engine/in_place_experts.h"

#include <algorithm>
#include <cstdint>

#include "ops/pair_hash.h"

namespace ft::engine {

InPlaceExperts::InPlaceExperts(int layers, int experts)
    : layers_(layers),
      experts_(experts),
      host_(std::size_t(layers) * std::size_t(experts)),
      known_(std::size_t(layers), 0),
      pending_(host_.size(), 0),
      cpu_(host_.size(), 0) {}

void InPlaceExperts::set_cpu_share(double q, bool by_hash) {
  q = std::clamp(q, 0.0, 1.0);
  if (q == cpu_share_ && by_hash == by_hash_) return;
  cpu_share_ = q;
  by_hash_ = by_hash;
  changed_ = true;
}

namespace {

// Where (layer, expert) falls in [0, 1): a fixed, well-mixed hash.
double place_of(int layer, int expert) {
  return double(pair_hash(std::uint32_t(layer), std::uint32_t(expert)) >> 11) * 0x1.0p-53;
}

}  // namespace

void InPlaceExperts::set_host(int layer, int expert, ExpertAddress a) {
  ExpertAddress& h = host_[index(layer, expert)];
  if (!h.gate) ++known_[std::size_t(layer)];
  h = a;
  changed_ = true;
}

InPlaceExperts::StepUse InPlaceExperts::after_step(ExpertCache& cache, int layer, std::span<const int32_t> chosen,
                                                   int& replacements) {
  std::vector<int> tokens(std::size_t(experts_), 0);
  for (int32_t e : chosen)
    if (e >= 0 && e < experts_) ++tokens[std::size_t(e)];
  StepUse use;
  std::vector<int> misses;
  for (int e = 0; e < experts_; ++e) {
    if (!tokens[std::size_t(e)]) continue;
    if (cache.lookup(layer, e)) {
      ++use.hits;
    } else {
      ++use.misses;
      misses.push_back(e);
    }
  }
  use.missed = misses;
  std::stable_sort(misses.begin(), misses.end(),
                   [&](int a, int b) { return tokens[std::size_t(a)] > tokens[std::size_t(b)]; });
  for (int e : misses) {
    const bool full = cache.resident() >= cache.slots();
    if (full && replacements <= 0) break;
    const std::optional<ExpertCache::Admitted> a = cache.admit(layer, e, ExpertCache::Admission::kIfHotter);
    if (!a) continue;
    if (a->evicted) --replacements;
    use.admitted.push_back({e, a->slot});
    char& p = pending_[index(layer, e)];
    if (!p) ++pending_count_;
    p = 1;
  }
  return use;
}

void InPlaceExperts::landed() {
  if (pending_count_ == 0) return;
  std::fill(pending_.begin(), pending_.end(), 0);
  pending_count_ = 0;
  changed_ = true;
}

bool InPlaceExperts::refresh(const ExpertCache& cache, const SlotAddress& slot_at, std::span<const std::byte*> out,
                             std::span<std::uint8_t> from_host) {
  if (!changed_ && cache.version() == built_version_) return false;
  const std::size_t E = std::size_t(experts_);
  for (int l = 0; l < layers_; ++l) {
    const std::span<const std::byte*> gate = out.subspan(std::size_t(l) * 3 * E, E),
                                      up = out.subspan(std::size_t(l) * 3 * E + E, E),
                                      down = out.subspan(std::size_t(l) * 3 * E + 2 * E, E);
    const double hashed = by_hash_ ? cpu_share_ : 0;
    const ExpertAddress zero = hashed > 0 ? slot_at(l, -1) : ExpertAddress{};
    for (int e = 0; e < experts_; ++e) {
      ExpertAddress a = host_[index(l, e)];
      bool in_slot = false;
      if (!pending_[index(l, e)]) {
        if (const std::optional<int> s = cache.find(l, e)) {
          a = slot_at(l, *s);
          in_slot = true;
        }
      }
      const bool cpu = !in_slot && a.gate && place_of(l, e) < hashed;
      cpu_[index(l, e)] = cpu ? 1 : 0;
      if (cpu) a = zero;
      if (!from_host.empty()) from_host[index(l, e)] = !in_slot && !cpu && a.gate ? 1 : 0;
      gate[std::size_t(e)] = a.gate;
      up[std::size_t(e)] = a.up;
      down[std::size_t(e)] = a.down;
    }
  }
  changed_ = false;
  built_version_ = cache.version();
  return true;
}

}  // namespace ft::engine

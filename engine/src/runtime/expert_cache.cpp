#include "ft/engine/expert_cache.h"

#include <algorithm>
#include <numeric>

namespace ft::engine {

ExpertCache::ExpertCache(int slots, int layers, int experts, int floor_per_layer, int protected_steps)
    : layers_(layers),
      experts_(experts),
      floor_(floor_per_layer),
      protected_(std::max(protected_steps, 1)),
      slot_key_(std::size_t(std::max(slots, 0))),
      last_used_(slot_key_.size(), kNever),
      step_used_(slot_key_.size(), 0),
      streamed_(slot_key_.size(), false),
      slot_of_(std::size_t(layers) * std::size_t(experts), -1),
      stats_(std::size_t(layers)),
      freq_(slot_of_.size(), 0.f) {}

void ExpertCache::count_use(int layer, int expert) {
  freq_[index(layer, expert)] += 1.f;
  // Halve every count after four uses per expert: old traffic fades within a few hundred steps.
  if (++uses_ >= 4 * freq_.size()) {
    for (float& f : freq_) f *= 0.5f;
    uses_ = 0;
  }
}

std::optional<int> ExpertCache::find(int layer, int expert) const {
  const int s = slot_of_[index(layer, expert)];
  return s >= 0 ? std::optional<int>(s) : std::nullopt;
}

std::optional<int> ExpertCache::lookup(int layer, int expert) {
  const std::optional<int> s = find(layer, expert);
  count_use(layer, expert);
  LayerStats& st = stats_[std::size_t(layer)];
  if (!s) {
    ++st.misses;
    return std::nullopt;
  }
  ++st.hits;
  touch(*s);
  return s;
}

void ExpertCache::touch(int slot) {
  last_used_[std::size_t(slot)] = ++clock_;
  step_used_[std::size_t(slot)] = step_;
}

void ExpertCache::drop(int slot) {
  Key& k = slot_key_[std::size_t(slot)];
  if (k.layer < 0) return;
  ++version_;
  slot_of_[index(k.layer, k.expert)] = -1;
  --stats_[std::size_t(k.layer)].resident;
  k = {};
  last_used_[std::size_t(slot)] = kNever;
}

bool ExpertCache::evictable(int slot, int for_layer, bool floor) const {
  const Key& k = slot_key_[std::size_t(slot)];
  if (k.layer < 0) return true;
  const std::uint64_t used = step_used_[std::size_t(slot)];
  if (used != 0 && used >= protect_from_ && used + std::uint64_t(protected_) > step_) return false;
  return !floor || k.layer == for_layer || stats_[std::size_t(k.layer)].resident > floor_;
}

int ExpertCache::victim(int for_layer, bool floor, bool streamed_only) const {
  int best = -1;
  for (int s = 0; s < slots(); ++s) {
    if (streamed_only && slot_key_[std::size_t(s)].layer >= 0 && !streamed_[std::size_t(s)]) continue;
    if (!evictable(s, for_layer, floor)) continue;
    // Free slots first (last use kNever), then the least recently used.
    if (best < 0 || last_used_[std::size_t(s)] < last_used_[std::size_t(best)]) best = s;
    if (last_used_[std::size_t(best)] == kNever) break;
  }
  return best;
}

std::optional<ExpertCache::Admitted> ExpertCache::admit(int layer, int expert, Admission admission, bool floor) {
  // While more slots are free than the stream needs, a streamed expert takes a free one and stays
  // as cached content; after that it goes to the stream's pool, borrowing any slot when every
  // streamed one is still protected.
  const bool stream = admission == Admission::kStream && slots() - resident() <= stream_pool();
  int best = victim(layer, floor, stream);
  if (best < 0 && stream) best = victim(layer, floor, false);
  if (best < 0) return std::nullopt;
  const Key& held = slot_key_[std::size_t(best)];
  if (admission == Admission::kIfHotter && held.layer >= 0 &&
      !(freq_[index(layer, expert)] > freq_[index(held.layer, held.expert)]))
    return std::nullopt;
  Admitted a;
  a.slot = best;
  if (slot_key_[std::size_t(best)].layer >= 0) a.evicted = slot_key_[std::size_t(best)];
  drop(best);
  slot_key_[std::size_t(best)] = {layer, expert};
  streamed_[std::size_t(best)] = stream;
  slot_of_[index(layer, expert)] = best;
  ++version_;
  ++stats_[std::size_t(layer)].resident;
  touch(best);
  return a;
}

std::vector<ExpertCache::Key> ExpertCache::resize(int slots) {
  std::vector<Key> lost;
  slots = std::max(slots, 0);
  const int n = this->slots();
  if (slots < n) {
    for (int s = slots; s < n; ++s) {
      if (slot_key_[std::size_t(s)].layer >= 0) lost.push_back(slot_key_[std::size_t(s)]);
      drop(s);
    }
  }
  slot_key_.resize(std::size_t(slots));
  last_used_.resize(std::size_t(slots), kNever);
  step_used_.resize(std::size_t(slots), 0);
  streamed_.resize(std::size_t(slots), false);
  return lost;
}

void ExpertCache::clear() {
  for (int s = 0; s < slots(); ++s) drop(s);
}

std::uint64_t ExpertCache::hits() const {
  return std::accumulate(stats_.begin(), stats_.end(), std::uint64_t(0),
                         [](std::uint64_t a, const LayerStats& s) { return a + s.hits; });
}
std::uint64_t ExpertCache::misses() const {
  return std::accumulate(stats_.begin(), stats_.end(), std::uint64_t(0),
                         [](std::uint64_t a, const LayerStats& s) { return a + s.misses; });
}
int ExpertCache::resident() const {
  return std::accumulate(stats_.begin(), stats_.end(), 0, [](int a, const LayerStats& s) { return a + s.resident; });
}

}  // namespace ft::engine

#include "ft/store/shared_bytes.h"

#include <algorithm>

namespace ft::store {

StateFootprint StateFootprint::of(const ModelState& state) {
  StateFootprint f;
  for (const StateChunk& c : state.chunks) {
    const std::byte* address = c.data.shared_address();
    if (address == nullptr) {
      f.own_bytes += c.data.size();
      continue;
    }
    const SharedChunk chunk{address, c.data.size()};
    if (std::find(f.shared.begin(), f.shared.end(), chunk) == f.shared.end()) f.shared.push_back(chunk);
  }
  return f;
}

std::uint64_t SharedBytes::added_by(const StateFootprint& f) const {
  std::uint64_t n = f.own_bytes;
  for (const auto& c : f.shared)
    if (!holders_.count(c)) n += c.second;
  return n;
}

void SharedBytes::add(const StateFootprint& f) {
  bytes_ += f.own_bytes;
  for (const auto& c : f.shared)
    if (holders_[c]++ == 0) bytes_ += c.second;
}

void SharedBytes::remove(const StateFootprint& f) {
  bytes_ -= f.own_bytes;
  for (const auto& c : f.shared) {
    auto held = holders_.find(c);
    if (--held->second > 0) continue;
    bytes_ -= c.second;
    holders_.erase(held);
  }
}

}  // namespace ft::store

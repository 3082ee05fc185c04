// 128-bit content hashes (XXH3-128) used as identities across the proxy, the engine and the
// store: prefix keys and model fingerprints. The Tag keeps the two from being mixed up.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ft {

// Hex form: 32 lowercase digits, high half first (the same order as XXH128_canonical_t).
template <typename Tag>
struct Hash128 {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;

  auto operator<=>(const Hash128&) const = default;
  std::string to_hex() const;
  // nullopt unless exactly 32 hex digits.
  static std::optional<Hash128> from_hex(std::string_view hex);
};

// Chained XXH3-128 of a conversation's tokens up to a semantic boundary, rooted in the model
// fingerprint (computed by the proxy; the engine and the store only compare them).
using PrefixKey = Hash128<struct PrefixKeyTag>;
// Identity of the weights + state layout that produced a snapshot.
using ModelFingerprint = Hash128<struct ModelFingerprintTag>;

extern template struct Hash128<PrefixKeyTag>;
extern template struct Hash128<ModelFingerprintTag>;

}  // namespace ft

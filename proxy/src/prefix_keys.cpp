#include "ft/proxy/prefix_keys.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

namespace ft::proxy {
namespace {

store::PrefixKey from_xxh(XXH128_hash_t h) {
  store::PrefixKey k;
  k.hi = h.high64;
  k.lo = h.low64;
  return k;
}

// A fixed byte order keeps keys identical across machines (they are persisted and shared).
void put_u64_be(unsigned char* out, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<unsigned char>(v & 0xff);
}

}  // namespace

store::PrefixKey root_prefix_key(std::string_view model_fingerprint) {
  return from_xxh(XXH3_128bits(model_fingerprint.data(), model_fingerprint.size()));
}

namespace {

// The hash state all of one prompt's keys are digests of.
class PrefixHasher {
 public:
  explicit PrefixHasher(std::string_view model_fingerprint) {
    XXH3_128bits_reset(&state_);
    const store::PrefixKey root = root_prefix_key(model_fingerprint);
    unsigned char head[16];
    put_u64_be(head, root.hi);
    put_u64_be(head + 8, root.lo);
    XXH3_128bits_update(&state_, head, sizeof head);
  }
  void add(std::span<const int32_t> tokens) {
    for (int32_t t : tokens) {
      const auto u = static_cast<uint32_t>(t);
      const unsigned char le[4] = {static_cast<unsigned char>(u), static_cast<unsigned char>(u >> 8),
                                   static_cast<unsigned char>(u >> 16), static_cast<unsigned char>(u >> 24)};
      XXH3_128bits_update(&state_, le, sizeof le);
    }
  }
  store::PrefixKey key() const { return from_xxh(XXH3_128bits_digest(&state_)); }  // the state goes on

 private:
  XXH3_state_t state_;
};

}  // namespace

store::PrefixKey prefix_key(std::string_view model_fingerprint, std::span<const int32_t> tokens) {
  PrefixHasher h(model_fingerprint);
  h.add(tokens);
  return h.key();
}

std::vector<PrefixCut> prefix_cuts(std::string_view model_fingerprint, std::span<const int32_t> tokens,
                                   std::span<const std::size_t> boundaries) {
  std::vector<PrefixCut> cuts;
  PrefixHasher h(model_fingerprint);
  std::size_t at = 0;
  for (std::size_t b : boundaries) {
    if (b <= at || b > tokens.size()) continue;
    h.add(tokens.subspan(at, b - at));
    cuts.push_back({b, h.key()});
    at = b;
  }
  return cuts;
}

}  // namespace ft::proxy

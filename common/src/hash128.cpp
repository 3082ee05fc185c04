#include "ft/common/hash128.h"

namespace ft {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

template <typename Tag>
std::string Hash128<Tag>::to_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[i] = kDigits[(hi >> (60 - 4 * i)) & 0xf];
    out[16 + i] = kDigits[(lo >> (60 - 4 * i)) & 0xf];
  }
  return out;
}

template <typename Tag>
std::optional<Hash128<Tag>> Hash128<Tag>::from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  Hash128 h;
  for (int i = 0; i < 32; ++i) {
    const int v = hex_value(hex[i]);
    if (v < 0) return std::nullopt;
    std::uint64_t& half = i < 16 ? h.hi : h.lo;
    half = (half << 4) | static_cast<std::uint64_t>(v);
  }
  return h;
}

template struct Hash128<PrefixKeyTag>;
template struct Hash128<ModelFingerprintTag>;

}  // namespace ft

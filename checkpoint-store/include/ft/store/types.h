// Identity of a checkpoint: which tenant, which model, which token prefix.
#pragma once

#include <cstddef>
#include <string>

#include "ft/common/hash128.h"

namespace ft::store {

using ft::Hash128;
using ft::ModelFingerprint;
using ft::PrefixKey;

// Namespace of one customer. 1..255 bytes; any bytes.
using TenantId = std::string;

inline constexpr std::size_t kMaxTenantBytes = 255;

struct StoreKey {
  TenantId tenant;
  ModelFingerprint model;
  PrefixKey prefix;

  bool operator==(const StoreKey&) const = default;
};

}  // namespace ft::store

#include "ft/store/state_tier.h"

namespace ft::store {

Result<std::optional<DeepestMatch>> probe_deepest(StateTier& tier, const TenantId& tenant,
                                                  const ModelFingerprint& model,
                                                  std::span<const PrefixKey> keys_in_order) {
  for (std::size_t i = keys_in_order.size(); i-- > 0;) {
    const StoreKey key{tenant, model, keys_in_order[i]};
    if (!tier.contains(key)) continue;
    auto header = tier.lookup_header(key);
    if (header.is_ok()) return std::optional<DeepestMatch>(DeepestMatch{i, keys_in_order[i], std::move(*header)});
    // A corrupt entry is a miss (and is gone now): a shallower checkpoint still helps.
    if (header.status().code() != ErrorCode::kNotFound) return header.status();
  }
  return std::optional<DeepestMatch>();
}

}  // namespace ft::store

// Keys for the prefixes of a rendered conversation, one per semantic boundary:
//   K_0 = XXH3-128(model fingerprint text)
//   K_i = XXH3-128(K_{i-1} (16 bytes, big-endian hi then lo) || token ids of segment i (int32 LE))
// where segment i is tokens[b_{i-1}, b_i). Chaining makes a key name the whole prefix (and the
// model) while costing only the new segment to extend; equal prefixes give equal keys in any
// session, so sessions and sub-agents of one tenant share checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ft/store/types.h"

namespace ft::proxy {

store::PrefixKey root_prefix_key(std::string_view model_fingerprint);
store::PrefixKey extend_prefix_key(const store::PrefixKey& parent, std::span<const int32_t> segment);

struct PrefixCut {
  std::size_t tokens = 0;  // prefix length in tokens (a boundary position)
  store::PrefixKey key;
};

// One cut per boundary in (0, tokens.size()], in increasing order; boundaries that repeat, go
// backwards or lie past the end are skipped.
std::vector<PrefixCut> prefix_cuts(std::string_view model_fingerprint, std::span<const int32_t> tokens,
                                   std::span<const std::size_t> boundaries);

}  // namespace ft::proxy

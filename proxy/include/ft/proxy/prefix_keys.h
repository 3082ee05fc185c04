// Keys for the prefixes of a rendered conversation, one per semantic boundary:
//   K_0 = XXH3-128(model fingerprint text)
//   K(p) = XXH3-128(K_0 (16 bytes, big-endian hi then lo) || token ids [0, p) (int32 LE))
// A key names the token prefix (and the model) and nothing else: not where the other boundaries
// of the conversation fell. Boundary finding may leave older boundaries out (its work budget
// keeps the newest), and a conversation's next turn still finds the checkpoints of this one;
// equal prefixes give equal keys in any session, so sessions and sub-agents of one tenant share
// checkpoints. One streaming hash over the prompt gives every key (a digest at each boundary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ft/store/types.h"

namespace ft::proxy {

store::PrefixKey root_prefix_key(std::string_view model_fingerprint);
// K(tokens.size()): the key of the whole of `tokens`.
store::PrefixKey prefix_key(std::string_view model_fingerprint, std::span<const int32_t> tokens);

struct PrefixCut {
  std::size_t tokens = 0;  // prefix length in tokens (a boundary position)
  store::PrefixKey key;
};

// One cut per boundary in (0, tokens.size()], in increasing order; boundaries that repeat, go
// backwards or lie past the end are skipped.
std::vector<PrefixCut> prefix_cuts(std::string_view model_fingerprint, std::span<const int32_t> tokens,
                                   std::span<const std::size_t> boundaries);

}  // namespace ft::proxy

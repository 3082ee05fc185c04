// A fast reader for tokenizer.json. The file is 8-28 MB, almost all of it model.vocab and
// model.merges (up to 650k strings); building an nlohmann DOM for that takes seconds and hundreds
// of MB. This scanner reads those two sections straight into vectors and hands every other value
// (small: added tokens, normalizer, pre-tokenizer, ...) to nlohmann as a DOM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ft/common/result.h"

namespace ft::protocol::tok {

struct TokenizerJson {
  nlohmann::json doc;  // the whole file except model.vocab and model.merges
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // both spellings, split at the space
  bool has_vocab = false;
};

Result<TokenizerJson> read_tokenizer_json(std::string_view text);

}  // namespace ft::protocol::tok

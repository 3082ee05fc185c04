// tokenizer.json "normalizer": null, NFC, or a Sequence of those (Qwen uses NFC, DeepSeek-V3 an
// empty Sequence, gpt-oss none).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "ft/common/result.h"

namespace ft::protocol::tok {

class Normalizer {
 public:
  static Result<Normalizer> from_json(const nlohmann::json& spec);

  bool identity() const { return !nfc_; }
  // Normalizes valid UTF-8 `in`; returns false (and leaves `out` alone) when it is unchanged.
  bool apply(std::string_view in, std::string& out) const;

 private:
  bool nfc_ = false;  // NFC is idempotent, so any number of NFC steps collapse into one
};

}  // namespace ft::protocol::tok

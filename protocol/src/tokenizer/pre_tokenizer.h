// tokenizer.json "pre_tokenizer": cuts normalized text into the words BPE sees. Sequence, Split,
// ByteLevel and Digits are flattened into a list of stages; each stage cuts every piece the
// previous one produced, so lookarounds never see past a piece (as in HF).
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ft/common/result.h"
#include "tokenizer/function_ref.h"
#include "tokenizer/regex.h"

namespace ft::protocol::tok {

// HF's SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  static Result<PreTokenizer> from_json(const nlohmann::json& spec);

  // Calls emit(word) for each non-empty pre-token of `piece`, in order.
  void run(std::string_view piece, FunctionRef<void(std::string_view)> emit) const { run_from(0, piece, emit); }

 private:
  struct Stage {
    enum Kind { kSplit, kPrefixSpace } kind = kSplit;
    Regex regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  Status add(const nlohmann::json& spec);
  void run_from(std::size_t stage, std::string_view piece, FunctionRef<void(std::string_view)> emit) const;
  void split_general(const Stage& s, std::string_view piece, FunctionRef<void(std::string_view)> next) const;

  std::vector<Stage> stages_;
};

}  // namespace ft::protocol::tok

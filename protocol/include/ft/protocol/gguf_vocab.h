// The tokenizer half of a GGUF file's metadata, as llama.cpp's converter (convert_hf_to_gguf.py)
// writes it, for Tokenizer::from_gguf. A plain struct because protocol reads no files: whoever
// opened the GGUF fills it in (ft::proxy::load_model_tokenizer does, from ft::engine::GgufFile).
//
// A GGUF vocabulary names its pre-tokenizer (`tokenizer.ggml.pre`) instead of describing it, and
// carries no normalizer at all; from_gguf knows the HF description behind each name it accepts
// (gguf_pre_tokenizer_names), so ids stay byte-identical with HF `tokenizers`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ft::protocol {

// tokenizer.ggml.token_type values, numbered as llama.cpp numbers them.
enum class GgufTokenType : int32_t {
  kNormal = 1,       // a BPE vocabulary entry
  kUnknown = 2,      // SentencePiece's <unk>
  kControl = 3,      // an HF added token with special=true (or one spelled like <|...|>)
  kUserDefined = 4,  // an HF added token with special=false
  kUnused = 5,       // padding up to the model's embedding rows ("[PAD151669]"): no token at all
  kByte = 6,         // SentencePiece byte fallback (<0x0A>)
};

struct GgufVocab {
  std::string model;  // tokenizer.ggml.model; "gpt2" (byte-level BPE) is the one supported
  std::string pre;    // tokenizer.ggml.pre; "" when absent
  // tokenizer.ggml.tokens, indexed by id: normal tokens in the byte-level spelling ("Ġthe"),
  // control and user-defined ones as their text ("<|im_end|>").
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type, one per token (GgufTokenType)
  std::vector<std::string> merges;   // tokenizer.ggml.merges: "a b", highest priority first
  // tokenizer.ggml.{bos,eos,padding}_token_id; absent keys stay empty.
  std::optional<int64_t> bos_id, eos_id, pad_id;
  // tokenizer.ggml.add_{bos,eos}_token; absent means false (what transformers does for the
  // supported families when tokenizer_config.json does not say).
  std::optional<bool> add_bos, add_eos;
  std::string chat_template;  // tokenizer.chat_template, "" when absent
};

// The tokenizer.ggml.pre names from_gguf accepts, comma-separated (for messages and docs).
std::string gguf_pre_tokenizer_names();

}  // namespace ft::protocol

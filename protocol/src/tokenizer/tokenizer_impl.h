// The parts of a loaded Tokenizer, shared by the files that build and use it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ft/protocol/tokenizer.h"
#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace ft::protocol {

// What tokenizer_config.json (and chat_template.*) say; parsed by tokenizer_config.cpp.
struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token;
  bool add_bos_token = false, add_eos_token = false;
  std::string chat_template;
};

// config_json: tokenizer_config.json text ("" when absent). chat_template_file: the content of
// chat_template.jinja, or of chat_template.json's "chat_template", when present (it wins).
Result<TokenizerConfig> parse_tokenizer_config(std::string_view config_json,
                                               const std::optional<std::string>& chat_template_file);

struct Tokenizer::Impl {
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  tok::Bpe model;
  tok::AddedVocab added;

  // Added tokens by id (HF looks them up before the model): index into added.tokens(), or -1.
  // Sized to cover every id of the model and the added tokens.
  std::vector<int32_t> added_index;
  std::vector<std::string> added_bytes;  // what decode emits for each added token
  tok::StringIdMap added_to_id;
  std::size_t vocab_size = 0;

  std::string_view token_bytes(int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= added_index.size()) return {};
    if (int32_t a = added_index[id]; a >= 0) return added_bytes[a];
    return static_cast<std::size_t>(id) < model.id_bytes().size() ? std::string_view(model.id_bytes()[id]) : "";
  }
  bool is_special(int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= added_index.size() || added_index[id] < 0) return false;
    return added.tokens()[added_index[id]].special;
  }

  TokenizerConfig config;
  std::optional<int32_t> bos_id, eos_id;

  // `cuts` (optional) receives the clean cuts of Tokenizer::encode_with_cuts.
  void encode_into(std::string_view text, std::vector<int32_t>& ids, std::vector<TokenCut>* cuts = nullptr) const;
};

// Builds the pipeline from tokenizer.json as read by read_tokenizer_json (vocab/merges consumed).
Result<std::unique_ptr<Tokenizer::Impl>> build_tokenizer(tok::TokenizerJson& file);

}  // namespace ft::protocol

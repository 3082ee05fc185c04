// Tokenizer::from_gguf: a GGUF vocabulary turned into the tokenizer.json it was converted from, then
// built by the same code as tokenizer.json. What the converter wrote maps back one to one:
//   normal tokens          -> model.vocab (byte-level spellings, as in tokenizer.json)
//   merges "a b"           -> model.merges
//   control / user-defined -> added_tokens, special / not special, matched on the raw text and
//                             never split (the converter stores them already normalized)
//   unused ("[PAD151669]") -> nothing: HF has no such ids, so they neither encode nor decode
//   tokenizer.ggml.pre     -> the normalizer and pre-tokenizer of the HF file (gguf_pre_tokenizers)
#include <nlohmann/json.hpp>

#include "ft/protocol/gguf_vocab.h"
#include "tokenizer/gguf_pre_tokenizers.h"
#include "tokenizer/tokenizer_impl.h"

namespace ft::protocol {
namespace {

using nlohmann::json;

// The token an id names, for the config's bos/eos/pad strings; errors name the key.
Result<std::optional<int32_t>> checked_id(const GgufVocab& v, const std::optional<int64_t>& id, const char* key) {
  if (!id) return std::optional<int32_t>();
  if (*id < 0 || static_cast<uint64_t>(*id) >= v.tokens.size() ||
      v.token_types[*id] == static_cast<int32_t>(GgufTokenType::kUnused))
    return corrupt(std::string("GGUF ") + key + " " + std::to_string(*id) + " is not a token of the vocabulary (" +
                   std::to_string(v.tokens.size()) + " entries)");
  return std::optional<int32_t>(static_cast<int32_t>(*id));
}

Status check_header(const GgufVocab& v) {
  if (v.model != "gpt2")
    return unsupported("GGUF tokenizer.ggml.model \"" + v.model + "\" (only \"gpt2\", byte-level BPE, is supported)");
  if (!tok::find_gguf_pre_tokenizer(v.pre))
    return unsupported("GGUF tokenizer.ggml.pre \"" + v.pre + "\" (supported: " + gguf_pre_tokenizer_names() + ")");
  if (v.tokens.empty()) return corrupt("GGUF tokenizer.ggml.tokens is empty");
  if (v.token_types.size() != v.tokens.size())
    return corrupt("GGUF tokenizer.ggml.token_type has " + std::to_string(v.token_types.size()) + " entries for " +
                   std::to_string(v.tokens.size()) + " tokens");
  if (v.tokens.size() > static_cast<std::size_t>(INT32_MAX)) return corrupt("GGUF tokenizer.ggml.tokens: too many");
  return Status::ok();
}

// Moves the tokens into model.vocab and added_tokens by type.
Status split_tokens(GgufVocab& v, tok::TokenizerJson& file) {
  json added = json::array();
  file.vocab.reserve(v.tokens.size());
  for (std::size_t id = 0; id < v.tokens.size(); ++id) {
    const auto type = static_cast<GgufTokenType>(v.token_types[id]);
    std::string& token = v.tokens[id];
    switch (type) {
      case GgufTokenType::kNormal:
        file.vocab.emplace_back(std::move(token), static_cast<int64_t>(id));
        break;
      case GgufTokenType::kControl:
      case GgufTokenType::kUserDefined:
        added.push_back({{"id", id},
                         {"content", std::move(token)},
                         {"special", type == GgufTokenType::kControl},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"single_word", false}});
        break;
      case GgufTokenType::kUnused:
        break;
      default:  // UNKNOWN and BYTE belong to SentencePiece vocabularies, refused above by model name
        return corrupt("GGUF tokenizer.ggml.token_type " + std::to_string(v.token_types[id]) + " at id " +
                       std::to_string(id) + " in a byte-level BPE vocabulary");
    }
  }
  file.doc["added_tokens"] = std::move(added);
  file.has_vocab = true;
  return Status::ok();
}

// "a b" -> (a, b). Byte-level spellings never hold a space (U+0020 is spelled "Ġ"), so a merge has
// exactly one.
Status split_merges(GgufVocab& v, tok::TokenizerJson& file) {
  file.merges.reserve(v.merges.size());
  for (std::size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    const std::size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
        m.find(' ', space + 1) != std::string::npos)
      return corrupt("GGUF tokenizer.ggml.merges[" + std::to_string(i) + "] \"" + m + "\" is not \"a b\"");
    file.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  v.merges.clear();
  v.merges.shrink_to_fit();
  return Status::ok();
}

Result<std::unique_ptr<Tokenizer::Impl>> build(GgufVocab& v) {
  FT_RETURN_IF_ERROR(check_header(v));
  const tok::GgufPreTokenizer& pre = *tok::find_gguf_pre_tokenizer(v.pre);
  FT_ASSIGN_OR_RETURN(const auto bos, checked_id(v, v.bos_id, "tokenizer.ggml.bos_token_id"));
  FT_ASSIGN_OR_RETURN(const auto eos, checked_id(v, v.eos_id, "tokenizer.ggml.eos_token_id"));
  FT_ASSIGN_OR_RETURN(const auto pad, checked_id(v, v.pad_id, "tokenizer.ggml.padding_token_id"));
  TokenizerConfig config;
  auto name = [&](const std::optional<int32_t>& id) -> std::optional<std::string> {
    if (!id) return std::nullopt;
    return v.tokens[*id];
  };
  config.bos_token = name(bos);  // before split_tokens moves the strings out
  config.eos_token = name(eos);
  config.pad_token = name(pad);
  config.add_bos_token = v.add_bos.value_or(false);
  config.add_eos_token = v.add_eos.value_or(false);
  config.chat_template = std::move(v.chat_template);

  tok::TokenizerJson file;
  file.doc = json{{"model", {{"type", "BPE"}, {"ignore_merges", pre.ignore_merges}}},
                  {"normalizer", json::parse(pre.normalizer)},
                  {"pre_tokenizer", json::parse(pre.pre_tokenizer)},
                  {"decoder", {{"type", "ByteLevel"}}},
                  {"post_processor", nullptr}};
  FT_RETURN_IF_ERROR(split_tokens(v, file));
  FT_RETURN_IF_ERROR(split_merges(v, file));
  auto impl = build_tokenizer(file);
  // The builder speaks of tokenizer.json; say where the data really came from.
  if (!impl) return Status(impl.status().code(), "GGUF vocabulary: " + impl.status().message());
  (*impl)->config = std::move(config);
  (*impl)->bos_id = bos;
  (*impl)->eos_id = eos;
  return std::move(impl).value();
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(GgufVocab&& vocab) {
  GgufVocab v = std::move(vocab);  // consumed: the strings move into the tables
  FT_ASSIGN_OR_RETURN(auto impl, build(v));
  return Tokenizer(std::move(impl));
}

}  // namespace ft::protocol

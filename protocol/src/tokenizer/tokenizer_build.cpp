// Building a Tokenizer from tokenizer.json: model, added tokens, normalizer, pre-tokenizer, and
// the per-id tables decode needs.
#include <nlohmann/json.hpp>

#include "ft/protocol/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace ft::protocol {
namespace {

using nlohmann::json;

bool json_bool(const json& obj, const char* key, bool fallback) {
  return obj.contains(key) && obj[key].is_boolean() ? obj[key].get<bool>() : fallback;
}

// The components that only shape offsets or add nothing for single sequences.
Status check_decoder_and_post_processor(const json& doc) {
  const json& dec = doc.value("decoder", json());
  if (dec.is_null() || dec.value("type", std::string()) != "ByteLevel")
    return unsupported("tokenizer.json: decoder " + (dec.is_null() ? std::string("null") : dec.dump()) +
                       " (only ByteLevel is supported)");
  const json& post = doc.value("post_processor", json());
  if (!post.is_null() && post.value("type", std::string()) != "ByteLevel")
    return unsupported("tokenizer.json: post_processor " + post.value("type", post.dump()) +
                       " (only null or ByteLevel are supported)");
  return Status::ok();
}

// HF's ByteLevel decoder: a token whose every character is in the byte-level alphabet becomes
// those bytes; any other token (e.g. DeepSeek's "<｜begin▁of▁sentence｜>") its UTF-8 as is.
std::string decoded_bytes(const std::string& token) {
  if (auto bytes = byte_level_to_bytes(token)) return *bytes;
  return token;
}

}  // namespace

Result<std::unique_ptr<Tokenizer::Impl>> build_tokenizer(tok::TokenizerJson& file) {
  const json& doc = file.doc;
  auto impl = std::make_unique<Tokenizer::Impl>();
  FT_RETURN_IF_ERROR(check_decoder_and_post_processor(doc));
  FT_ASSIGN_OR_RETURN(impl->model, tok::Bpe::build(doc.value("model", json()), file.vocab, file.merges));
  FT_ASSIGN_OR_RETURN(impl->normalizer, tok::Normalizer::from_json(doc.value("normalizer", json())));
  FT_ASSIGN_OR_RETURN(impl->pre_tokenizer, tok::PreTokenizer::from_json(doc.value("pre_tokenizer", json())));

  std::vector<tok::AddedToken> added;
  for (const json& t : doc.value("added_tokens", json::array())) {
    tok::AddedToken a;
    if (!t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") || !t["content"].is_string())
      return corrupt("tokenizer.json: an added token lacks an integer id or a string content");
    const int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id > INT32_MAX) return corrupt("tokenizer.json: added token id out of range");
    a.id = static_cast<int32_t>(id);
    a.content = t["content"].get<std::string>();
    if (a.content.empty()) continue;  // HF ignores empty added tokens
    a.special = json_bool(t, "special", false);
    a.lstrip = json_bool(t, "lstrip", false);
    a.rstrip = json_bool(t, "rstrip", false);
    a.normalized = json_bool(t, "normalized", !a.special);
    a.single_word = json_bool(t, "single_word", false);
    added.push_back(std::move(a));
  }

  // Per-id tables for the added tokens; model ids are served by the model's own tables.
  std::size_t limit = impl->model.id_to_token().size();
  for (const auto& a : added) limit = std::max(limit, static_cast<std::size_t>(a.id) + 1);
  impl->added_index.assign(limit, -1);
  impl->vocab_size = impl->model.size();
  for (std::size_t i = 0; i < added.size(); ++i) {
    const auto& a = added[i];
    impl->added_index[a.id] = static_cast<int32_t>(i);
    impl->added_bytes.push_back(decoded_bytes(a.content));
    impl->added_to_id[a.content] = a.id;
    if (impl->model.token_to_id(a.content) < 0) ++impl->vocab_size;  // HF counts distinct strings
  }

  const tok::Normalizer& normalizer = impl->normalizer;
  impl->added.build(std::move(added), [&](std::string_view content) {
    std::string out;
    return normalizer.apply(content, out) ? out : std::string(content);
  });
  return impl;
}

}  // namespace ft::protocol

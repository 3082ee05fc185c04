#include "ft/proxy/model_tokenizer.h"

namespace ft::proxy {
namespace fs = std::filesystem;
namespace {

// Absent keys stay empty; present ones must have the right type.
template <typename T, typename Get>
Status optional_key(const engine::GgufMetadata& md, const char* key, std::optional<T>& out, Get get) {
  if (!md.find(key)) return Status::ok();
  FT_ASSIGN_OR_RETURN(out, (md.*get)(key));
  return Status::ok();
}

std::vector<std::string> copy_strings(const std::vector<std::string_view>& views) {
  return std::vector<std::string>(views.begin(), views.end());
}

}  // namespace

bool is_gguf_file(const fs::path& path) { return engine::is_gguf_file(path); }

Result<protocol::GgufVocab> read_gguf_vocab(const engine::GgufMetadata& md) {
  protocol::GgufVocab v;
  FT_ASSIGN_OR_RETURN(const std::string_view model, md.get_string("tokenizer.ggml.model"));
  v.model = model;
  if (md.find("tokenizer.ggml.pre")) {
    FT_ASSIGN_OR_RETURN(const std::string_view pre, md.get_string("tokenizer.ggml.pre"));
    v.pre = pre;
  }
  // The 150k-650k strings are views into the mapping until here: copied once, moved afterwards.
  FT_ASSIGN_OR_RETURN(const auto tokens, md.get_strings("tokenizer.ggml.tokens"));
  v.tokens = copy_strings(tokens);
  if (md.find("tokenizer.ggml.token_type")) {
    FT_ASSIGN_OR_RETURN(const auto types, md.get_ints("tokenizer.ggml.token_type"));
    v.token_types.reserve(types.size());
    for (int64_t t : types) v.token_types.push_back(t < INT32_MIN || t > INT32_MAX ? -1 : static_cast<int32_t>(t));
  }
  if (md.find("tokenizer.ggml.merges")) {
    FT_ASSIGN_OR_RETURN(const auto merges, md.get_strings("tokenizer.ggml.merges"));
    v.merges = copy_strings(merges);
  }
  FT_RETURN_IF_ERROR(optional_key(md, "tokenizer.ggml.bos_token_id", v.bos_id, &engine::GgufMetadata::get_int));
  FT_RETURN_IF_ERROR(optional_key(md, "tokenizer.ggml.eos_token_id", v.eos_id, &engine::GgufMetadata::get_int));
  FT_RETURN_IF_ERROR(optional_key(md, "tokenizer.ggml.padding_token_id", v.pad_id, &engine::GgufMetadata::get_int));
  FT_RETURN_IF_ERROR(optional_key(md, "tokenizer.ggml.add_bos_token", v.add_bos, &engine::GgufMetadata::get_bool));
  FT_RETURN_IF_ERROR(optional_key(md, "tokenizer.ggml.add_eos_token", v.add_eos, &engine::GgufMetadata::get_bool));
  if (md.find("tokenizer.chat_template")) {
    FT_ASSIGN_OR_RETURN(const std::string_view tmpl, md.get_string("tokenizer.chat_template"));
    v.chat_template = tmpl;
  }
  return v;
}

Result<protocol::Tokenizer> load_model_tokenizer(const fs::path& model) {
  if (!is_gguf_file(model)) return protocol::Tokenizer::load(model);
  FT_ASSIGN_OR_RETURN(const engine::GgufFile file, engine::GgufFile::open(model));
  auto vocab = read_gguf_vocab(file.metadata());
  if (!vocab) return vocab.status();  // the reader's messages name the file already
  auto tokenizer = protocol::Tokenizer::from_gguf(std::move(vocab).value());
  if (!tokenizer) return Status(tokenizer.status().code(), model.string() + ": " + tokenizer.status().message());
  return tokenizer;
}

}  // namespace ft::proxy

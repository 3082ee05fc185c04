// Tokenizer: loading, the encode pipeline and decode. The pipeline is HF's, in its order:
//   1. repair invalid UTF-8 (Python would have given HF a str)
//   2. cut out added tokens with normalized=false, on the raw text
//   3. normalize each remaining piece, then cut out added tokens with normalized=true
//   4. pre-tokenize each remaining piece into words, 5. BPE each word.
#include "ft/protocol/tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ft/protocol/unicode.h"
#include "tokenizer/tokenizer_impl.h"

namespace ft::protocol {
namespace {

Result<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open " + path.string());
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) return io_error("cannot read " + path.string());
  return os.str();
}

std::optional<int32_t> lookup(const Tokenizer::Impl& impl, std::string_view token) {
  if (auto it = impl.added_to_id.find(token); it != impl.added_to_id.end()) return it->second;
  if (int32_t id = impl.model.token_to_id(token); id >= 0) return id;
  return std::nullopt;
}

std::optional<int32_t> lookup(const Tokenizer::Impl& impl, const std::optional<std::string>& token) {
  return token ? lookup(impl, std::string_view(*token)) : std::nullopt;
}

}  // namespace

void Tokenizer::Impl::encode_into(std::string_view text, std::vector<int32_t>& ids, std::vector<TokenCut>* cuts) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    append_utf8_lossy(text, true, repaired);
    text = repaired;
    cuts = nullptr;  // offsets into the repaired text are not offsets into the caller's
  }
  const std::size_t npos = std::string_view::npos;
  auto on_word = [&](std::string_view word) { model.encode_word(word, ids); };
  auto on_normalized = [&](std::string_view piece) { pre_tokenizer.run(piece, on_word); };
  std::string normalized;
  auto on_raw = [&](std::string_view piece) {
    // A cut inside a piece is one in the text only when the piece is the text's own bytes: an
    // identity normalizer, so that the prefix up to the cut normalizes to the same bytes too.
    const bool in_text = normalizer.identity() && cuts;
    if (normalizer.apply(piece, normalized)) piece = normalized;
    const std::size_t base = in_text ? static_cast<std::size_t>(piece.data() - text.data()) : 0;
    added.split(piece, /*normalized_set=*/true, on_normalized, [&](int32_t id, std::size_t cut) {
      if (in_text && cut != npos) cuts->push_back({base + cut, ids.size()});
      ids.push_back(id);
    });
  };
  added.split(text, /*normalized_set=*/false, on_raw, [&](int32_t id, std::size_t cut) {
    if (cuts && cut != npos) cuts->push_back({cut, ids.size()});
    ids.push_back(id);
  });
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
  return from_json_with_template(tokenizer_json, config_json, std::nullopt);
}

Result<Tokenizer> Tokenizer::from_json_with_template(std::string_view tokenizer_json, std::string_view config_json,
                                                     const std::optional<std::string>& chat_template_file) {
  try {
    FT_ASSIGN_OR_RETURN(tok::TokenizerJson file, tok::read_tokenizer_json(tokenizer_json));
    FT_ASSIGN_OR_RETURN(auto impl, build_tokenizer(file));
    FT_ASSIGN_OR_RETURN(impl->config, parse_tokenizer_config(config_json, chat_template_file));
    impl->bos_id = lookup(*impl, impl->config.bos_token);
    impl->eos_id = lookup(*impl, impl->config.eos_token);
    return Tokenizer(std::move(impl));
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong JSON type somewhere deep: report it rather than crash.
    return corrupt(std::string("tokenizer files have an unexpected shape: ") + e.what());
  }
}

Result<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  const auto tokenizer_path = dir / "tokenizer.json";
  if (!std::filesystem::is_regular_file(tokenizer_path))
    return not_found("no tokenizer.json in " + dir.string());
  FT_ASSIGN_OR_RETURN(std::string tokenizer_json, read_text(tokenizer_path));
  std::string config_json;
  if (std::filesystem::is_regular_file(dir / "tokenizer_config.json")) {
    FT_ASSIGN_OR_RETURN(config_json, read_text(dir / "tokenizer_config.json"));
  }
  std::optional<std::string> chat_template;
  if (std::filesystem::is_regular_file(dir / "chat_template.jinja")) {
    FT_ASSIGN_OR_RETURN(chat_template, read_text(dir / "chat_template.jinja"));
  } else if (std::filesystem::is_regular_file(dir / "chat_template.json")) {
    FT_ASSIGN_OR_RETURN(std::string text, read_text(dir / "chat_template.json"));
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
      return corrupt((dir / "chat_template.json").string() + " has no string \"chat_template\"");
    chat_template = j["chat_template"].get<std::string>();
  }
  auto tokenizer = from_json_with_template(tokenizer_json, config_json, chat_template);
  if (!tokenizer) return Status(tokenizer.status().code(), dir.string() + ": " + tokenizer.status().message());
  return tokenizer;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens && impl_->config.add_bos_token && impl_->bos_id) ids.push_back(*impl_->bos_id);
  impl_->encode_into(text, ids);
  if (add_special_tokens && impl_->config.add_eos_token && impl_->eos_id) ids.push_back(*impl_->eos_id);
  return ids;
}

std::vector<int32_t> Tokenizer::encode_with_cuts(std::string_view text, std::vector<TokenCut>& cuts) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  cuts.clear();
  impl_->encode_into(text, ids, &cuts);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (skip_special_tokens && impl_->is_special(id)) continue;
    bytes.append(impl_->token_bytes(id));
  }
  return utf8_lossy(bytes);
}

std::string_view Tokenizer::token_bytes(int32_t id) const { return impl_->token_bytes(id); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return lookup(*impl_, token); }

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->added_index.size()) return std::nullopt;
  if (int32_t a = impl_->added_index[id]; a >= 0) return impl_->added.tokens()[a].content;
  const auto& model = impl_->model.id_to_token();
  if (static_cast<std::size_t>(id) >= model.size() || model[id].empty()) return std::nullopt;
  return model[id];
}

bool Tokenizer::is_special(int32_t id) const { return impl_->is_special(id); }

std::size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
std::size_t Tokenizer::id_limit() const { return impl_->added_index.size(); }
const std::optional<std::string>& Tokenizer::bos_token() const { return impl_->config.bos_token; }
const std::optional<std::string>& Tokenizer::eos_token() const { return impl_->config.eos_token; }
const std::optional<std::string>& Tokenizer::pad_token() const { return impl_->config.pad_token; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
bool Tokenizer::add_bos_token() const { return impl_->config.add_bos_token; }
bool Tokenizer::add_eos_token() const { return impl_->config.add_eos_token; }
const std::string& Tokenizer::chat_template() const { return impl_->config.chat_template; }

}  // namespace ft::protocol

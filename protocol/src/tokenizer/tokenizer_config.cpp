// tokenizer_config.json: the special-token names and flags transformers reads, and the chat
// template. Only what the server needs; unknown keys are ignored.
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_impl.h"

namespace ft::protocol {
namespace {

// A token is written either as "text" or as {"__type": "AddedToken", "content": "text", ...}.
std::optional<std::string> token_name(const nlohmann::json& cfg, const char* key) {
  if (!cfg.contains(key)) return std::nullopt;
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

bool flag(const nlohmann::json& cfg, const char* key) {
  return cfg.contains(key) && cfg[key].is_boolean() && cfg[key].get<bool>();
}

// "chat_template" is a string, or a list of {"name", "template"} of which "default" is used.
std::string template_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string first;
    for (const auto& t : v) {
      if (!t.is_object() || !t.contains("template") || !t["template"].is_string()) continue;
      if (t.value("name", std::string()) == "default") return t["template"].get<std::string>();
      if (first.empty()) first = t["template"].get<std::string>();
    }
    return first;
  }
  return "";
}

}  // namespace

Result<TokenizerConfig> parse_tokenizer_config(std::string_view config_json,
                                               const std::optional<std::string>& chat_template_file) {
  TokenizerConfig c;
  if (!config_json.empty()) {
    nlohmann::json cfg = nlohmann::json::parse(config_json, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) return corrupt("tokenizer_config.json is not a JSON object");
    c.bos_token = token_name(cfg, "bos_token");
    c.eos_token = token_name(cfg, "eos_token");
    c.pad_token = token_name(cfg, "pad_token");
    c.add_bos_token = flag(cfg, "add_bos_token");
    c.add_eos_token = flag(cfg, "add_eos_token");
    if (cfg.contains("chat_template")) c.chat_template = template_of(cfg["chat_template"]);
  }
  if (chat_template_file) c.chat_template = *chat_template_file;  // transformers: the file wins
  return c;
}

}  // namespace ft::protocol

#include "normalize.h"

namespace ft::proxy {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kBillingPrefix = "x-anthropic-billing-header:";

bool starts_with_billing(const ordered_json& text) {
  return text.is_string() && text.get_ref<const std::string&>().rfind(kBillingPrefix, 0) == 0;
}

// Claude Code's first system block, "x-anthropic-billing-header: cc_version=<v>.<3 hex>;
// cc_entrypoint=...;", differs per conversation (derived from the first prompt), so it would make
// the very first bytes of every conversation unique: nothing would be shared across sessions or
// with sub-agents. It carries no instruction for the model.
bool drop_billing_header(ordered_json& body) {
  auto it = body.find("system");
  if (it == body.end()) return false;
  ordered_json& system = *it;
  if (system.is_string()) {
    if (!starts_with_billing(system)) return false;
    const std::string& s = system.get_ref<const std::string&>();
    const std::size_t nl = s.find('\n');
    system = nl == std::string::npos ? std::string() : s.substr(nl + 1);
    return true;
  }
  if (!system.is_array()) return false;
  bool changed = false;
  for (auto b = system.begin(); b != system.end();) {
    // Field by field: value("type", "") would throw on a type that is not a string.
    const auto type = b->is_object() ? b->find("type") : b->end();
    const auto text = b->is_object() ? b->find("text") : b->end();
    if (type != b->end() && *type == "text" && text != b->end() && starts_with_billing(*text)) {
      b = system.erase(b);
      changed = true;
    } else {
      ++b;
    }
  }
  return changed;
}

}  // namespace

const std::vector<NormalizationRule>& normalization_rules() {
  static const std::vector<NormalizationRule> kRules = {
      {"claude-code-billing-header",
       "Claude Code's per-conversation x-anthropic-billing-header system block (a nonce in the first bytes)",
       protocol::Dialect::kAnthropic, drop_billing_header},
  };
  return kRules;
}

std::vector<std::string> normalize_request(protocol::Dialect dialect, ordered_json& body) {
  std::vector<std::string> applied;
  if (!body.is_object()) return applied;
  for (const NormalizationRule& r : normalization_rules()) {
    if (r.dialect == dialect && r.apply(body)) applied.push_back(r.name);
  }
  return applied;
}

}  // namespace ft::proxy

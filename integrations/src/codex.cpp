// Codex keeps its config.toml and its state (sessions, logs, credentials) in CODEX_HOME; pointing
// CODEX_HOME at config_dir gives it a provider for the server without reading or writing
// ~/.codex. It speaks the Responses API and reads the key from the env var named by env_key.
#include <cstdio>
#include <sstream>

#include "writers.h"

namespace ft::integrations::detail {
namespace {

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

LaunchPlan codex_plan(const LaunchOptions& o) {
  std::ostringstream toml;
  toml << "# Written by `freetoken launch codex` on every start; edit the launch flags instead.\n"
       << "model = " << toml_string(o.model) << "\n"
       << "model_provider = \"freetoken\"\n";
  if (o.context_tokens > 0) toml << "model_context_window = " << o.context_tokens << "\n";
  // Codex has no output-token setting of its own: `freetoken serve --max-output-tokens` caps it.
  toml << "check_for_update_on_startup = false\n"
       << "web_search = \"disabled\"  # a hosted OpenAI tool; a local server cannot run it\n"
       << "\n[model_providers.freetoken]\n"
       << "name = \"FreeToken\"\n"
       << "base_url = " << toml_string(server_origin(o) + "/v1") << "\n"
       << "env_key = \"FREETOKEN_API_KEY\"\n"
       << "wire_api = \"responses\"\n";
  if (!o.scope.empty()) toml << "http_headers = { \"X-FreeToken-Scope\" = " << toml_string(o.scope) << " }\n";
  toml << "\n[analytics]\nenabled = false\n"
       // The plugin marketplace syncs from github.com at every start; ChatGPT apps and remote
       // plugins need an OpenAI login. None of them can work against a local server.
       << "\n[features]\nplugins = false\nremote_plugin = false\napps = false\n";
  LaunchPlan plan;
  plan.argv = {"codex"};
  plan.files = {{o.config_dir / "config.toml", toml.str()}};
  plan.set_env = {{"CODEX_HOME", o.config_dir.string()}, {"FREETOKEN_API_KEY", o.api_key}};
  return plan;
}

}  // namespace ft::integrations::detail

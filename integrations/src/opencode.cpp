// OpenCode reads a generated opencode.json through OPENCODE_CONFIG, merged over the user's global
// config (which stays untouched) and under a project's own opencode.json. The provider uses
// OpenCode's bundled OpenAI-compatible SDK, so nothing is downloaded at start.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "writers.h"

namespace ft::integrations::detail {

LaunchPlan opencode_plan(const LaunchOptions& o) {
  nlohmann::ordered_json model = {{"name", o.model}, {"tool_call", true}, {"reasoning", false}};
  if (o.context_tokens > 0 || o.max_output_tokens > 0) {
    // OpenCode needs both limits once either is given; 0 falls back to a value that keeps the
    // other meaningful (it compacts when context - output is used up).
    const int context = o.context_tokens > 0 ? o.context_tokens : 200000;
    const int output = o.max_output_tokens > 0 ? o.max_output_tokens : std::min(32000, context / 4);
    model["limit"] = {{"context", context}, {"output", output}};
  }
  const std::string model_ref = "freetoken/" + o.model;
  nlohmann::ordered_json config = {
      {"$schema", "https://opencode.ai/config.json"},
      {"provider",
       {{"freetoken",
         {{"npm", "@ai-sdk/openai-compatible"},
          {"name", "FreeToken"},
          {"options", {{"baseURL", server_origin(o) + "/v1"}, {"apiKey", o.api_key}}},
          {"models", {{o.model, model}}}}}}},
      {"model", model_ref},
      {"small_model", model_ref},  // titles and summaries go to the same server
      {"autoupdate", false},
      {"share", "disabled"},
  };
  if (!o.scope.empty()) config["provider"]["freetoken"]["options"]["headers"] = {{"X-FreeToken-Scope", o.scope}};
  const auto path = o.config_dir / "opencode.json";
  LaunchPlan plan;
  plan.argv = {"opencode"};
  plan.files = {{path, config.dump(2) + "\n"}};
  plan.set_env = {
      {"OPENCODE_CONFIG", path.string()},
      {"OPENCODE_DISABLE_MODELS_FETCH", "1"},  // no models.dev catalogue download
      {"OPENCODE_DISABLE_AUTOUPDATE", "1"},
  };
  // Inline config content would be merged over ours.
  plan.unset_env = {"OPENCODE_CONFIG_CONTENT"};
  return plan;
}

}  // namespace ft::integrations::detail

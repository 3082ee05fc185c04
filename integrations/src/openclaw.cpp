// OpenClaw gets its whole config file (OPENCLAW_CONFIG_PATH) and state directory
// (OPENCLAW_STATE_DIR, sessions and its database) under config_dir, so ~/.openclaw is neither read
// nor written. The file is JSON, which OpenClaw's JSON5 reader accepts.
#include <nlohmann/json.hpp>

#include "writers.h"

namespace ft::integrations::detail {

LaunchPlan openclaw_plan(const LaunchOptions& o) {
  nlohmann::ordered_json model = {
      {"id", o.model},
      {"name", o.model},
      {"reasoning", false},
      {"input", {"text"}},
      {"cost", {{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}}},
  };
  if (o.context_tokens > 0) model["contextWindow"] = o.context_tokens;
  if (o.max_output_tokens > 0) model["maxTokens"] = o.max_output_tokens;
  nlohmann::ordered_json config = {
      {"models",
       {{"providers",
         {{"freetoken",
           {{"baseUrl", server_origin(o) + "/v1"},
            {"apiKey", o.api_key},
            {"api", "openai-completions"},
            {"models", {model}}}}}}}},
      {"agents", {{"defaults", {{"model", {{"primary", "freetoken/" + o.model}}}}}}},
  };
  if (!o.scope.empty()) config["models"]["providers"]["freetoken"]["headers"] = {{"X-FreeToken-Scope", o.scope}};
  const auto path = o.config_dir / "openclaw.json";
  LaunchPlan plan;
  plan.argv = {"openclaw"};
  plan.files = {{path, config.dump(2) + "\n"}};
  plan.set_env = {
      {"OPENCLAW_CONFIG_PATH", path.string()},
      {"OPENCLAW_STATE_DIR", (o.config_dir / "state").string()},
  };
  return plan;
}

}  // namespace ft::integrations::detail

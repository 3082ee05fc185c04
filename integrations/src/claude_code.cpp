// Claude Code is configured through its environment only: no file is written, so the user's
// ~/.claude and ~/.claude.json (login, settings, history) stay as they are.
#include "writers.h"

namespace ft::integrations::detail {

LaunchPlan claude_code_plan(const LaunchOptions& o) {
  LaunchPlan plan;
  plan.argv = {"claude"};
  plan.set_env = {
      {"ANTHROPIC_BASE_URL", server_origin(o)},  // no /v1: the client appends /v1/messages
      {"ANTHROPIC_API_KEY", o.api_key},
      // Every model slot the client may pick (main, background "haiku" calls, subagents) names
      // the served model, so no request asks for a model the server does not have.
      {"ANTHROPIC_MODEL", o.model},
      {"ANTHROPIC_DEFAULT_OPUS_MODEL", o.model},
      {"ANTHROPIC_DEFAULT_SONNET_MODEL", o.model},
      {"ANTHROPIC_DEFAULT_HAIKU_MODEL", o.model},
      {"ANTHROPIC_SMALL_FAST_MODEL", o.model},  // the older name of the haiku slot
      {"CLAUDE_CODE_SUBAGENT_MODEL", o.model},
      // Loopback only: no update checks, telemetry, error reports or api.anthropic.com lookups,
      // and no marketplace download on an interactive start.
      {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
      {"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "1"},
      // The per-conversation billing block at the start of the system prompt would defeat
      // cross-conversation prefix reuse.
      {"CLAUDE_CODE_ATTRIBUTION_HEADER", "0"},
  };
  if (o.max_output_tokens > 0)
    plan.set_env.push_back({"CLAUDE_CODE_MAX_OUTPUT_TOKENS", std::to_string(o.max_output_tokens)});
  if (!o.scope.empty()) plan.set_env.push_back({"ANTHROPIC_CUSTOM_HEADERS", "X-FreeToken-Scope: " + o.scope});
  // Any of these in the user's shell would send a second credential or route around the server.
  plan.unset_env = {"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"};
  return plan;
}

}  // namespace ft::integrations::detail

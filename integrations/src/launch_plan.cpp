#include "ft/integrations/launch_plan.h"

#include <cstdlib>

#include "writers.h"

namespace ft::integrations {
namespace fs = std::filesystem;

std::string_view agent_name(Agent agent) {
  switch (agent) {
    case Agent::kClaudeCode: return "claude";
    case Agent::kOpenCode: return "opencode";
    case Agent::kOpenClaw: return "openclaw";
    case Agent::kCodex: return "codex";
  }
  return "unknown";
}

const std::vector<Agent>& all_agents() {
  static const std::vector<Agent> kAgents = {Agent::kClaudeCode, Agent::kOpenCode, Agent::kOpenClaw, Agent::kCodex};
  return kAgents;
}

std::optional<Agent> parse_agent(std::string_view name) {
  for (Agent a : all_agents())
    if (agent_name(a) == name) return a;
  return std::nullopt;
}

std::string server_origin(const LaunchOptions& options) {
  const bool ipv6 = options.host.find(':') != std::string::npos && options.host.front() != '[';
  return "http://" + (ipv6 ? "[" + options.host + "]" : options.host) + ":" + std::to_string(options.port);
}

fs::path default_agent_config_dir(Agent agent) {
  fs::path base;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) base = fs::path(x) / "freetoken";
  else if (const char* h = std::getenv("HOME"); h && *h) base = fs::path(h) / ".local/share/freetoken";
  else base = fs::temp_directory_path() / "freetoken";
  return base / "agents" / std::string(agent_name(agent));
}

LaunchPlan plan_launch(Agent agent, const LaunchOptions& options) {
  switch (agent) {
    case Agent::kClaudeCode: return detail::claude_code_plan(options);
    case Agent::kOpenCode: return detail::opencode_plan(options);
    case Agent::kOpenClaw: return detail::openclaw_plan(options);
    case Agent::kCodex: return detail::codex_plan(options);
  }
  return {};
}

}  // namespace ft::integrations

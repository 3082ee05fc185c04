// What `freetoken launch <agent>` does, as data: the environment to set, the configuration files
// to write and the command line to run so that one coding agent talks to a FreeToken server.
// Building a plan is a pure function of LaunchOptions (no I/O), so it can be printed (--dry-run),
// tested, and applied by a separate step (plan_io.h).
//
// Rule every writer keeps: the user's own agent configuration is never read or written. Generated
// files go to LaunchOptions::config_dir (a FreeToken-owned directory) and the agent is pointed at
// them through its own environment variable.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ft::integrations {

enum class Agent { kClaudeCode, kOpenCode, kOpenClaw, kCodex };

// "claude", "opencode", "openclaw", "codex": the names `freetoken launch` takes.
std::string_view agent_name(Agent agent);
std::optional<Agent> parse_agent(std::string_view name);
const std::vector<Agent>& all_agents();

struct LaunchOptions {
  std::string host = "127.0.0.1";       // where `freetoken serve` listens (an IPv6 literal is bracketed)
  int port = 1919;                      // its TCP port
  std::string api_key = "freetoken";    // sent as the agent's key; any value unless serve has --api-key
  std::string model = "freetoken-demo";  // the model name the agent sends (serve's --model-name/--alias)
  int max_output_tokens = 8192;         // the agent's own cap on output tokens per request (0: its default)
  int context_tokens = 32768;           // the context window the agent assumes (serve --ctx); 0: its default
  std::filesystem::path config_dir;     // this agent's generated files; see default_agent_config_dir()
  // Sent as X-FreeToken-Scope on every request (proxy sharing_scope.h): the agent's checkpoints
  // are shared only with requests of the same scope. Empty: the tenant-wide default.
  std::string scope;
};

struct EnvVar {
  std::string name;
  std::string value;
};

struct FileToWrite {
  std::filesystem::path path;  // absolute when config_dir is absolute
  std::string content;
};

struct LaunchPlan {
  std::vector<EnvVar> set_env;           // set, replacing any inherited value
  std::vector<std::string> unset_env;    // removed: inherited values that would override ours
  std::vector<FileToWrite> files;        // written (parent directories created) before the start
  std::vector<std::string> argv;         // argv[0] is the program name, e.g. "claude"
};

// The plan for one agent. Pass-through arguments are appended to argv by the caller.
LaunchPlan plan_launch(Agent agent, const LaunchOptions& options);

// "http://127.0.0.1:1919" (no trailing slash; IPv6 hosts in brackets).
std::string server_origin(const LaunchOptions& options);

// $XDG_DATA_HOME/freetoken/agents/<agent>, else ~/.local/share/freetoken/agents/<agent>, else
// <temp dir>/freetoken/agents/<agent>.
std::filesystem::path default_agent_config_dir(Agent agent);

}  // namespace ft::integrations

// `freetoken launch <agent>`: starts a coding agent (Claude Code, OpenCode, OpenClaw, Codex) pointed
// at a running `freetoken serve`. The configuration comes from ft_integrations as a plan (files,
// environment, command line); this command checks the server, fills in the defaults only it can
// know (the served model, where Node 24 and the agent are installed), then writes and execs.
#include <httplib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "ft/integrations/agent_install.h"
#include "ft/integrations/launch_plan.h"
#include "ft/integrations/plan_io.h"
#include "ft/proxy/sharing_scope.h"

namespace ft::cli {
namespace fs = std::filesystem;
namespace integ = ft::integrations;
namespace {

constexpr const char* kDemoModel = "freetoken-demo";

std::string agent_list() {
  std::string out;
  for (integ::Agent a : integ::all_agents()) out += (out.empty() ? "" : "|") + std::string(integ::agent_name(a));
  return out;
}

// The server at host:port answers GET /health with 200, or the reason it does not.
Status check_health(const integ::LaunchOptions& o) {
  httplib::Client client(o.host, o.port);
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(5, 0);
  const std::string url = integ::server_origin(o) + "/health";
  auto res = client.Get("/health");
  if (!res)
    return unavailable("no FreeToken server answers at " + url + " (" + httplib::to_string(res.error()) +
                       "); start one with `freetoken serve --port " + std::to_string(o.port) +
                       "`, or pass --host/--port of the running one");
  if (res->status != 200)
    return unavailable(url + " answered HTTP " + std::to_string(res->status) + ": is this a FreeToken server?");
  return {};
}

// The first model the server lists (its --model-name), so that a plain `launch` uses whatever is
// being served.
Result<std::string> served_model(const integ::LaunchOptions& o) {
  httplib::Client client(o.host, o.port);
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/v1/models", {{"x-api-key", o.api_key}, {"Authorization", "Bearer " + o.api_key}});
  if (!res || res->status != 200) return unavailable("GET /v1/models failed");
  auto body = nlohmann::json::parse(res->body, nullptr, false);
  if (body.is_discarded() || !body.contains("data") || !body["data"].is_array() || body["data"].empty() ||
      !body["data"][0].is_object() || !body["data"][0].contains("id") || !body["data"][0]["id"].is_string())
    return corrupt("GET /v1/models listed no model");
  return body["data"][0]["id"].get<std::string>();
}

fs::path self_binary() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec);
}

int run_launch(const Args& args) {
  if (args.positional().empty()) return usage_error("launch", "which agent? " + agent_list() + " (see --help)");
  const auto agent = integ::parse_agent(args.positional()[0]);
  if (!agent)
    return usage_error("launch", "unknown agent '" + args.positional()[0] + "' (expected " + agent_list() + ")");
  const bool dry_run = args.has("dry-run");

  integ::LaunchOptions o;
  o.host = args.get("host");
  o.port = args.get_int("port");
  o.api_key = args.get("api-key");
  o.max_output_tokens = args.get_int("max-output-tokens");
  o.context_tokens = args.get_int("context");
  o.scope = args.get("scope");
  if (!o.scope.empty() && !ft::proxy::valid_scope(o.scope))
    return usage_error("launch", "--scope: " + ft::proxy::scope_rule());
  if (o.port <= 0 || o.port > 65535) return usage_error("launch", "--port must be 1..65535");
  if (o.max_output_tokens < 0 || o.context_tokens < 0)
    return usage_error("launch", "--max-output-tokens and --context must be >= 0");
  o.config_dir = args.has("config-dir") ? fs::absolute(args.get("config-dir")) : integ::default_agent_config_dir(*agent);

  // A dry run changes nothing and needs no server; a real launch refuses to start an agent that
  // would only fail on its first request.
  if (!dry_run) {
    if (Status s = check_health(o); !s) return runtime_error("launch", s.message());
  }
  std::string model_source = "--model";
  if (args.has("model")) {
    o.model = args.get("model");
  } else if (auto m = served_model(o)) {
    o.model = *m;
    model_source = "GET " + integ::server_origin(o) + "/v1/models";
  } else if (dry_run) {
    o.model = kDemoModel;
    model_source = "no server answered GET /v1/models; the demo model's name";
  } else {
    return runtime_error("launch", m.status().message() + " at " + integ::server_origin(o) + "; pass --model NAME");
  }

  const fs::path npm_prefix = integ::npm_prefix_for_binary(self_binary());
  const char* path_env = std::getenv("PATH");
  const std::string search_path = path_env ? path_env : "";
  auto program = integ::find_agent_program(*agent, npm_prefix, search_path);
  if (!program) return runtime_error("launch", program.status().message());

  integ::LaunchPlan plan = integ::plan_launch(*agent, o);
  // Node 24 first on PATH: OpenClaw needs it, and the agents' own child processes (MCP servers,
  // hooks) then find a Node they support.
  if (fs::path node_bin = integ::bundled_node_bin_dir(npm_prefix); !node_bin.empty())
    plan.set_env.push_back({"PATH", node_bin.string() + (search_path.empty() ? "" : ":" + search_path)});
  plan.argv.insert(plan.argv.end(), args.pass_through().begin(), args.pass_through().end());

  if (dry_run) {
    std::printf("# freetoken launch %s --dry-run: what launching would do (nothing was written or started)\n"
                "# model '%s' (from %s)\n%s",
                args.positional()[0].c_str(), o.model.c_str(), model_source.c_str(),
                integ::describe_plan(plan, *program).c_str());
    return 0;
  }
  if (Status s = integ::write_plan_files(plan); !s) return runtime_error("launch", s.message());
  integ::apply_plan_env(plan);
  std::fprintf(stderr, "freetoken launch: %s -> %s, model '%s'%s\n", plan.argv[0].c_str(),
               integ::server_origin(o).c_str(), o.model.c_str(),
               plan.files.empty() ? "" : (" (config in " + o.config_dir.string() + ")").c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> argv;
  for (std::string& a : plan.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(program->c_str(), argv.data());
  return runtime_error("launch", "cannot start " + program->string() + ": " + std::strerror(errno));
}

}  // namespace

const Command kLaunchCommand = {
    "launch",
    "start a coding agent (claude, opencode, openclaw, codex) pointed at a running freetoken serve",
    "freetoken launch claude|opencode|openclaw|codex [--host 127.0.0.1] [--port 1919] [--model NAME] "
    "[--dry-run] [-- AGENT ARGS...]",
    {{"host", "ADDR", "address of the running freetoken serve", "127.0.0.1", false},
     {"port", "N", "its TCP port", "1919", false},
     {"api-key", "KEY", "key the agent sends (serve's --api-key; any value when it has none)", "freetoken", false},
     {"model", "NAME", "model name the agent sends (default: the first one GET /v1/models lists)", "", false},
     {"max-output-tokens", "N", "the agent's own cap on output tokens per request (0: the agent's default)", "8192",
      false},
     {"context", "TOKENS", "context window the agent assumes; match serve's --ctx (0: the agent's default)", "32768",
      false},
     {"scope", "NAME",
      "share checkpoints only with requests of the same scope (sent as X-FreeToken-Scope; default: the whole tenant)",
      "", false},
     {"config-dir", "DIR",
      "where the agent's generated config and state go (default: $XDG_DATA_HOME/freetoken/agents/<agent>)", "", false},
     {"dry-run", "", "print the files, environment and command line as a shell script; change nothing", "", false}},
    1,
    run_launch,
    true,
};

}  // namespace ft::cli

// `freetoken serve`: the product in one command. Starts the engine process (`freetoken engine`,
// supervised: restarted if it dies) and the agent-facing proxy in this process, on a model
// directory or the built-in demo model.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "commands.h"
#include "demo_model.h"
#include "engine_flags.h"
#include "engine_supervisor.h"
#include "ft/proxy/backend.h"
#include "proxy_flags.h"

namespace ft::cli {
namespace fs = std::filesystem;
namespace {

int run_serve(const Args& args) {
  block_stop_signals();  // before any thread exists: they all inherit the mask
  const bool demo = !args.has("model");
  auto model_dir = model_dir_or_demo(args.get("model"), args.get("tokenizer-from"));
  if (!model_dir) return usage_error("serve", model_dir.status().message());
  auto options = server_options_from(args, demo, *model_dir);
  if (!options) return usage_error("serve", options.status().message());
  const proxy::ServerOptions& opts = *options;

  std::vector<std::string> engine_args = {"--model", fs::absolute(*model_dir).string()};
  for (std::string& a : forward_engine_flags(args)) engine_args.push_back(std::move(a));

  EngineSupervisor::Options supervision;
  supervision.ready_timeout_s = int(args.get_int("engine-timeout"));
  supervision.liveness_timeout_s = int(args.get_int("engine-liveness-timeout"));
  supervision.crash_window_s = int(args.get_int("engine-crash-window"));
  // Giving up on the engine ends serve: a proxy without an engine serves nothing.
  std::atomic<bool> gave_up{false};
  supervision.on_give_up = [&gave_up](const std::string&) {
    gave_up = true;
    kill(getpid(), SIGTERM);  // what wait_for_stop_signal below waits for
  };
  auto engine = EngineSupervisor::start(engine_args, std::move(supervision));
  if (!engine) return runtime_error("serve", engine.status().message());
  // Restarted engines come up on fresh ports: the proxy follows the supervisor's.
  auto backend = proxy::make_remote_backend("127.0.0.1", (*engine)->port_source(), 30000, (*engine)->key(),
                                            args.get_int("engine-stall-timeout"));
  if (!backend) return runtime_error("serve", backend.status().message());

  auto server = start_proxy_server(opts, std::move(backend).value(), *model_dir);
  if (!server) return runtime_error("serve", server.status().message());
  std::printf("freetoken: serving '%s'%s from %s\n", opts.model_id.c_str(),
              demo ? " (DEMO model with RANDOM weights: its output is noise)" : "", model_dir->c_str());
  std::printf("freetoken: listening on http://%s:%d  (Anthropic /v1/messages, OpenAI /v1/chat/completions "
              "and /v1/responses)\n", opts.host.c_str(), (*server)->port());
  std::printf("freetoken: dashboard at http://%s:%d/\n", opts.host.c_str(), (*server)->port());
  std::fflush(stdout);
  const int sig = wait_for_stop_signal();
  (*server)->stop();
  if (gave_up) return runtime_error("serve", "the engine keeps failing (see above); stopped");
  std::printf("freetoken: stopping (signal %d)\n", sig);
  std::fflush(stdout);
  return 0;  // the supervisor stops the engine on destruction
}

std::vector<Flag> serve_flags() {
  std::vector<Flag> flags = {
      {"model", "DIR", "HF checkpoint directory (with tokenizer.json); default: the built-in demo model", "", false}};
  for (Flag& f : proxy_server_flags()) flags.push_back(std::move(f));
  for (Flag& f : engine_runtime_flags()) flags.push_back(std::move(f));
  std::vector<Flag> more = {
      {"engine-timeout", "SECONDS", "how long to wait for the engine to load the model", "600", false},
      {"engine-stall-timeout", "SECONDS",
       "a generation that hears nothing from the engine this long fails as unavailable (503, retry)", "60", false},
      {"engine-liveness-timeout", "SECONDS",
       "an engine whose status route has not answered this long is hung: killed and restarted (0: never)", "60", false},
      {"engine-crash-window", "SECONDS",
       "an engine that dies or hangs within this long of coming up is failing: after five in a row serve stops", "30",
       false},
      {"tokenizer-from", "DIR", "where the demo model's Qwen3 tokenizer files come from", "", false}};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

}  // namespace

const Command kServeCommand = {
    "serve",
    "serve a model to coding agents over the Anthropic and OpenAI APIs (the demo model by default)",
    "freetoken serve [--model DIR] [--host 127.0.0.1] [--port 1919] [--api-key KEY] [--store DIR | --no-store]",
    serve_flags(),
    0,
    run_serve,
};

}  // namespace ft::cli

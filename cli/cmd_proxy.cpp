// `freetoken proxy`: the agent-facing HTTP API alone, talking to an engine process started
// elsewhere (`freetoken engine`). The model (a checkpoint directory or a .gguf file) supplies the
// tokenizer and chat template; it must be the engine's model.
#include <cstdio>

#include "commands.h"
#include "key_file.h"
#include "demo_model.h"
#include "ft/proxy/backend.h"
#include "proxy_flags.h"

namespace ft::cli {
namespace fs = std::filesystem;
namespace {

int run_proxy(const Args& args) {
  block_stop_signals();  // before any thread exists: they all inherit the mask
  const std::string engine = args.get("engine");
  const auto colon = engine.rfind(':');
  int engine_port = 0;
  if (colon != std::string::npos) engine_port = std::atoi(engine.c_str() + colon + 1);
  if (colon == std::string::npos || engine_port <= 0 || engine_port > 65535)
    return usage_error("proxy", "--engine must be HOST:PORT (got '" + engine + "')");
  const std::string engine_host = engine.substr(0, colon);

  const bool demo = !args.has("model");
  auto model_dir = model_dir_or_demo(args.get("model"), args.get("tokenizer-from"));
  if (!model_dir) return usage_error("proxy", model_dir.status().message());
  auto options = server_options_from(args, demo, *model_dir);
  if (!options) return usage_error("proxy", options.status().message());
  const proxy::ServerOptions& opts = *options;

  std::string engine_key;
  if (args.has("engine-key-file")) {
    auto k = read_key_file(args.get("engine-key-file"));
    if (!k) return usage_error("proxy", k.status().message());
    engine_key = std::move(k).value();
  }
  auto backend =
      proxy::make_remote_backend(engine_host, engine_port, args.get_int("engine-timeout") * 1000, engine_key,
                                 args.get_int("engine-stall-timeout"));
  if (!backend) return runtime_error("proxy", backend.status().message());
  auto server = start_proxy_server(opts, std::move(backend).value(), *model_dir);
  if (!server) return runtime_error("proxy", server.status().message());
  std::printf("freetoken proxy: listening on http://%s:%d, engine at %s\n", opts.host.c_str(), (*server)->port(),
              engine.c_str());
  std::fflush(stdout);
  wait_for_stop_signal();
  (*server)->stop();
  return 0;
}

std::vector<Flag> proxy_flags() {
  std::vector<Flag> flags = {
      {"engine", "HOST:PORT", "the engine process (freetoken engine)", "", true},
      {"model", "DIR|FILE.gguf",
       "the engine's model, a checkpoint directory or a GGUF file (its tokenizer and chat template); default: "
       "the demo model",
       "", false},
      {"engine-timeout", "SECONDS", "how long to wait for the engine to answer", "60", false},
      {"engine-stall-timeout", "SECONDS",
       "a generation that hears nothing from the engine this long fails as unavailable (503, retry)", "60", false},
      {"engine-key-file", "FILE", "the engine's key (its --key-file), sent on every request", "", false},
      {"tokenizer-from", "DIR", "where the demo model's Qwen3 tokenizer files come from", "", false}};
  for (Flag& f : proxy_server_flags()) flags.push_back(std::move(f));
  return flags;
}

}  // namespace

const Command kProxyCommand = {
    "proxy",
    "run the agent-facing API in front of a separately started engine",
    "freetoken proxy --engine HOST:PORT [--model DIR] [--host 127.0.0.1] [--port 1919]",
    proxy_flags(),
    0,
    run_proxy,
};

}  // namespace ft::cli

// `freetoken serve`: the HTTP API agents talk to, on a model directory or the built-in demo model.
// This first version runs the CPU engine in-process, one request at a time; the separate engine
// process, prefix checkpoints and batching come with the runtime-pair work.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "commands.h"
#include "demo_model.h"
#include "ft/engine/random_checkpoint.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/server.h"

namespace ft::cli {
namespace fs = std::filesystem;
namespace {

// Creates the demo model on first use.
Status ensure_demo_model(const fs::path& dir, const fs::path& tokenizer_from) {
  if (fs::exists(dir / "config.json") && fs::exists(dir / "tokenizer.json")) return {};
  std::printf("freetoken: creating the demo model (random weights) in %s ...\n", dir.c_str());
  std::fflush(stdout);
  return write_demo_model(dir, tokenizer_from, engine::demo_model_spec().seed);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int run_serve(const Args& args) {
  const bool demo = !args.has("model");
  fs::path model_dir = demo ? default_demo_model_dir() : fs::path(args.get("model"));
  if (demo) {
    fs::path from = args.has("tokenizer-from") ? fs::path(args.get("tokenizer-from")) : default_demo_tokenizer_dir();
    if (Status s = ensure_demo_model(model_dir, from); !s) return usage_error("serve", s.message());
  }
  proxy::LocalBackendOptions backend_options;
  backend_options.context_length = args.get_int("ctx");
  backend_options.max_waiting = args.get_int("max-waiting");
  auto backend = proxy::make_local_backend(model_dir, backend_options);
  if (!backend) return usage_error("serve", backend.status().message());
  auto tokenizer = protocol::Tokenizer::load(model_dir);
  if (!tokenizer) return usage_error("serve", "tokenizer: " + tokenizer.status().message());
  auto chat_template = protocol::ChatTemplate::from_tokenizer(*tokenizer);
  if (!chat_template) return usage_error("serve", "chat template: " + chat_template.status().message());

  proxy::ServerOptions opts;
  opts.host = args.get("host");
  opts.port = args.get_int("port");
  opts.model_id = args.has("model-name") ? args.get("model-name")
                  : demo                 ? "freetoken-demo"
                                         : fs::absolute(model_dir).filename().string();
  opts.model_aliases = split_commas(args.get("alias"));
  opts.api_key = args.get("api-key");
  opts.max_output_tokens = args.get_int("max-output-tokens");
  opts.default_max_tokens = args.get_int("default-max-tokens");

  // Signals are taken by sigwait below, not by whichever server thread they would interrupt.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto server = proxy::Server::create(opts, std::move(backend).value(), std::move(tokenizer).value(),
                                      std::move(chat_template).value());
  if (!server) return runtime_error("serve", server.status().message());
  if (Status s = (*server)->start(); !s) return runtime_error("serve", s.message());
  std::printf("freetoken: serving '%s'%s from %s\n", opts.model_id.c_str(),
              demo ? " (DEMO model with RANDOM weights: its output is noise)" : "", model_dir.c_str());
  std::printf("freetoken: listening on http://%s:%d  (Anthropic /v1/messages, OpenAI /v1/chat/completions "
              "and /v1/responses)\n", opts.host.c_str(), (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&sigs, &sig);
  std::printf("freetoken: stopping (signal %d)\n", sig);
  (*server)->stop();
  return 0;
}

}  // namespace

const Command kServeCommand = {
    "serve",
    "serve a model to coding agents over the Anthropic and OpenAI APIs (the demo model by default)",
    "freetoken serve [--model DIR] [--host 127.0.0.1] [--port 1919] [--api-key KEY]",
    {{"model", "DIR", "HF checkpoint directory (with tokenizer.json); default: the built-in demo model", "", false},
     {"model-name", "NAME", "the model name clients send (default: the directory name, or freetoken-demo)", "", false},
     {"alias", "A,B", "further model names to accept, comma-separated", "", false},
     {"host", "ADDR", "address to listen on", "127.0.0.1", false},
     {"port", "N", "TCP port (0: any free port)", "1919", false},
     {"api-key", "KEY", "require this key (x-api-key or Authorization: Bearer)", "", false},
     {"ctx", "TOKENS", "context length per sequence, prompt + output", "32768", false},
     {"default-max-tokens", "N", "output tokens when a request names none", "4096", false},
     {"max-output-tokens", "N", "server-side cap on output tokens per request (0: none)", "0", false},
     {"max-waiting", "N", "requests queued before answering 'overloaded' (429/529)", "16", false},
     {"tokenizer-from", "DIR", "where the demo model's Qwen3 tokenizer files come from", "", false}},
    0,
    run_serve,
};

}  // namespace ft::cli

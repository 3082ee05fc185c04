#include "proxy_flags.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ft/common/loopback.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/output_parser.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/model_tokenizer.h"
#include "http_limit_flags.h"
#include "key_file.h"
#include "model_locator.h"

namespace ft::cli {
namespace fs = std::filesystem;

std::vector<Flag> proxy_server_flags() {
  std::vector<Flag> flags = {
      {"model-name", "NAME", "the model name clients send (default: the directory name, or freetoken-demo)", "", false},
      {"alias", "A,B", "further names for the model, comma-separated (with --strict-model-names)", "", false},
      {"model-alias", "PATTERN=NAME,...", "requested names matching PATTERN (* and ?) are served by model NAME", "", false},
      {"strict-model-names", "", "answer only the model's own name and its aliases (others: 404); by default every "
       "requested model name is served by this model", "", false},
      {"host", "ADDR", "address to listen on (beyond loopback it needs --api-key or --allow-no-key)", "127.0.0.1", false},
      {"allow-no-key", "", "listen on a non-loopback --host without --api-key (anyone who reaches it is served)", "",
       false},
      {"port", "N", "TCP port (0: any free port, printed at start)", "1919", false},
      {"api-key", "KEY", "require this key (x-api-key or Authorization: Bearer)", "", false},
      {"api-keys", "FILE", "accept only the keys in FILE (mode 600), one 'TENANT KEY' a line: each tenant's "
       "checkpoints serve its own keys alone", "", false},
      {"default-max-tokens", "N", "output tokens when a request names none", "4096", false},
      {"max-output-tokens", "N", "server-side cap on output tokens per request (0: none)", "0", false},
      {"no-prefix-cache", "", "compute every prompt in full (no checkpoint restore or save)", "", false},
      {"checkpoint-stride", "TOKENS", "tokens between intermediate checkpoints of a long prompt (0: none)", "4096", false},
      {"capture", "DIR", "write every API exchange to DIR as numbered JSON files (replay fixtures)", "", false},
  };
  for (Flag& f : http_limit_flags(proxy::ServerOptions{}.max_queued_requests)) flags.push_back(std::move(f));
  return flags;
}

Result<proxy::ServerOptions> server_options_from(const Args& args, bool demo, const fs::path& model_dir) {
  proxy::ServerOptions opts;
  opts.host = args.get("host");
  opts.port = args.get_int("port");
  // A directory's name, a GGUF file's without ".gguf", or the Ollama name.
  const fs::path model_path = fs::absolute(model_dir).lexically_normal();
  const std::string spec = args.has("model") ? args.get("model") : "";
  opts.model_id = args.has("model-name")              ? args.get("model-name")
                  : demo                              ? "freetoken-demo"
                  : spec.starts_with(kOllamaPrefix)   ? spec.substr(kOllamaPrefix.size())
                  : model_path.extension() == ".gguf" ? model_path.stem().string()
                                                      : model_path.filename().string();
  opts.model_aliases = split_commas(args.get("alias"));
  for (const std::string& item : split_commas(args.get("model-alias"))) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return invalid_argument("--model-alias: '" + item + "' is not PATTERN=NAME");
    if (item.substr(eq + 1) != opts.model_id)
      return invalid_argument("--model-alias: this server serves one model, '" + opts.model_id + "', not '" +
                              item.substr(eq + 1) + "'");
    opts.model_aliases.push_back(item.substr(0, eq));
  }
  opts.strict_model_names = args.has("strict-model-names");
  opts.api_key = args.get("api-key");
  if (args.has("api-keys")) {
    if (!opts.api_key.empty()) return invalid_argument("--api-key and --api-keys: give one of them");
    FT_ASSIGN_OR_RETURN(const auto keys, read_api_keys_file(args.get("api-keys")));
    if (keys.empty()) return invalid_argument("--api-keys " + args.get("api-keys") + ": no TENANT KEY lines");
    for (const TenantKey& k : keys) opts.api_keys.push_back({k.tenant, k.key});
  }
  if (!loopback_host(opts.host) && opts.api_key.empty() && opts.api_keys.empty() && !args.has("allow-no-key"))
    return invalid_argument("--host " + opts.host + " listens beyond this machine: set --api-key KEY (or --allow-no-key "
                            "to serve anyone who can reach it)");
  opts.max_output_tokens = args.get_int("max-output-tokens");
  opts.default_max_tokens = args.get_int("default-max-tokens");
  opts.prefix_cache = !args.has("no-prefix-cache");
  if (args.has("capture")) opts.capture_dir = args.get("capture");
  opts.checkpoints.stride = std::size_t(std::max(0, args.get_int("checkpoint-stride")));
  FT_ASSIGN_OR_RETURN(const HttpLimitFlags limits, http_limits_from(args));
  opts.max_queued_requests = limits.max_queued_requests;
  opts.request_read_timeout_s = limits.request_read_timeout_s;
  return opts;
}

Result<std::unique_ptr<proxy::Server>> start_proxy_server(const proxy::ServerOptions& options,
                                                          std::unique_ptr<proxy::GenerationBackend> backend,
                                                          const fs::path& model_dir) {
  auto tokenizer = proxy::load_model_tokenizer(model_dir);
  if (!tokenizer) return Status(tokenizer.status().code(), "tokenizer: " + tokenizer.status().message());
  auto chat_template = protocol::ChatTemplate::from_tokenizer(*tokenizer);
  if (!chat_template) return Status(chat_template.status().code(), "chat template: " + chat_template.status().message());
  // Which markup replies are read in: said once, plainly when there is none to read.
  const std::string family = backend->info().family;
  const std::string parser = protocol::output_parser_for(family, chat_template->markers());
  if (parser.empty()) {
    std::printf(
        "freetoken: model family '%s' has no tool-call parser here (its chat template teaches no markup this "
        "server reads): replies are text, a leading <think> block is reasoning, tool calls are not recognised\n",
        family.c_str());
  } else {
    std::printf("freetoken: replies read as %s output (reasoning, tool calls)\n", parser.c_str());
  }
  FT_ASSIGN_OR_RETURN(auto server, proxy::Server::create(options, std::move(backend), std::move(tokenizer).value(),
                                                         std::move(chat_template).value()));
  FT_RETURN_IF_ERROR(server->start());
  return server;
}

void block_stop_signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
}

int wait_for_stop_signal() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  int sig = 0;
  sigwait(&sigs, &sig);
  return sig;
}

}  // namespace ft::cli

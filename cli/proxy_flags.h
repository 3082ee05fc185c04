// What `serve` and `proxy` share: the HTTP API's flags, turning them into ServerOptions, and
// starting the server on a model's tokenizer and chat template.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "flags.h"
#include "ft/proxy/server.h"

namespace ft::cli {

std::vector<Flag> proxy_server_flags();

// kInvalidArgument for a malformed --model-alias or one naming another model.
Result<proxy::ServerOptions> server_options_from(const Args& args, bool demo, const std::filesystem::path& model_dir);

// Loads the tokenizer and chat template of `model_dir` (a checkpoint directory or a .gguf file),
// creates and starts the server.
Result<std::unique_ptr<proxy::Server>> start_proxy_server(const proxy::ServerOptions& options,
                                                          std::unique_ptr<proxy::GenerationBackend> backend,
                                                          const std::filesystem::path& model_dir);

// Blocks SIGINT/SIGTERM in this thread (and the threads it starts later) so wait_for_signal()
// takes them instead of whichever server thread they would interrupt. Call before starting threads.
void block_stop_signals();
int wait_for_stop_signal();

}  // namespace ft::cli

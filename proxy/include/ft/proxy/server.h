// The HTTP server agents talk to: Anthropic Messages, OpenAI Chat Completions and Responses, plus
// /v1/models, /health, /metrics (Prometheus text), /v1/stats (JSON) and the live dashboard at GET /.
// Every error is returned in the calling API's own schema and status code; a bad request never
// stops the server.
//
// Tenants: each API key (x-api-key or Bearer) is its own checkpoint namespace (keyed by a hash of
// the key, never the key itself); requests without a key share the "anonymous" tenant.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/proxy/backend.h"

namespace ft::protocol {
class Tokenizer;
class ChatTemplate;
}  // namespace ft::protocol

namespace ft::proxy {

// How many checkpoints the proxy asks the engine to keep per request (see checkpoint_plan.h).
struct CheckpointPolicy {
  std::size_t tail = 2;                  // cuts snapshotted at the end of each prompt
  std::size_t stride = 4096;             // tokens between intermediate snapshots (0: none)
  std::size_t max_pins_per_tenant = 32;  // live sessions whose newest checkpoints are pinned
  // Prompts shorter than this are not pinned: short side calls (titles, quick probes) are cheap
  // to recompute and must not crowd a live session's state out of memory.
  std::size_t min_pin_tokens = 1024;
};

struct ServerOptions {
  std::string host = "127.0.0.1";     // listen address; loopback unless asked otherwise
  int port = 1919;                    // 0: any free port (see Server::port())
  std::string model_id = "freetoken";  // the model name clients send
  // Further names for the model: exact names or patterns with * and ? ("claude-*"). Only
  // strict_model_names makes them matter (and /v1/models lists the exact ones).
  std::vector<std::string> model_aliases;
  // Off (the default): every requested model name is served by this model, and responses carry
  // the name the client asked for. On: names other than model_id and the aliases get 404.
  bool strict_model_names = false;
  std::string api_key;                // "" accepts any key; else x-api-key or Bearer must match
  // Several keys, each naming the tenant its callers belong to (`--api-keys FILE`): only these are
  // accepted, and a tenant's checkpoints serve only its own keys' requests. Exclusive with api_key.
  struct NamedKey {
    std::string tenant;
    std::string key;
  };
  std::vector<NamedKey> api_keys;
  std::size_t max_body_bytes = 8u << 20;  // bytes; larger bodies get 413
  // Work a request may spend finding and checking its semantic boundaries, in the units of
  // protocol/chat_render.h (0: its default, which agent conversations of a few hundred messages do
  // not reach). Past it the oldest boundaries are left out (counted in /v1/stats and /metrics);
  // the newest are kept.
  std::size_t boundary_work_limit = 0;
  int default_max_tokens = 4096;      // output tokens when the request names none
  int max_output_tokens = 0;          // server-side cap on output tokens; 0: none
  int http_threads = 32;              // concurrent connections served
  // Bounds on slow and numerous clients (ft/common/http_server.h): connections that wait for a
  // worker before new ones get 503 + Retry-After, and the seconds a request's headers and body
  // have to arrive (408 after; 0: no bound).
  int max_queued_requests = 128;
  int request_read_timeout_s = 30;
  bool prefix_cache = true;           // restore checkpoints at semantic boundaries
  CheckpointPolicy checkpoints;
  // When set, every API exchange is written there as <6-digit sequence>.json: method, path,
  // status, the request body and the assistant text returned (replay fixtures, debugging).
  std::filesystem::path capture_dir;
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> create(ServerOptions options, std::unique_ptr<GenerationBackend> backend,
                                                protocol::Tokenizer tokenizer, protocol::ChatTemplate chat_template);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves on a background thread; kUnavailable when the address cannot be bound.
  Status start();
  int port() const;
  // Blocks until stop() is called (from another thread or a signal handler's helper thread).
  void wait();
  void stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft::proxy

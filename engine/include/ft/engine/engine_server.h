// The engine process's HTTP face: protocol::engine (protocol/ENGINE-PROTOCOL.md) over cpp-httplib
// on loopback. Routes: GET /engine/v1/status, GET /engine/v1/memory, POST /engine/v1/lookup,
// POST /engine/v1/generate (NDJSON event stream), POST /engine/v1/cancel, POST
// /engine/v1/gpu-memory (resize the expert cache to a GPU memory budget). A client that goes away
// mid-stream cancels its request. With a key (EngineServerOptions::key) every route needs it.
#pragma once

#include <memory>
#include <string>

#include "ft/common/result.h"
#include "ft/engine/elastic_gpu_memory.h"
#include "ft/engine/scheduler.h"

namespace ft::engine {

struct EngineServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                          // 0: any free port (see port())
  std::size_t max_body_bytes = 64u << 20;  // a 30k-token suffix is ~200 KB of JSON
  int http_threads = 64;                 // concurrent generate streams + control calls
  // Bounds on slow and numerous clients (ft/common/http_server.h): connections that wait for a
  // worker before new ones get 503 + Retry-After, and the seconds a request's headers and body
  // have to arrive (408 after; 0: no bound).
  int max_queued_requests = 256;
  int request_read_timeout_s = 30;
  // Non-empty: every request must carry "Authorization: Bearer <key>" (else 401, before routing).
  // `serve` hands its engine a fresh key each start, so no other local process can restore,
  // overwrite or list another tenant's checkpoints through the engine's port.
  std::string key;
};

class EngineServer {
 public:
  // `scheduler`, `store` and `elastic` (both may be null) must outlive the server. Without
  // `elastic`, a GPU memory request resizes the model's expert cache directly.
  EngineServer(EngineServerOptions options, Scheduler& scheduler, store::StateTier* store,
               ElasticGpuMemory* elastic = nullptr);
  ~EngineServer();
  EngineServer(const EngineServer&) = delete;
  EngineServer& operator=(const EngineServer&) = delete;

  // Binds and serves on a background thread; kUnavailable when the address cannot be bound.
  Status start();
  int port() const;
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft::engine

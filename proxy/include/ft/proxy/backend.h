// What the proxy needs from an engine, in the terms of the proxy<->engine protocol
// (protocol/engine_protocol.h): find the deepest checkpoint held, start a generation and read its
// events. Two implementations: the engine process over HTTP (make_remote_backend, what `serve`
// and `proxy` use) and an engine in this process (make_local_backend, for tests and tools).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ft/common/result.h"
#include "ft/protocol/engine_protocol.h"

namespace ft::proxy {

namespace wire = protocol::engine;

struct ModelInfo {
  std::string family;            // "qwen3_5_moe", ...: picks the output parser
  std::string fingerprint;       // the model's identity; roots the prefix keys
  std::vector<int32_t> eos_ids;  // generation_config.json eos_token_id
  int64_t context_length = 0;    // tokens: prompt + output may not exceed it
  int64_t vocab_size = 0;
};

// The model part of an engine status document (GET /engine/v1/status).
ModelInfo model_info_from_status(const nlohmann::json& status);

// One admitted generation. Events arrive in order: started, then tokens and checkpoints, then
// done or error; next() returns nullopt after the last. Destroying it cancels the work.
class Generation {
 public:
  virtual ~Generation() = default;
  virtual std::optional<wire::Event> next() = 0;
  virtual void cancel() = 0;
};

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;
  virtual Result<wire::LookupReply> lookup(const wire::LookupRequest& request) = 0;
  // Admission errors: kUnavailable "overloaded: ..." (queue full) or "engine unavailable: ..."
  // (engine down or restarting), kInvalidArgument (bad request, context too long). A restore that
  // fails after admission arrives as the first event (error, kRestoreMiss).
  virtual Result<std::unique_ptr<Generation>> start(const wire::GenerateRequest& request) = 0;
  virtual const ModelInfo& info() const = 0;
  // The engine's status document (GET /engine/v1/status), for /v1/stats and /metrics.
  virtual nlohmann::json status() = 0;
  // The engine's memory document (GET /engine/v1/memory: resident bytes, checkpoint bytes per
  // tenant), for /v1/stats; {"error": ...} while the engine does not answer.
  virtual nlohmann::json memory() = 0;
  // Resizes the engine's expert cache so its GPU plan takes at most `budget_bytes` (POST
  // /engine/v1/gpu-memory): the placement after it. kInvalidArgument when the engine refuses
  // (no expert cache, too little), kUnavailable when it does not answer.
  virtual Result<nlohmann::json> resize_gpu_memory(std::uint64_t budget_bytes) = 0;
};

struct LocalBackendOptions {
  int max_running = 8;             // sequences batched together (count)
  int max_waiting = 16;            // requests queued beyond those before "overloaded" (count)
  int64_t context_length = 32768;  // tokens per sequence, prompt + output
  uint64_t checkpoint_ram_bytes = 1ull << 30;  // in-memory checkpoint tier; 0: no checkpoints
};

// The engine in this process (scheduler + an in-memory checkpoint tier).
Result<std::unique_ptr<GenerationBackend>> make_local_backend(const std::filesystem::path& model_dir,
                                                              const LocalBackendOptions& options = {});

// An engine process at host:port. Fails unless it answers GET /engine/v1/status in the protocol
// version this proxy speaks (waits up to `connect_timeout_ms` for it to come up). `key`: the
// engine's key (EngineServerOptions::key), sent on every request; empty for an engine without.
// stall_timeout_s: how long a generation may hear nothing from the engine (which sends a keepalive
// every few seconds) before it fails as unavailable, to be retried.
// GET `path` (e.g. "/engine/v1/status") from the engine at host:port with the protocol's headers:
// the JSON document, or {"error": ...} when it does not answer within the timeouts or answers
// something else.
nlohmann::json get_engine_document(const std::string& host, int port, const std::string& key, const char* path,
                                   int read_timeout_s = 5);

Result<std::unique_ptr<GenerationBackend>> make_remote_backend(const std::string& host, int port,
                                                               int connect_timeout_ms = 30000,
                                                               const std::string& key = "",
                                                               int stall_timeout_s = 60);
// The same for an engine whose port may change (a supervisor restarting it on a fresh port): each
// request goes to the port `port` holds at the time.
Result<std::unique_ptr<GenerationBackend>> make_remote_backend(const std::string& host,
                                                               std::shared_ptr<const std::atomic<int>> port,
                                                               int connect_timeout_ms = 30000,
                                                               const std::string& key = "",
                                                               int stall_timeout_s = 60);

}  // namespace ft::proxy

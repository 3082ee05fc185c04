// What the proxy needs from an engine: run one prompt to completion, streaming token ids. The
// in-process LocalBackend runs the CPU engine in this process; the engine server (a separate
// process speaking protocol/'s engine protocol) will implement the same interface.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/sampling.h"

namespace ft::proxy {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int max_new_tokens = 256;
  engine::SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // end-of-turn tokens (generation_config eos_token_id)
};

enum class FinishCause { kStopToken, kLength, kStopped };  // kStopped: the sink asked to stop

struct GenerateResult {
  FinishCause finish = FinishCause::kLength;
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens restored instead of computed
  int new_tokens = 0;     // tokens passed to the sink (a stop token is not passed)
};

// Receives each new token; returning false stops generation (stop string seen, client gone).
using TokenSink = std::function<bool(int32_t token)>;

struct BackendStats {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int active = 0;   // sequences running now
  int waiting = 0;  // admitted, waiting for a slot
};

struct ModelInfo {
  std::string family;            // "qwen3_5_moe", ...: picks the output parser
  std::vector<int32_t> eos_ids;  // generation_config.json eos_token_id
  int64_t context_length = 0;    // tokens: prompt + output may not exceed it
  int64_t vocab_size = 0;
};

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;
  // kUnavailable "overloaded" when the admission queue is full; kInvalidArgument for a prompt
  // longer than the model's context.
  virtual Result<GenerateResult> generate(const GenerateRequest& request, const TokenSink& sink) = 0;
  virtual const ModelInfo& info() const = 0;
  virtual BackendStats stats() const = 0;
};

struct LocalBackendOptions {
  int max_waiting = 16;            // requests queued behind the running one before "overloaded" (count)
  int64_t context_length = 32768;  // tokens per sequence, prompt + output
};

// The CPU reference engine in this process, one sequence at a time.
Result<std::unique_ptr<GenerationBackend>> make_local_backend(const std::filesystem::path& model_dir,
                                                              const LocalBackendOptions& options = {});

}  // namespace ft::proxy

// Continuous batching on one model. Requests (protocol::engine::GenerateRequest) are admitted into
// a bounded queue, start by restoring their checkpoint, prefill their suffix in chunks and then
// decode; every step runs one forward pass over all running sequences together (decode tokens and
// prefill chunks side by side, vLLM-style token flattening). A prefill chunk never crosses a
// requested snapshot position: the state is saved exactly there (recurrent layers cannot be
// rewound), handed to the store without waiting for the disk.
//
// Each request's events (started, tokens, checkpoint, done | error) go to its RequestHandle, which
// the caller drains from its own thread; dropping or cancelling the handle stops the work.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ft/engine/model.h"
#include "ft/protocol/engine_protocol.h"
#include "ft/store/state_tier.h"

namespace ft::engine {

namespace wire = protocol::engine;

inline constexpr int kDefaultStepTokens = 2048;

// Rows a prefill pass takes when nothing decodes: `step_tokens` when positive, else the model's
// own pass size (Model::pass_rows()), else kDefaultStepTokens.
inline int prefill_pass_rows(const Model& model, int step_tokens) {
  if (step_tokens > 0) return step_tokens;
  return model.pass_rows() > 0 ? int(model.pass_rows()) : kDefaultStepTokens;
}

// The next pass over `left` tokens at most `most` a pass, the passes equal rather than full ones
// and a short tail: each pass reads (offloaded: streams) the weights once, and a short pass pays
// that for few rows.
inline std::size_t equal_pass(std::size_t left, std::size_t most) {
  if (left == 0 || most == 0) return std::min(left, most);
  const std::size_t passes = (left + most - 1) / most;
  return (left + passes - 1) / passes;
}

struct SchedulerOptions {
  int64_t context_length = 32768;  // tokens per sequence, prompt + output
  int max_running = 8;             // sequences in the batch at once
  int max_waiting = 16;            // queued beyond the running ones before "overloaded"
  // Rows per forward pass (decode tokens + prefill chunk rows) when nothing is decoding: large, so
  // that a prefill reads the weights once for many tokens. 0: the model's own (Model::pass_rows():
  // on the GPU as many as its workspace holds), else kDefaultStepTokens.
  int step_tokens = 0;
  // While sequences are decoding, a step's prefill rows are cut so that the step takes about this
  // long (from the measured cost of a prefill row): a long prompt arriving never stalls running
  // streams for more than this.
  double max_decode_stall_ms = 500;
};

struct SchedulerStats {
  uint64_t requests = 0;   // admitted
  uint64_t completed = 0;  // ended with done (stop/length)
  uint64_t cancelled = 0;
  uint64_t failed = 0;     // ended with an error event
  uint64_t rejected = 0;   // refused at admission (overloaded, invalid, too long)
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;  // restored from checkpoints
  uint64_t generated_tokens = 0;
  uint64_t steps = 0;              // forward passes
  uint64_t batched_steps = 0;      // of them, with two or more sequences
  uint64_t batch_sequences = 0;    // sum over steps of the sequences in the pass
  uint64_t max_batch_sequences = 0;
  uint64_t checkpoints_saved = 0;
  uint64_t restores = 0;
  uint64_t restore_misses = 0;
  double prefill_seconds = 0;  // steps that held prefill rows
  double decode_seconds = 0;   // steps of decode rows only
  uint64_t prefill_rows = 0;   // rows of prefill processed
  double prefill_ms_per_row = 0;  // recent average cost of a prefill row (sets the chunk while decoding)
  int running = 0;
  int waiting = 0;
};

// The counters as the engine's status document shows them ("scheduler" of /engine/v1/status).
nlohmann::json to_json(const SchedulerStats& s);

// One request's event stream. next() blocks until an event arrives; the last event is kDone or
// kError, after which next() returns nullopt.
class RequestHandle {
 public:
  std::optional<wire::Event> next();
  // With a deadline: nullopt on timeout too (check finished()).
  std::optional<wire::Event> next_until(std::chrono::steady_clock::time_point deadline);
  bool finished() const;
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Scheduler side.
  void push(wire::Event e);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<wire::Event> events_;
  bool closed_ = false;  // the final event was pushed
  std::atomic<bool> cancelled_{false};
};

class Scheduler {
 public:
  // `store` (may be null: no checkpoints) must outlive the scheduler.
  Scheduler(const Model& model, store::StateTier* store, SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Admits the request or says why not (kOverloaded, kInvalidRequest, kContextTooLong).
  Result<std::shared_ptr<RequestHandle>> submit(wire::GenerateRequest request, wire::ErrorReply& refused);
  // Cancels a running or waiting request by id (no-op when unknown or finished).
  void cancel(const std::string& id);
  // The deepest of the keys the store holds for (tenant, this model).
  wire::LookupReply lookup(const wire::LookupRequest& request);

  SchedulerStats stats() const;
  const ModelFingerprint& fingerprint() const { return fingerprint_; }
  const Model& model() const { return model_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Sequence;
  void loop();
  void start_sequence(Sequence& s);
  bool step(std::vector<std::unique_ptr<Sequence>>& running);
  // Saves every requested snapshot at or before the sequence's position (a pass may have run past
  // several where the state holds earlier positions).
  void save_snapshots(Sequence& s);
  void finish(Sequence& s, wire::Finish finish);
  void fail(Sequence& s, wire::ErrorCode code, const std::string& message);

  const Model& model_;
  store::StateTier* store_;
  const SchedulerOptions options_;
  const ModelFingerprint fingerprint_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::unordered_map<std::string, std::weak_ptr<RequestHandle>> by_id_;  // admitted, not finished
  SchedulerStats stats_;
  int active_ = 0;          // sequences taken from waiting_ and not finished: admission counts them
  int restores_done_ = 0;   // restores finished since the loop last looked (wakes it)
  double ms_per_prefill_row_ = 0;  // exponential average over prefill steps; 0 until measured
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ft::engine

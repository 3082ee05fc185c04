#include "ft/engine/scheduler.h"

#include <algorithm>
#include <future>

#include "ft/common/log.h"
#include "ft/engine/sampling.h"
#include "ft/engine/state_checkpoint.h"

namespace ft::engine {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

SamplingParams sampling_params(const wire::Sampling& s) {
  SamplingParams p;
  p.temperature = s.temperature;
  p.greedy = s.temperature <= 0;
  p.top_p = s.top_p;
  p.top_k = s.top_k;
  p.min_p = s.min_p;
  p.seed = s.seed;
  return p;
}

wire::Event error_event(wire::ErrorCode code, std::string message) {
  wire::Event e;
  e.type = wire::Event::Type::kError;
  e.code = code;
  e.message = std::move(message);
  return e;
}

}  // namespace

nlohmann::json to_json(const SchedulerStats& s) {
  return {{"running", s.running},
          {"waiting", s.waiting},
          {"requests", s.requests},
          {"completed", s.completed},
          {"cancelled", s.cancelled},
          {"failed", s.failed},
          {"rejected", s.rejected},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens},
          {"generated_tokens", s.generated_tokens},
          {"steps", s.steps},
          {"batched_steps", s.batched_steps},
          {"batch_sequences", s.batch_sequences},
          {"max_batch_sequences", s.max_batch_sequences},
          {"checkpoints_saved", s.checkpoints_saved},
          {"restores", s.restores},
          {"restore_misses", s.restore_misses},
          {"prefill_seconds", s.prefill_seconds},
          {"decode_seconds", s.decode_seconds},
          {"prefill_rows", s.prefill_rows},
          {"prefill_ms_per_row", s.prefill_ms_per_row}};
}

// ---- RequestHandle ----

void RequestHandle::push(wire::Event e) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = e.type == wire::Event::Type::kDone || e.type == wire::Event::Type::kError;
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

std::optional<wire::Event> RequestHandle::next_until(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return !events_.empty() || closed_; });
  if (events_.empty()) return std::nullopt;
  wire::Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

std::optional<wire::Event> RequestHandle::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || closed_; });
  if (events_.empty()) return std::nullopt;
  wire::Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

bool RequestHandle::finished() const {
  std::lock_guard lock(mu_);
  return closed_ && events_.empty();
}

// ---- Scheduler ----

struct Scheduler::Sequence {
  wire::GenerateRequest req;
  std::shared_ptr<RequestHandle> handle;
  SequenceState state;
  Sampler sampler;
  std::size_t consumed = 0;       // of req.tokens, prefilled
  std::size_t next_snapshot = 0;  // index into req.snapshots
  bool prefilling = true;
  bool done = false;
  int32_t next_input = 0;  // decode: the token fed next step
  int64_t generated = 0;
  int64_t cached = 0;
  // The pass that ends the prompt, and each decode step, draws the next token on the model's
  // device: the request (the sampler's draw) goes with the slice, the token comes back here.
  SampleRequest next_request;
  int32_t next_token = 0;
  Clock::time_point started = Clock::now();
  double prefill_ms = 0;
  Clock::time_point first_token;

  Sequence(wire::GenerateRequest r, std::shared_ptr<RequestHandle> h, const Model& m)
      : req(std::move(r)), handle(std::move(h)), state(m.new_state()), sampler(sampling_params(req.sampling)) {}
};

Scheduler::Scheduler(const Model& model, store::StateTier* store, SchedulerOptions options)
    : model_(model), store_(store), options_(options), fingerprint_(store_fingerprint(model)) {
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Result<std::shared_ptr<RequestHandle>> Scheduler::submit(wire::GenerateRequest req, wire::ErrorReply& refused) {
  const auto refuse = [&](wire::ErrorCode code, std::string message) -> Result<std::shared_ptr<RequestHandle>> {
    refused = {code, message};
    std::lock_guard lock(mu_);
    ++stats_.rejected;
    return invalid_argument(std::move(message));
  };
  if (req.id.empty() || req.tenant.empty() || req.tenant.size() > store::kMaxTenantBytes)
    return refuse(wire::ErrorCode::kInvalidRequest, "id and tenant (1-255 bytes) are required");
  if (req.tokens.empty()) return refuse(wire::ErrorCode::kInvalidRequest, "no tokens to process");
  for (int32_t t : req.tokens) {
    if (t < 0 || t >= model_.vocab_size())
      return refuse(wire::ErrorCode::kInvalidRequest, "token id " + std::to_string(t) + " is outside the vocabulary");
  }
  if (req.restore && !store_) return refuse(wire::ErrorCode::kRestoreMiss, "this engine keeps no checkpoints");
  if (req.prompt_tokens() >= options_.context_length) {
    return refuse(wire::ErrorCode::kContextTooLong,
                  "prompt is too long: " + std::to_string(req.prompt_tokens()) + " tokens, the model's context is " +
                      std::to_string(options_.context_length));
  }
  // Every position of the prompt (restored ones too) takes KV pages: one the pool cannot hold would
  // fail in the middle of its prefill.
  if (const std::optional<KvLayout> kv = model_.kv_layout()) {
    const std::int64_t holds = std::int64_t(model_.kv_stats().pages_max) * kv->page_tokens;
    if (req.prompt_tokens() >= holds) {
      return refuse(wire::ErrorCode::kContextTooLong,
                    "prompt is too long for the engine's KV pages: " + std::to_string(req.prompt_tokens()) +
                        " tokens, its KV budget holds " + std::to_string(holds) +
                        " (start it with a larger --kv-budget)");
    }
  }
  auto handle = std::make_shared<RequestHandle>();
  auto seq = std::make_unique<Sequence>(std::move(req), handle, model_);
  {
    std::lock_guard lock(mu_);
    if (by_id_.count(seq->req.id)) {
      refused = {wire::ErrorCode::kInvalidRequest, "request id '" + seq->req.id + "' is already running"};
      ++stats_.rejected;
      return invalid_argument(refused.message);
    }
    if (int(waiting_.size()) + active_ >= options_.max_running + options_.max_waiting) {
      refused = {wire::ErrorCode::kOverloaded,
                 "overloaded: " + std::to_string(waiting_.size()) + " requests already waiting"};
      ++stats_.rejected;
      return unavailable(refused.message);
    }
    by_id_[seq->req.id] = handle;
    ++stats_.requests;
    waiting_.push_back(std::move(seq));
    stats_.waiting = int(waiting_.size());
  }
  cv_.notify_all();
  return handle;
}

void Scheduler::cancel(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  if (auto h = it->second.lock()) h->cancel();
  cv_.notify_all();
}

wire::LookupReply Scheduler::lookup(const wire::LookupRequest& request) {
  wire::LookupReply reply;
  if (!store_ || request.keys.empty()) return reply;
  auto match = store_->deepest(request.tenant, fingerprint_, request.keys);
  if (!match.is_ok() || !match->has_value()) return reply;
  reply.index = (*match)->index;
  reply.tokens = int64_t((*match)->header.tokens);
  return reply;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Scheduler::finish(Sequence& s, wire::Finish finish) {
  wire::Event e;
  e.type = wire::Event::Type::kDone;
  e.finish = finish;
  e.usage.prompt_tokens = s.req.prompt_tokens();
  e.usage.cached_tokens = s.cached;
  e.usage.new_tokens = s.generated;
  e.usage.prefill_ms = s.prefill_ms;
  e.usage.decode_ms = s.generated > 0 ? ms_since(s.first_token) : 0;
  s.handle->push(std::move(e));
  s.done = true;
  std::lock_guard lock(mu_);
  ++(finish == wire::Finish::kCancelled ? stats_.cancelled : stats_.completed);
  stats_.prompt_tokens += uint64_t(s.req.prompt_tokens());
  stats_.cached_tokens += uint64_t(s.cached);
  stats_.generated_tokens += uint64_t(s.generated);
  by_id_.erase(s.req.id);
}

void Scheduler::fail(Sequence& s, wire::ErrorCode code, const std::string& message) {
  s.handle->push(error_event(code, message));
  s.done = true;
  std::lock_guard lock(mu_);
  ++stats_.failed;
  by_id_.erase(s.req.id);
}

// Restores the checkpoint the request starts from, then unpins what the session let go of (in
// that order: the restored key is often among them, and unpinning may evict it at once).
void Scheduler::start_sequence(Sequence& s) {
  struct Unpin {
    Scheduler& self;
    Sequence& s;
    ~Unpin() {
      if (!self.store_) return;
      for (const PrefixKey& k : s.req.unpin) self.store_->unpin({s.req.tenant, self.fingerprint_, k});
    }
  } unpin_after{*this, s};
  if (s.req.restore) {
    const store::StoreKey key{s.req.tenant, fingerprint_, s.req.restore->key};
    Status st = restore_model_state(*store_, key, s.state);
    if (st && s.state.position() != s.req.restore->tokens) {
      st = not_found("checkpoint holds " + std::to_string(s.state.position()) + " tokens, the request says " +
                     std::to_string(s.req.restore->tokens));
    }
    {
      std::lock_guard lock(mu_);
      ++(st ? stats_.restores : stats_.restore_misses);
    }
    if (!st) {
      fail(s, wire::ErrorCode::kRestoreMiss, st.message());
      return;
    }
    s.cached = s.state.position();
  }
  wire::Event e;
  e.type = wire::Event::Type::kStarted;
  e.restored = s.cached;
  s.handle->push(std::move(e));
}

bool Scheduler::step(std::vector<std::unique_ptr<Sequence>>& running) {
  std::vector<BatchSlice> slices;
  std::vector<Sequence*> members;
  std::vector<std::size_t> chunk;  // prefill rows per member (0: decode)
  bool any_prefill = false;
  // Read every step: an elastic GPU budget shrinks and grows the model's pass size.
  int budget = prefill_pass_rows(model_, options_.step_tokens);
  // Decode first: one row each keeps every stream moving while long prompts prefill.
  for (auto& s : running) {
    if (s->done || s->prefilling) continue;
    s->next_request = s->sampler.request();
    slices.push_back({&s->state, {&s->next_input, 1}, nullptr, LogitsMode::kLast, &s->next_request, &s->next_token});
    members.push_back(s.get());
    chunk.push_back(0);
    --budget;
  }
  if (!slices.empty()) {
    // Streams are decoding: only as many prefill rows as fit the stall budget (256 until the cost
    // of a row has been measured).
    const int fit = ms_per_prefill_row_ > 0 ? int(options_.max_decode_stall_ms / ms_per_prefill_row_) : 256;
    budget = std::min(budget, std::max(16, fit));
  }
  const std::size_t decode_rows = slices.size();
  for (auto& s : running) {
    if (s->done || !s->prefilling) continue;
    if (budget <= 0 && !slices.empty()) break;
    // A state that keeps only its latest position (linear attention) is saved where a chunk ends,
    // so its chunks end at each snapshot; attention KV alone lets a chunk run on, the snapshot
    // taken after the pass.
    std::size_t left = s->req.tokens.size() - s->consumed;
    if (s->next_snapshot < s->req.snapshots.size() && !s->state.holds_earlier_positions())
      left =
          std::min<std::size_t>(left, std::size_t(s->req.snapshots[s->next_snapshot].position - s->state.position()));
    const std::size_t n = equal_pass(left, std::size_t(std::max(budget, 1)));
    // The prompt's last chunk draws the first token (unless none is wanted).
    const bool sample = s->consumed + n == s->req.tokens.size() && s->req.max_new_tokens > 0;
    if (sample) s->next_request = s->sampler.request();
    slices.push_back({&s->state, std::span<const int32_t>(s->req.tokens).subspan(s->consumed, n), nullptr,
                      sample ? LogitsMode::kLast : LogitsMode::kNone, sample ? &s->next_request : nullptr,
                      sample ? &s->next_token : nullptr});
    members.push_back(s.get());
    chunk.push_back(n);
    budget -= int(n);
    any_prefill = true;
  }
  if (slices.empty()) return false;

  const auto t0 = Clock::now();
  Status st = model_.forward_batch(slices);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::size_t prefill_rows = 0;
  for (std::size_t n : chunk) prefill_rows += n;
  if (st && prefill_rows >= 16) {
    // The step's cost per row (decode rows included, they cost about as much as a prefill row).
    const double per_row = seconds * 1e3 / double(prefill_rows + decode_rows);
    ms_per_prefill_row_ = ms_per_prefill_row_ > 0 ? 0.7 * ms_per_prefill_row_ + 0.3 * per_row : per_row;
  }
  {
    std::lock_guard lock(mu_);
    stats_.prefill_rows += prefill_rows;
    stats_.prefill_ms_per_row = ms_per_prefill_row_;
    ++stats_.steps;
    stats_.batch_sequences += slices.size();
    stats_.max_batch_sequences = std::max<uint64_t>(stats_.max_batch_sequences, slices.size());
    if (slices.size() > 1) ++stats_.batched_steps;
    (any_prefill ? stats_.prefill_seconds : stats_.decode_seconds) += seconds;
  }
  if (!st) {
    for (Sequence* s : members) fail(*s, wire::ErrorCode::kInternal, "forward pass failed: " + st.message());
    return true;
  }

  for (std::size_t i = 0; i < members.size(); ++i) {
    Sequence& s = *members[i];
    if (chunk[i] > 0) {
      s.consumed += chunk[i];
      save_snapshots(s);
      if (s.consumed < s.req.tokens.size()) continue;
      s.prefilling = false;
      s.prefill_ms = ms_since(s.started);
    }
    // Logits of the newest position are ready: the next token.
    if (s.req.max_new_tokens == 0) {
      finish(s, wire::Finish::kLength);
      continue;
    }
    const int32_t token = s.next_token;
    if (is_stop_token(token, s.req.stop_ids)) {
      finish(s, wire::Finish::kStop);
      continue;
    }
    if (s.generated == 0) s.first_token = Clock::now();
    ++s.generated;
    wire::Event e;
    e.type = wire::Event::Type::kTokens;
    e.tokens = {token};
    s.handle->push(std::move(e));
    if (s.generated >= s.req.max_new_tokens || s.state.position() >= options_.context_length) {
      finish(s, wire::Finish::kLength);
      continue;
    }
    s.next_input = token;
  }
  return true;
}

void Scheduler::save_snapshots(Sequence& s) {
  while (s.next_snapshot < s.req.snapshots.size() && s.req.snapshots[s.next_snapshot].position <= s.state.position()) {
    const wire::SnapshotRequest& snap = s.req.snapshots[s.next_snapshot++];
    if (!store_) continue;
    const store::StoreKey key{s.req.tenant, fingerprint_, snap.key};
    Result<store::ModelState> state = to_model_state(s.state, fingerprint_, snap.position);
    Status saved = state.status();
    if (state) {
      if (snap.pin) store_->pin(key);
      saved = store_->save_deferred(key, std::make_shared<const store::ModelState>(std::move(state).value()));
    }
    if (!saved) {
      FT_WARN("checkpoint at " << snap.position << " tokens not saved: " << saved.message());
      continue;
    }
    wire::Event e;
    e.type = wire::Event::Type::kCheckpoint;
    e.checkpoint = snap;
    s.handle->push(std::move(e));
    std::lock_guard lock(mu_);
    ++stats_.checkpoints_saved;
  }
}

void Scheduler::loop() {
  std::vector<std::unique_ptr<Sequence>> running;
  // Restores read from RAM or disk on threads of their own, so a 1 GB checkpoint coming off the
  // disk never stalls the batch the running sequences are decoding in.
  std::vector<std::pair<std::unique_ptr<Sequence>, std::future<void>>> restoring;
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> arriving;
    {
      std::unique_lock lock(mu_);
      const auto ready = [&] { return stopping_ || !waiting_.empty() || !running.empty() || restores_done_ > 0; };
      // A restore's future turns ready just after its task's last notify: with restores in
      // flight, look again shortly rather than trust a wake-up alone.
      if (restoring.empty()) cv_.wait(lock, ready);
      else cv_.wait_for(lock, std::chrono::milliseconds(1), ready);
      if (stopping_) break;
      restores_done_ = 0;
      while (int(running.size() + restoring.size() + arriving.size()) < options_.max_running && !waiting_.empty()) {
        arriving.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
        ++active_;
      }
      stats_.waiting = int(waiting_.size());
    }
    for (auto& s : arriving) {
      if (s->handle->cancelled()) {
        finish(*s, wire::Finish::kCancelled);
      } else if (s->req.restore) {
        Sequence* seq = s.get();
        auto done = std::async(std::launch::async, [this, seq] {
          start_sequence(*seq);
          {
            std::lock_guard lock(mu_);
            ++restores_done_;
          }
          cv_.notify_all();
        });
        restoring.emplace_back(std::move(s), std::move(done));
      } else {
        start_sequence(*s);  // nothing to read: starts at once
        running.push_back(std::move(s));
      }
    }
    for (auto it = restoring.begin(); it != restoring.end();) {
      if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      it->second.get();
      if (!it->first->done) running.push_back(std::move(it->first));
      it = restoring.erase(it);
    }
    for (auto& s : running) {
      if (!s->done && s->handle->cancelled()) finish(*s, wire::Finish::kCancelled);
    }
    step(running);
    std::erase_if(running, [](const auto& s) { return s->done; });
    std::lock_guard lock(mu_);
    active_ = int(running.size() + restoring.size());
    stats_.running = int(running.size());
  }
  for (auto& [seq, done] : restoring) {
    done.wait();
    running.push_back(std::move(seq));
  }
  // Shutting down: every request still here gets a clean error.
  std::lock_guard lock(mu_);
  for (auto& s : running) s->handle->push(error_event(wire::ErrorCode::kInternal, "engine shutting down"));
  for (auto& s : waiting_) s->handle->push(error_event(wire::ErrorCode::kInternal, "engine shutting down"));
}

}  // namespace ft::engine

// In-process generation on the CPU reference engine. Requests run one at a time (the engine
// server brings continuous batching); the queue in front is bounded so overload is an error the
// client can retry, not an unbounded wait.
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "ft/engine/model.h"
#include "ft/proxy/backend.h"

namespace ft::proxy {
namespace {

using Clock = std::chrono::steady_clock;

class LocalBackend final : public GenerationBackend {
 public:
  LocalBackend(std::unique_ptr<engine::Model> model, LocalBackendOptions options)
      : model_(std::move(model)), options_(options) {
    info_.family = engine::model_family_name(model_->config().family);
    info_.eos_ids = model_->config().eos_token_ids;
    info_.context_length = options.context_length;
    info_.vocab_size = model_->vocab_size();
  }

  Result<GenerateResult> generate(const GenerateRequest& req, const TokenSink& sink) override {
    if (req.prompt.empty()) return invalid_argument("empty prompt");
    const int64_t context = info_.context_length;
    if (int64_t(req.prompt.size()) >= context)
      return invalid_argument("prompt is too long: " + std::to_string(req.prompt.size()) +
                              " tokens, the model's context is " + std::to_string(context));
    std::unique_lock lock(mu_);
    if (busy_ && stats_.waiting >= options_.max_waiting)
      return unavailable("overloaded: " + std::to_string(stats_.waiting) + " requests already waiting");
    ++stats_.waiting;
    cv_.wait(lock, [&] { return !busy_; });
    --stats_.waiting;
    busy_ = true;
    stats_.active = 1;
    lock.unlock();

    auto result = run(req, sink);

    lock.lock();
    busy_ = false;
    stats_.active = 0;
    ++stats_.requests;
    if (result) {
      stats_.prompt_tokens += result->prompt_tokens;
      stats_.generated_tokens += result->new_tokens;
    }
    lock.unlock();
    cv_.notify_one();
    return result;
  }

  const ModelInfo& info() const override { return info_; }

  BackendStats stats() const override {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  Result<GenerateResult> run(const GenerateRequest& req, const TokenSink& sink) {
    GenerateResult out;
    out.prompt_tokens = int(req.prompt.size());
    engine::SequenceState state = model_->new_state();
    std::vector<float> logits(model_->vocab_size());
    auto t0 = Clock::now();
    FT_RETURN_IF_ERROR(model_->forward(state, req.prompt, logits.data(), engine::LogitsMode::kLast));
    auto t1 = Clock::now();
    engine::Sampler sampler(req.sampling);
    const int64_t room = info_.context_length - int64_t(req.prompt.size());
    const int limit = int(std::min<int64_t>(req.max_new_tokens, room));
    out.finish = FinishCause::kLength;
    for (int i = 0; i < limit; ++i) {
      const int32_t token = sampler.sample(logits);
      if (engine::is_stop_token(token, req.stop_ids)) {
        out.finish = FinishCause::kStopToken;
        break;
      }
      ++out.new_tokens;
      if (!sink(token)) {
        out.finish = FinishCause::kStopped;
        break;
      }
      if (i + 1 == limit) break;
      const int32_t one[1] = {token};
      FT_RETURN_IF_ERROR(model_->forward(state, one, logits.data(), engine::LogitsMode::kLast));
    }
    auto t2 = Clock::now();
    std::lock_guard lock(mu_);
    stats_.prefill_seconds += std::chrono::duration<double>(t1 - t0).count();
    stats_.decode_seconds += std::chrono::duration<double>(t2 - t1).count();
    return out;
  }

  std::unique_ptr<engine::Model> model_;
  LocalBackendOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;
  BackendStats stats_;
  ModelInfo info_;
};

}  // namespace

Result<std::unique_ptr<GenerationBackend>> make_local_backend(const std::filesystem::path& model_dir,
                                                              const LocalBackendOptions& options) {
  FT_ASSIGN_OR_RETURN(auto model, engine::load_model(model_dir));
  return std::unique_ptr<GenerationBackend>(std::make_unique<LocalBackend>(std::move(model), options));
}

}  // namespace ft::proxy

// The engine in this process: a Scheduler over the CPU model with an in-memory checkpoint tier.
// Same behaviour as the engine process, minus HTTP; tests and single-process tools use it.
#include <chrono>

#include "ft/engine/engine_status.h"
#include "ft/engine/model.h"
#include "ft/engine/scheduler.h"
#include "ft/proxy/backend.h"
#include "ft/store/host_ram_tier.h"

namespace ft::proxy {
namespace {

class LocalGeneration final : public Generation {
 public:
  explicit LocalGeneration(std::shared_ptr<engine::RequestHandle> h) : handle_(std::move(h)) {}
  ~LocalGeneration() override { handle_->cancel(); }
  std::optional<wire::Event> next() override { return handle_->next(); }
  void cancel() override { handle_->cancel(); }

 private:
  std::shared_ptr<engine::RequestHandle> handle_;
};

class LocalBackend final : public GenerationBackend {
 public:
  LocalBackend(std::unique_ptr<engine::Model> model, const LocalBackendOptions& options)
      : model_(std::move(model)),
        store_(options.checkpoint_ram_bytes > 0 ? std::make_unique<store::HostRamTier>(options.checkpoint_ram_bytes)
                                                : nullptr) {
    engine::SchedulerOptions so;
    so.context_length = options.context_length;
    so.max_running = options.max_running;
    so.max_waiting = options.max_waiting;
    scheduler_ = std::make_unique<engine::Scheduler>(*model_, store_.get(), so);
    info_ = model_info_from_status(status());
  }

  Result<wire::LookupReply> lookup(const wire::LookupRequest& request) override {
    return scheduler_->lookup(request);
  }

  Result<std::unique_ptr<Generation>> start(const wire::GenerateRequest& request) override {
    wire::ErrorReply refused;
    auto handle = scheduler_->submit(request, refused);
    if (!handle) return wire::to_status(refused);
    return std::unique_ptr<Generation>(std::make_unique<LocalGeneration>(std::move(handle).value()));
  }

  const ModelInfo& info() const override { return info_; }

  nlohmann::json status() override { return engine::engine_status(*scheduler_, store_.get()); }
  nlohmann::json memory() override { return engine::engine_memory(store_.get()); }
  Result<nlohmann::json> resize_gpu_memory(std::uint64_t budget_bytes) override {
    Result<engine::PlacementPlan> plan = model_->resize_gpu_memory(budget_bytes);
    if (!plan) {
      if (plan.status().code() == ErrorCode::kUnsupported) return invalid_argument(plan.status().message());
      return plan.status();
    }
    return nlohmann::json{{"placement", engine::placement_json(*model_)}};
  }

 private:
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<store::HostRamTier> store_;
  std::unique_ptr<engine::Scheduler> scheduler_;  // last: stops before the store and model go
  ModelInfo info_;
};

}  // namespace

Result<std::unique_ptr<GenerationBackend>> make_local_backend(const std::filesystem::path& model_dir,
                                                              const LocalBackendOptions& options) {
  FT_ASSIGN_OR_RETURN(auto model, engine::load_model(model_dir));
  return std::unique_ptr<GenerationBackend>(std::make_unique<LocalBackend>(std::move(model), options));
}

}  // namespace ft::proxy

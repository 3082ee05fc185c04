#include "ft/engine/elastic_gpu_memory.h"

#include <algorithm>

#include "ft/common/log.h"
#include "ft/engine/kv_pool.h"

namespace ft::engine {

namespace {

std::uint64_t wanted_budget(const ElasticInputs& in) {
  const std::uint64_t h = in.headroom_bytes;
  if (h == 0) return in.budget_bytes;
  if (in.free_bytes < h) {
    // Give back what it takes for 2h to be free, doubled for each poll in a row that already did.
    const std::uint64_t give = (2 * h - in.free_bytes) << std::clamp(in.pressed_polls, 0, 4);
    return std::max(in.floor_bytes, in.budget_bytes > give ? in.budget_bytes - give : 0);
  }
  if (in.budget_bytes < in.ceiling_bytes && in.free_bytes > 3 * h) {
    const std::uint64_t take = in.free_bytes - 2 * h;
    return std::min(in.ceiling_bytes, in.budget_bytes + take);
  }
  return in.budget_bytes;
}

}  // namespace

std::uint64_t elastic_budget(const ElasticInputs& in) {
  const std::uint64_t want = wanted_budget(in);
  const std::uint64_t change = want > in.budget_bytes ? want - in.budget_bytes : in.budget_bytes - want;
  return change < std::max<std::uint64_t>(in.step_bytes, 1) ? in.budget_bytes : want;
}

ElasticGpuMemory::ElasticGpuMemory(const Model& model, Options options)
    : model_(model), options_(options), ceiling_(model.placement().total_bytes()) {
  stats_.ceiling_bytes = ceiling_;
  stats_.budget_bytes = ceiling_;  // the plan as loaded
  stats_.headroom_bytes = options_.headroom_bytes;
  if (options_.headroom_bytes > 0) thread_ = std::jthread([this](std::stop_token stop) { watch(stop); });
}

ElasticGpuMemory::~ElasticGpuMemory() {
  if (thread_.joinable()) {
    thread_.request_stop();
    wake_.notify_all();
    thread_.join();
  }
}

Result<PlacementPlan> ElasticGpuMemory::set_ceiling(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  FT_ASSIGN_OR_RETURN(PlacementPlan plan, model_.resize_gpu_memory(bytes));
  ceiling_ = bytes;
  stats_.ceiling_bytes = bytes;
  stats_.budget_bytes = plan.total_bytes();
  return plan;
}

ElasticGpuMemory::Stats ElasticGpuMemory::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ElasticGpuMemory::watch(std::stop_token stop) {
  while (!stop.stop_requested()) {
    poll_once();
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, stop, options_.poll, [] { return false; });
  }
}

void ElasticGpuMemory::poll_once() {
  const std::optional<Backend::DeviceMemoryInfo> device = model_.device_memory();
  const std::optional<ExpertOffloadStats> experts = model_.expert_offload_stats();
  if (!device || !experts) return;
  std::lock_guard lock(mu_);
  const PlacementPlan plan = model_.placement();
  const std::uint64_t cache = plan.expert_cache_bytes();
  ElasticInputs in;
  in.free_bytes = device->free_bytes;
  // What the plan takes now, not the budget it was made for: with a slot count given at load
  // (--expert-slots) that budget is all the GPU had free.
  in.budget_bytes = plan.total_bytes();
  in.ceiling_bytes = ceiling_;
  // The least it can shrink to: the cache at its fewest slots, the KV pool at its first chunk, the
  // workspace at a prefill pass of 256 rows.
  const std::uint64_t kv = plan.kv_pages * plan.kv_page_bytes;
  const std::uint64_t workspace_spare =
      plan.least_workspace_bytes ? plan.workspace_bytes - std::min(plan.workspace_bytes, plan.least_workspace_bytes)
                                 : 0;
  in.floor_bytes = in.budget_bytes - cache - kv - workspace_spare +
                   std::uint64_t(experts->min_slots) * plan.expert_slot_bytes + std::min(kv, KvPool::kChunkBytes);
  in.headroom_bytes = options_.headroom_bytes;
  in.step_bytes = plan.expert_slot_bytes;
  in.pressed_polls = pressed_polls_;
  stats_.device_free_bytes = device->free_bytes;
  const std::uint64_t target = elastic_budget(in);
  pressed_polls_ = target < in.budget_bytes ? pressed_polls_ + 1 : 0;
  if (target == in.budget_bytes) return;
  Result<PlacementPlan> now = model_.resize_gpu_memory(target);
  if (!now) {
    if (stats_.last_error != now.status().message())
      FT_WARN("expert cache: resizing to a " << gib_text(target) << " budget failed: " << now.status().message());
    stats_.last_error = now.status().message();
    return;
  }
  stats_.last_error.clear();
  if (now->total_bytes() == in.budget_bytes) return;  // no whole chunk to give or take
  (now->total_bytes() < in.budget_bytes ? stats_.shrinks : stats_.grows) += 1;
  stats_.budget_bytes = now->total_bytes();
  FT_INFO("expert cache: " << (now->total_bytes() < in.budget_bytes ? "gave back" : "took back") << " GPU memory ("
                           << gib_text(device->free_bytes) << " free): " << now->expert_slots << " slots, "
                           << now->kv_pages << " KV pages, workspace " << gib_text(now->workspace_bytes)
                           << " (passes of " << now->pass_rows << " rows), budget " << gib_text(now->total_bytes())
                           << " of " << gib_text(ceiling_));
}

}  // namespace ft::engine

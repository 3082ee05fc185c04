#include "ft/engine/placement.h"

#include <algorithm>
#include <cstdio>

namespace ft::engine {
namespace {

std::string line(const char* what, std::uint64_t bytes, const std::string& note = "") {
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %-16s %9.2f GiB", what, double(bytes) / double(1ull << 30));
  return buf + (note.empty() ? "" : "  " + note) + "\n";
}

// GPU memory set aside for a pass's temporaries (a prefill chunk's activations, the MoE's padded
// expert rows): a 4,096-token chunk of a 2,048-wide MoE peaks at ~1.7 GiB. Budgets below 24 GiB
// keep 2 GiB, larger ones 4.
constexpr std::uint64_t kWorkspace = std::uint64_t(4) << 30;
constexpr std::uint64_t kSmallWorkspace = std::uint64_t(2) << 30;
constexpr std::uint64_t kSmallBudget = std::uint64_t(24) << 30;
constexpr std::uint64_t kAlign = 256;
// The longest prefill pass a plan sets. Offloaded, each pass streams the experts the cache lacks
// over PCIe one layer ahead of the compute, and a pass long enough for its compute to cover the
// stream runs at the resident speed: a 30B-A3B Q4_K_M at 8 GiB does near 4,096 rows (one pass of
// 4,096: 8,882-10,057 tok/s, 10,686 resident; passes of 2,048: 5,225); bf16 experts stream 3.5x
// the bytes.
constexpr std::uint64_t kStreamPassRows = 8192;
constexpr std::uint64_t kPassRowsStep = 256;

}  // namespace

std::string gib_text(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

std::uint64_t pass_rows_for(std::uint64_t workspace, std::uint64_t row_bytes, std::uint64_t fixed_bytes) {
  const std::uint64_t rows = workspace > fixed_bytes && row_bytes ? (workspace - fixed_bytes) / row_bytes : 0;
  return std::max(kPassRowsStep, std::min(rows, kStreamPassRows) / kPassRowsStep * kPassRowsStep);
}

std::uint64_t least_workspace(std::uint64_t row_bytes, std::uint64_t fixed_bytes) {
  return (fixed_bytes + kPassRowsStep * row_bytes + kAlign - 1) / kAlign * kAlign;
}

Status plan_gpu_memory(PlacementPlan& plan, const GpuPlanRequest& r) {
  plan.budget_bytes = r.budget_bytes;
  plan.workspace_bytes = r.budget_bytes < kSmallBudget ? kSmallWorkspace : kWorkspace;
  const std::uint64_t kv_min = std::max(r.kv_budget_bytes, plan.kv_page_bytes);
  const std::string kv_text = r.kv_budget_bytes ? "--kv-budget " + gib_text(r.kv_budget_bytes) : "a KV page";
  const std::uint64_t resident_need = plan.weight_bytes() + plan.workspace_bytes + kv_min;
  // Resident when a whole context's KV fits beside the weights too (an agent's prompt grows to tens
  // of thousands of tokens); else a few experts in host RAM buy that room.
  const std::uint64_t kv_wanted = r.kv_budget_bytes ? kv_min : std::max(kv_min, r.context_kv_bytes);
  const bool can_offload = plan.routed_expert_bytes > 0 && plan.moe_layers > 0 && plan.experts_per_layer > 0;
  // The rows of a prefill pass the workspace holds, up to kStreamPassRows: fewer, longer passes
  // keep the GEMMs busy (resident 30B-A3B Q4_K_M on an H100: 4,096 tokens in passes of 2,048 7,561
  // tok/s, in one 10,667) and, offloaded, stream the experts fewer times.
  const auto set_pass_rows = [&] {
    if (r.pass_row_bytes) plan.pass_rows = pass_rows_for(plan.workspace_bytes, r.pass_row_bytes, r.pass_fixed_bytes);
  };
  if (r.expert_slots <= 0 &&
      (resident_need - kv_min + kv_wanted <= r.budget_bytes || (!can_offload && resident_need <= r.budget_bytes))) {
    set_pass_rows();
    return Status::ok();
  }
  if (!can_offload) {
    return unavailable("the model needs " + gib_text(resident_need) + " of GPU memory (weights " + gib_text(plan.weight_bytes()) +
                       ", workspace " + gib_text(plan.workspace_bytes) + ", " + kv_text + "); the budget allows " +
                       gib_text(r.budget_bytes));
  }
  plan.experts_on_host = true;
  // The largest expert's bytes, each of its three matrices aligned.
  const std::uint64_t expert =
      std::max(plan.largest_expert_bytes, plan.routed_expert_bytes / (plan.moe_layers * plan.experts_per_layer));
  plan.expert_slot_bytes = (expert + kAlign - 1) / kAlign * kAlign + 3 * kAlign;
  const std::uint64_t fixed = plan.device_weight_bytes() + plan.workspace_bytes;
  const std::uint64_t least = fixed + kv_min + 3 * plan.expert_slot_bytes;
  if (least > r.budget_bytes) {
    return unavailable("the model needs at least " + gib_text(least) +
                       " of GPU memory with its experts in host RAM (weights " + gib_text(plan.device_weight_bytes()) +
                       " without them, workspace " + gib_text(plan.workspace_bytes) + ", " + kv_text +
                       ", three expert slots); the budget allows " + gib_text(r.budget_bytes));
  }
  const std::uint64_t room = r.budget_bytes - fixed;
  // Without --kv-budget: one whole context, the rest to experts, while the expert cache keeps a
  // quarter of the room and three slots at least (a cache of a few percent of the experts decodes
  // about as fast as none); with no context asked (benchmarks), a quarter of the room.
  const std::uint64_t cache_floor = std::min(room, std::max(room / 4, 3 * plan.expert_slot_bytes));
  const std::uint64_t kv_default = r.context_kv_bytes ? std::min(r.context_kv_bytes, room - cache_floor) : room / 4;
  plan.kv_budget_bytes = r.kv_budget_bytes ? r.kv_budget_bytes : std::max(plan.kv_page_bytes, kv_default);
  std::uint64_t cache_room = room - std::min(room, plan.kv_budget_bytes);
  const std::uint64_t all = plan.moe_layers * plan.experts_per_layer;
  if (r.expert_slots > 0) {
    plan.expert_slots = std::uint64_t(r.expert_slots);
    if (plan.expert_slots * plan.expert_slot_bytes > cache_room)
      return unavailable(std::to_string(r.expert_slots) + " expert slots need " +
                         gib_text(plan.expert_slots * plan.expert_slot_bytes) + "; the budget leaves " + gib_text(cache_room));
  } else {
    plan.expert_slots = std::min(all, cache_room / plan.expert_slot_bytes);
  }
  if (plan.expert_slots < 3) {
    return unavailable("the model needs at least " + gib_text(least) +
                       " of GPU memory with its experts in host RAM; the "
                       "KV pool (" +
                       gib_text(plan.kv_budget_bytes) + ") leaves room for fewer than three expert slots");
  }
  // Each pass of a prompt streams the experts the cache lacks: the workspace grows to hold passes
  // of kStreamPassRows rows, out of the expert cache's room only (the KV pool keeps its context):
  // at most half of it, three slots (or the slots asked for) kept, and a third of the budget in all.
  // Decode steps lend the workspace past what they take to the cache, so the cache gives the room
  // up only while a prompt is prefilled.
  if (r.pass_row_bytes) {
    const std::uint64_t slot = plan.expert_slot_bytes;
    const std::uint64_t spare =
        r.expert_slots > 0 ? cache_room - plan.expert_slots * slot : std::min(cache_room / 2, cache_room - 3 * slot);
    const std::uint64_t most =
        std::min(std::max(plan.workspace_bytes, r.budget_bytes / 3), plan.workspace_bytes + spare);
    const std::uint64_t want = r.pass_fixed_bytes + kStreamPassRows * r.pass_row_bytes;
    // Whole units of 256 bytes: the memory set aside is exactly the plan's, at load and resized.
    const std::uint64_t grown = std::clamp(want, plan.workspace_bytes, most) / kAlign * kAlign;
    cache_room -= grown - plan.workspace_bytes;
    plan.workspace_bytes = grown;
    if (r.expert_slots <= 0) plan.expert_slots = std::min(all, cache_room / slot);
    set_pass_rows();
    plan.least_workspace_bytes = std::min(plan.workspace_bytes, least_workspace(r.pass_row_bytes, r.pass_fixed_bytes));
  }
  return Status::ok();
}

std::string PlacementPlan::to_text() const {
  std::string out = "placement on " + device + "\n";
  out += line("embeddings", embedding_bytes);
  out += line("dense weights", dense_bytes, "attention, linear attention, dense MLPs, routers, shared experts");
  if (experts_on_host) {
    out += line("routed experts", routed_expert_bytes,
                std::string("in host RAM (") + (experts_pinned ? "pinned" : "pageable: slower copies") +
                    "), not counted below");
    char note[160];
    std::snprintf(note, sizeof note, "%llu slots of %.1f MiB (%.1f%% of %llu experts); misses: %s",
                  static_cast<unsigned long long>(expert_slots), double(expert_slot_bytes) / double(1 << 20),
                  100.0 * double(expert_slots) / double(std::max<std::uint64_t>(1, moe_layers * experts_per_layer)),
                  static_cast<unsigned long long>(moe_layers * experts_per_layer), moe_policy.c_str());
    out += line("expert cache", expert_cache_bytes(), note);
  } else {
    out += line("routed experts", routed_expert_bytes);
  }
  std::string kv_note = std::to_string(kv_pages) + " pages, " + std::to_string(kv_tokens) + " token positions";
  if (kv_tokens < context_tokens)
    kv_note += "; fewer than one --ctx of " + std::to_string(context_tokens) +
               " (prompts that long are refused: raise --gpu-mem, or lower --ctx)";
  out += line("KV pages", kv_pages * kv_page_bytes, kv_note);
  if (linear_state_sequences) {
    char note[96];
    std::snprintf(note, sizeof note, "room for %llu sequences' recurrent state, %.1f MiB each",
                  static_cast<unsigned long long>(linear_state_sequences),
                  double(linear_state_bytes) / double(1 << 20));
    out += line("linear state", linear_state_room(), note);
  } else if (linear_state_bytes) {
    out += line("linear state", linear_state_bytes, "per sequence, taken as sequences start");
  }
  if (workspace_bytes)
    out += line("workspace", workspace_bytes,
                "kept free for a pass's temporaries" +
                    (pass_rows ? " (prefill passes of " + std::to_string(pass_rows) + " rows)" : std::string()));
  out += line("total", total_bytes(), budget_bytes ? "of a " + std::to_string(budget_bytes >> 20) + " MiB budget" : "");
  if (checkpoint_staging_bytes)
    out +=
        line("ckpt staging", checkpoint_staging_bytes, "host RAM set aside for the KV pages copied out at checkpoints");
  return out;
}

}  // namespace ft::engine

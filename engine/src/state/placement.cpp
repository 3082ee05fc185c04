#include "ft/engine/placement.h"

#include <cstdio>

namespace ft::engine {
namespace {

std::string line(const char* what, std::uint64_t bytes, const std::string& note = "") {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-16s %9.2f GiB%s%s\n", what, double(bytes) / double(1ull << 30),
                note.empty() ? "" : "  ", note.c_str());
  return buf;
}

}  // namespace

std::string PlacementPlan::to_text() const {
  std::string out = "placement on " + device + "\n";
  out += line("embeddings", embedding_bytes);
  out += line("dense weights", dense_bytes, "attention, linear attention, dense MLPs, routers, shared experts");
  out += line("routed experts", routed_expert_bytes);
  out += line("KV pages", kv_pages * kv_page_bytes,
              std::to_string(kv_pages) + " pages, " + std::to_string(kv_tokens) + " token positions");
  if (linear_state_bytes) out += line("linear state", linear_state_bytes, "per sequence, taken as sequences start");
  if (workspace_bytes) out += line("workspace", workspace_bytes, "kept free for a pass's temporaries");
  out += line("total", total_bytes(), budget_bytes ? "of a " + std::to_string(budget_bytes >> 20) + " MiB budget" : "");
  if (reserved_bytes) out += line("checkpoint tier", reserved_bytes, "outside the budget, for snapshots kept on the GPU");
  return out;
}

}  // namespace ft::engine

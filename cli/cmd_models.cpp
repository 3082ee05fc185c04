// `freetoken models`: the checkpoints in the local Hugging Face cache, whether this build runs
// them, and where they would go on this machine.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "ft/engine/device.h"
#include "ft/engine/model_config.h"
#include "model_locator.h"

namespace ft::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kGiB = double(1ull << 30);
constexpr std::uint64_t kGpuWorkspace = 4ull << 30;  // what the GPU backend sets aside at load

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Row {
  CachedModel model;
  std::string arch, dtype, support, placement;
};

// Where the weights would go: all in VRAM when they and the workspace fit the free memory, else
// host RAM (the CPU runtime maps them in place), else nowhere yet.
std::string placement_for(std::uint64_t bytes, const Result<engine::CudaDeviceInfo>& gpu, std::uint64_t ram) {
  char text[160];
  if (gpu && bytes + kGpuWorkspace <= gpu->free_bytes) {
    std::snprintf(text, sizeof text, "GPU: %.1f of %.1f GiB free", (bytes + kGpuWorkspace) / kGiB,
                  gpu->free_bytes / kGiB);
  } else if (bytes <= ram) {
    std::snprintf(text, sizeof text, "CPU: %.1f of %.1f GiB RAM%s", bytes / kGiB, ram / kGiB,
                  gpu ? " (too big for the GPU alone)" : "");
  } else {
    std::snprintf(text, sizeof text, "too large: %.1f GiB, %.1f GiB RAM", bytes / kGiB, ram / kGiB);
  }
  return text;
}

int run_models(const Args& args) {
  const fs::path hub = args.has("hub") ? fs::path(args.get("hub")) : hub_cache_dir();
  const auto gpu = engine::query_cuda_device();
  const std::uint64_t ram = std::uint64_t(sysconf(_SC_PHYS_PAGES)) * std::uint64_t(sysconf(_SC_PAGESIZE));
  std::vector<Row> rows;
  for (CachedModel& m : list_hub_cache(hub)) {
    Row r{std::move(m), "?", "?", "", ""};
    const std::string config = read_text(r.model.dir / "config.json");
    const json j = json::parse(config, nullptr, false);
    if (j.is_object()) {
      r.arch = j.value("model_type", std::string("?"));
      if (j.contains("torch_dtype") && j["torch_dtype"].is_string()) r.dtype = j["torch_dtype"];
      if (j.contains("dtype") && j["dtype"].is_string()) r.dtype = j["dtype"];
    }
    const auto parsed = engine::parse_model_config(config);
    r.support = parsed ? "yes" : "no: " + parsed.status().message();
    r.placement = parsed ? placement_for(r.model.bytes, gpu, ram) : "-";
    rows.push_back(std::move(r));
  }
  if (args.has("json")) {
    json out = json::array();
    for (const Row& r : rows) {
      out.push_back({{"name", r.model.repo}, {"revision", r.model.revision}, {"path", r.model.dir.string()},
                     {"architecture", r.arch}, {"dtype", r.dtype}, {"bytes", r.model.bytes},
                     {"supported", r.support == "yes"}, {"support", r.support}, {"placement", r.placement}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("models in %s\n", hub.c_str());
  if (rows.empty()) {
    std::printf("  none (a model downloaded with the Hugging Face client lands here; pass --model DIR otherwise)\n");
    return 0;
  }
  std::printf("  %-40s %-14s %-9s %9s  %-9s %s\n", "MODEL", "ARCH", "DTYPE", "SIZE", "SUPPORTED", "PLACEMENT");
  for (const Row& r : rows) {
    char size[32];
    std::snprintf(size, sizeof size, "%.1f GiB", r.model.bytes / kGiB);
    std::printf("  %-40s %-14s %-9s %9s  %-9s %s\n", r.model.repo.c_str(), r.arch.c_str(), r.dtype.c_str(), size,
                r.support == "yes" ? "yes" : "no", r.placement.c_str());
  }
  for (const Row& r : rows)
    if (r.support != "yes") std::printf("  %s: %s\n", r.model.repo.c_str(), r.support.c_str());
  std::printf("run one: freetoken serve --model ORG/NAME\n");
  return 0;
}

}  // namespace

const Command kModelsCommand = {
    "models", "list the models in the local Hugging Face cache and where they would run",
    "freetoken models [--json] [--hub DIR]",
    {{"json", "", "print JSON instead of a table", "", false},
     {"hub", "DIR", "the hub cache to list [default: $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub]", "",
      false}},
    0, run_models};

}  // namespace ft::cli

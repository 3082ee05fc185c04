// `freetoken models`: the checkpoints in the local Hugging Face cache, the models Ollama stored and
// the GGUF files llama.cpp and LM Studio keep (or under --dir), whether this build runs them, and
// where they would go on this machine.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "ft/engine/checkpoint.h"
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

// Whether this build runs a parsed config: it parses and load_model builds its family.
Status runnable(const Result<engine::ModelConfig>& parsed) {
  return parsed ? engine::family_built(parsed->family) : parsed.status();
}

// What a GGUF file holds, as a row: its architecture (HF model_type), the dtype of its first
// expert (or first) matrix, and whether this build runs it.
void describe_gguf(const fs::path& file, Row& r, const Result<engine::CudaDeviceInfo>& gpu, std::uint64_t ram) {
  auto ckpt = engine::Checkpoint::open(file);
  if (!ckpt) {
    r.support = "no: " + ckpt.status().message();
    r.placement = "-";
    return;
  }
  const json j = json::parse(ckpt->config_text(), nullptr, false);
  if (j.is_object()) r.arch = j.value("model_type", std::string("?"));
  for (const char* name : {"model.layers.0.mlp.experts.0.gate_proj.weight", "model.layers.0.self_attn.q_proj.weight"}) {
    if (auto t = ckpt->tensor(name)) {
      r.dtype = engine::dtype_name(t->dtype);
      break;
    }
  }
  const Status runs = runnable(engine::parse_model_config(ckpt->config_text(), ckpt->generation_config_text()));
  r.support = runs.is_ok() ? "yes" : "no: " + runs.message();
  r.placement = runs.is_ok() ? placement_for(r.model.bytes, gpu, ram) : "-";
}

// Every model in an Ollama store: manifests/HOST/NAMESPACE/MODEL/TAG, named as --model takes it.
std::vector<Row> ollama_rows(const fs::path& root, const Result<engine::CudaDeviceInfo>& gpu, std::uint64_t ram) {
  std::vector<Row> rows;
  std::error_code ec;
  const fs::path manifests = root / "manifests";
  for (auto it = fs::recursive_directory_iterator(manifests, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const fs::path rel = it->path().lexically_relative(manifests);
    std::vector<std::string> parts(rel.begin(), rel.end());
    if (parts.size() != 4) continue;
    std::string name = parts[2] + ":" + parts[3];
    if (parts[1] != "library") name = parts[1] + "/" + name;
    if (parts[0] != "registry.ollama.ai") name = parts[0] + "/" + parts[1] + "/" + parts[2] + ":" + parts[3];
    Row r{{std::string(kOllamaPrefix) + name, parts[3], {}, 0}, "?", "?", "", ""};
    auto blob = ollama_blob(it->path(), name);
    if (!blob) {
      r.support = "no: " + blob.status().message();
      r.placement = "-";
    } else {
      r.model.dir = *blob;
      r.model.bytes = fs::file_size(*blob, ec);
      describe_gguf(*blob, r, gpu, ram);
    }
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.model.repo < b.model.repo; });
  return rows;
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
      // A quantized release names its format here (its dtype is the unquantized tensors'): "fp8",
      // "mxfp4", or ModelOpt's algorithm ("NVFP4").
      if (const auto q = j.find("quantization_config"); q != j.end() && q->is_object()) {
        if (q->contains("quant_algo") && (*q)["quant_algo"].is_string())
          r.dtype = (*q)["quant_algo"];
        else if (q->contains("quant_method") && (*q)["quant_method"].is_string())
          r.dtype = (*q)["quant_method"];
      }
    }
    const Status runs = runnable(engine::parse_model_config(config));
    r.support = runs.is_ok() ? "yes" : "no: " + runs.message();
    r.placement = runs.is_ok() ? placement_for(r.model.bytes, gpu, ram) : "-";
    rows.push_back(std::move(r));
  }
  const fs::path ollama = ollama_models_dir();
  for (Row& r : ollama_rows(ollama, gpu, ram)) rows.push_back(std::move(r));
  // Loose GGUF files: where llama.cpp and LM Studio keep them, and --dir.
  std::vector<fs::path> dirs = gguf_dirs();
  if (args.has("dir")) dirs.insert(dirs.begin(), fs::path(args.get("dir")));
  for (const fs::path& d : dirs) {
    for (CachedModel& m : list_gguf_files(d)) {
      Row r{std::move(m), "?", "?", "", ""};
      describe_gguf(r.model.dir, r, gpu, ram);
      rows.push_back(std::move(r));
    }
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
  std::string where = hub.string() + ", " + ollama.string();
  for (const fs::path& d : dirs) where += ", " + d.string();
  std::printf("models in %s\n", where.c_str());
  if (rows.empty()) {
    std::printf(
        "  none (models downloaded with the Hugging Face client, `ollama pull`, llama.cpp or LM Studio land there; "
        "pass --dir DIR to list GGUF files elsewhere, --model DIR or --model FILE.gguf to run one)\n");
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
  std::printf("run one: freetoken serve --model NAME (as listed)\n");
  return 0;
}

}  // namespace

const Command kModelsCommand = {
    "models",
    "list the models in the local Hugging Face cache, Ollama's store and llama.cpp's and LM Studio's GGUF folders, "
    "and where they would run",
    "freetoken models [--json] [--hub DIR] [--dir DIR]",
    {{"json", "", "print JSON instead of a table", "", false},
     {"dir", "DIR", "also list the GGUF files under DIR (a few levels deep)", "", false},
     {"hub", "DIR", "the hub cache to list [default: $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub]", "",
      false}},
    0,
    run_models};

}  // namespace ft::cli

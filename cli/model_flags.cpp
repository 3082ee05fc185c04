#include "model_flags.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include "data_dirs.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/device.h"
#include "load_progress.h"
#include "model_locator.h"

namespace ft::cli {

Result<std::vector<int32_t>> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    // Tolerate spaces around entries ("1, 2, 3").
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < 0 || v > INT32_MAX) {
      return invalid_argument("--tokens: '" + item + "' is not a token id (expected e.g. 1,2,3)");
    }
    ids.push_back(int32_t(v));
    start = end + 1;
  }
  if (ids.empty()) return invalid_argument("--tokens: no token ids given");
  return ids;
}

Result<std::unique_ptr<engine::Model>> load_model_from_flags(const Args& args,
                                                             std::shared_ptr<const engine::Checkpoint>* checkpoint,
                                                             int64_t context_tokens) {
  FT_ASSIGN_OR_RETURN(const std::filesystem::path dir, resolve_model_dir(args.get("model")));
  FT_ASSIGN_OR_RETURN(engine::LoadOptions options, load_options_from_flags(args));
  if (context_tokens > 0) options.context_tokens = context_tokens;
  FT_ASSIGN_OR_RETURN(engine::Checkpoint opened, engine::Checkpoint::open(dir));
  auto shared = std::make_shared<const engine::Checkpoint>(std::move(opened));
  if (checkpoint) *checkpoint = shared;
  FT_ASSIGN_OR_RETURN(auto model, engine::load_model(std::move(shared), options));
  // On the GPU, where everything went (stderr: stdout carries the command's output).
  if (model->backend_kind() == engine::BackendKind::kCuda) std::fputs(model->placement().to_text().c_str(), stderr);
  return model;
}

Result<engine::BackendKind> backend_from_flags(const Args& args) {
  const std::string device = args.has("device") ? args.get("device") : "auto";
  const bool reference = args.has("reference");
  if (device == "cpu" || (device == "auto" && reference)) {
    return reference ? engine::BackendKind::kReference : engine::BackendKind::kCpu;
  }
  if (device != "auto" && device != "cuda") return invalid_argument("--device must be auto, cpu or cuda, got '" + device + "'");
  auto gpu = engine::query_cuda_device();
  if (device == "auto") return gpu ? engine::BackendKind::kCuda : engine::BackendKind::kCpu;
  if (reference) return invalid_argument("--reference runs on the CPU; drop --device cuda");
  if (!gpu) return unavailable("--device cuda: " + gpu.status().message());
  return engine::BackendKind::kCuda;
}

Result<engine::LoadOptions> load_options_from_flags(const Args& args) {
  engine::LoadOptions o;
  FT_ASSIGN_OR_RETURN(o.backend, backend_from_flags(args));
  if (args.has("threads")) {
    const int64_t n = args.get_int("threads");
    if (n < 0 || n > 4096) return invalid_argument("--threads must be 0 (every core) or a thread count");
    o.threads = int(n);
  }
  if (args.has("kv-budget")) {
    const double gb = args.get_double("kv-budget");
    if (!(gb > 0) || gb > 1 << 20) return invalid_argument("--kv-budget must be a positive number of GB");
    o.kv_budget_bytes = uint64_t(gb * double(1ull << 30));
  }
  if (args.has("gpu-mem")) {
    const double gb = args.get_double("gpu-mem");
    if (!(gb > 0) || gb > 1 << 20) return invalid_argument("--gpu-mem must be a positive number of GiB");
    if (o.backend != engine::BackendKind::kCuda) return invalid_argument("--gpu-mem needs the GPU (--device cuda)");
    o.gpu_mem_bytes = uint64_t(gb * double(1ull << 30));
  }
  if (args.has("moe-policy")) {
    FT_ASSIGN_OR_RETURN(o.moe_policy, engine::parse_moe_policy(args.get("moe-policy")));
    if (o.backend != engine::BackendKind::kCuda) return invalid_argument("--moe-policy needs the GPU (--device cuda)");
  }
  if (args.has("expert-slots")) {
    const int64_t n = args.get_int("expert-slots");
    if (n < 3 || n > 1 << 24) return invalid_argument("--expert-slots must be at least 3");
    if (o.backend != engine::BackendKind::kCuda)
      return invalid_argument("--expert-slots needs the GPU (--device cuda)");
    o.expert_slots = int(n);
  }
  // A linear-attention model keeps each running sequence's recurrent state beside the KV pool on
  // the GPU: room for the server's running sequences, or a benchmark's batch, when more than 16.
  for (const char* flag : {"max-running", "batch"})
    if (args.has(flag)) o.state_sequences = int(std::clamp<int64_t>(args.get_int(flag), o.state_sequences, 1 << 16));
  o.offload_costs_cache = (freetoken_data_dir() / "offload-bandwidth.json").string();
  if (args.has("recalibrate")) o.recalibrate = true;
  if (args.has("deterministic")) o.deterministic = true;
  if (args.has("cpu-activations")) {
    const std::string a = args.get("cpu-activations");
    if (a != "bf16" && a != "bf16x2") return invalid_argument("--cpu-activations must be bf16x2 or bf16, not " + a);
    o.cpu_bf16_activations = a == "bf16";
  }
  o.progress = load_progress_printer();
  return o;
}

std::vector<Flag> with_model_runtime_flags(std::vector<Flag> own, bool reference) {
  for (Flag f : {device_flag(), threads_flag(), kv_budget_flag(), gpu_mem_flag(), moe_policy_flag(),
                 expert_slots_flag(), recalibrate_flag()})
    own.push_back(std::move(f));
  if (reference) own.push_back(reference_flag());
  own.push_back(deterministic_flag());
  own.push_back(cpu_activations_flag());
  return own;
}

Flag model_flag() {
  return {"model", "DIR",
          "a Hugging Face checkpoint directory (config.json + safetensors), ORG/NAME in the local hub cache, a GGUF "
          "file, or ollama:NAME[:TAG]",
          "", true};
}
Flag device_flag() {
  return {"device", "DEV", "where the model runs: auto (cuda when a usable GPU exists, else cpu), cpu or cuda", "auto"};
}
Flag tokens_flag() { return {"tokens", "IDS", "comma-separated input token ids, e.g. 1,2,3", "", true}; }
Flag threads_flag() { return {"threads", "N", "CPU threads for the model's ops (0: every core)", "0", false}; }
Flag kv_budget_flag() {
  return {"kv-budget", "GB", "memory for KV pages, GiB (reserved, committed as used; default: a quarter of RAM)", "",
          false};
}
Flag gpu_mem_flag() {
  return {"gpu-mem", "GiB",
          "GPU memory the model may use: weights, KV pages and workspace (default: all that is free; less emulates a "
          "smaller GPU)",
          "", false};
}
Flag moe_policy_flag() {
  return {"moe-policy", "P",
          "with experts in host RAM (a --gpu-mem below the model): how decode serves expert cache misses: adaptive "
          "(fetch some over PCIe, compute the rest on the CPU, split by a cost model), fetch, cpu, ratio:Q (a fixed "
          "share Q fetched), direct[:Q] (the GPU reads misses in place from host RAM, a share Q of them on the CPU) "
          "or direct:auto (that share tuned while decoding)",
          "adaptive", false};
}
Flag expert_slots_flag() {
  return {"expert-slots", "N",
          "keep routed experts in host RAM with exactly N GPU expert slots, even where all would fit (experiments)", "",
          false};
}
Flag recalibrate_flag() {
  return {"recalibrate", "",
          "with experts in host RAM: measure PCIe and CPU expert bandwidth again instead of reading "
          "<data dir>/offload-bandwidth.json (what `freetoken bench bw` writes)",
          "", false};
}
Flag deterministic_flag() {
  return {"deterministic", "",
          "same bits for a sequence batched or alone, restored or recomputed, on every CPU (with AMX: decode on AMX "
          "tiles too, slower)",
          "", false};
}
Flag cpu_activations_flag() {
  return {"cpu-activations", "HOW",
          "with AMX, the activations of the CPU's prefill products and attention: bf16x2 (two bf16 halves, ~16 "
          "bits, as the GPU takes them) or bf16 (one rounding, as llama.cpp's CPU path: ~1.4x the prefill, logits "
          "about twice as far from an fp32 reference)",
          "bf16x2", false};
}
Flag reference_flag() {
  return {"reference", "", "run the fp32 reference ops instead of the fast kernels (slow; for comparisons)", "", false};
}

}  // namespace ft::cli

#include "engine_flags.h"

#include "model_flags.h"

namespace ft::cli {

std::vector<Flag> engine_runtime_flags() {
  return with_model_runtime_flags(
      {
          {"store", "DIR", "checkpoint store directory (default: <data dir>/store)", "", false},
          {"no-store", "", "keep checkpoints in RAM only (nothing persists across restarts)", "", false},
          {"store-gb", "GB", "checkpoint bytes kept on disk before evicting", "64", false},
          {"checkpoint-ram-gb", "GB", "checkpoint bytes kept in host RAM", "4", false},
          {"gpu-checkpoint-gb", "GB", "KV pages on the GPU that checkpoints may keep, GiB (0: none)", "0", false},
          {"gpu-mem-headroom", "GiB",
           "with experts in host RAM: when another process leaves less than this free on the GPU, the expert cache "
           "gives memory back, and takes it again once free (0: a fixed --gpu-mem)",
           "0.5", false},
          {"ctx", "TOKENS",
           "context length per sequence, prompt + output; without --kv-budget the KV pool is sized to hold one (on "
           "the GPU while the expert cache keeps a quarter of the room)",
           "32768", false},
          {"max-running", "N", "sequences batched together", "8", false},
          {"max-waiting", "N", "requests queued beyond those before 'overloaded' (429/529)", "16", false},
          {"step-tokens", "N",
           "rows per forward pass when nothing is decoding (decode tokens + prefill chunk); 0: 2048, or for a MoE on "
           "the GPU as many as its workspace holds (with experts in host RAM each pass streams those the cache lacks)",
           "0", false},
          {"max-decode-stall-ms", "MS",
           "while streams decode, cut prefill chunks so a step takes about this long (measured per row)", "500", false},
      },
      /*reference=*/false);
}

std::vector<std::string> forward_engine_flags(const Args& args) {
  std::vector<std::string> out;
  for (const Flag& f : engine_runtime_flags()) {
    if (!args.has(f.name)) continue;
    out.push_back("--" + f.name);
    if (!f.value_name.empty()) out.push_back(args.get(f.name));
  }
  return out;
}

}  // namespace ft::cli

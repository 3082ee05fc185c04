// Full-size random-weight checkpoints for benchmarks: the exact shapes, config.json and HF tensor
// names of a released model, written as sharded bf16 safetensors (model-0000i-of-0000N.safetensors
// of at most 4 GB each, whole tensors, plus model.safetensors.index.json), at more than 1 GB/s per
// writer thread into /dev/shm, so a whole 61 GB Qwen3-30B-A3B takes seconds on a 16-core machine.
//
// The layout comes from random_checkpoint.h (one RandomCheckpointSpec per released model, the same
// tensor list and config writer as the small test checkpoints). The values follow the same init
// rules but come from a faster generator (synthetic_values.h in src/): deterministic per seed,
// tensor name and 8 MiB block, so the bytes do not depend on the thread count.
//
// Files are created at their final size and filled by worker threads in parallel, never holding a
// shard in memory. The index is written last: a directory with shards but no index is not a
// checkpoint, and on any failure every file written is removed again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/dtype.h"
#include "ft/engine/random_checkpoint.h"

namespace ft::engine {

enum class SyntheticLike {
  kQwen3_30B_A3B,     // qwen3_moe, 48 layers, 128 experts top-8, per-expert tensors (~61 GB)
  kQwen3_6_35B_A3B,   // qwen3_5_moe, 40 layers (30 DeltaNet + 10 full), 256 experts top-8, fused (~69 GB)
  kDeepseekV3,        // deepseek_v3, 61 layers (3 dense), latent attention, 256 experts top-8 (~1.3 TB in
                      // bf16: use --layers; 4 layers ~30 GB)
  kGlm4_5Air,         // glm4_moe, 46 layers (1 dense), 128 experts top-8 + 1 shared (~220 GB in bf16)
  kErnie4_5_21B_A3B,  // ernie4_5_moe, 28 layers (1 dense), 64 experts top-6 + 2 shared (~44 GB in bf16)
  kMinimaxM2,         // minimax_m2, 62 layers, 256 experts top-8 (~460 GB in bf16: use --layers)
  kGptOss20B,         // gpt_oss, 24 layers (sliding / full alternating), 32 experts top-4 (~42 GB in bf16)
  kLlama4Scout,       // llama4_text, 48 layers (chunked RoPE / NoPE), 16 experts top-1 + shared (~216 GB in
                      // bf16: use --layers; 4 layers ~20 GB)
};

// "qwen3-30b-a3b", "qwen3.6-35b-a3b", "deepseek-v3", "glm-4.5-air", "ernie-4.5-21b-a3b", "minimax-m2",
// "gpt-oss-20b", "llama4-scout".
const char* synthetic_like_name(SyntheticLike like);
// The inverse of synthetic_like_name; kInvalidArgument listing the known names.
Result<SyntheticLike> parse_synthetic_like(std::string_view name);
// Every SyntheticLike, for help texts.
std::vector<SyntheticLike> all_synthetic_likes();

struct SyntheticModelOptions {
  SyntheticLike like = SyntheticLike::kQwen3_30B_A3B;
  int64_t layers = 0;  // the first N layers (config says num_hidden_layers N); 0: all of them
  int threads = 0;     // 0: every hardware thread
  uint64_t seed = 0;
  // How the safetensors store the weights:
  //   kFp8: the projections (every *_proj.weight matrix whose columns are whole 128-value blocks) in
  //     FP8 E4M3 with a weight_scale_inv per 128x128 tile, as the FP8 releases (Qwen3-30B-A3B-FP8,
  //     DeepSeek-V3) store them;
  //   kMxfp4 (gpt-oss only): the routed experts in MXFP4, X_blocks (E2M1 pairs) and X_scales
  //     (E8M0, one a 32 values) in the [experts, out, in / 32, 16] layout of gpt-oss's release;
  // with quantization_config in config.json; the rest stays bf16.
  enum class Quant { kBf16, kFp8, kMxfp4 };
  Quant quant = Quant::kBf16;
  // Called on the calling thread about every 200 ms while the weights are written, and once at the
  // end with bytes_done == bytes_total (tensor bytes, the index's total_size).
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
};

// The released model's spec, cut to `layers` layers (0: all). kInvalidArgument when layers is
// negative or more than the model has.
Result<RandomCheckpointSpec> synthetic_model_spec(SyntheticLike like, int64_t layers);

// What write_synthetic_model writes, without writing it.
struct SyntheticPlan {
  RandomCheckpointSpec spec;
  std::vector<PlannedTensor> tensors;    // the model's order
  // per tensor: BF16; F8_E4M3 codes and their F32 scales (kFp8); U8 MXFP4 blocks and scales (kMxfp4)
  std::vector<DType> dtypes;
  std::vector<float> constants;          // per scale tensor: its value (every tile or group alike)
  std::vector<std::size_t> shard_of;     // per tensor: its index in shard_files
  std::vector<std::string> shard_files;  // "model-00001-of-00016.safetensors", ...
  uint64_t total_bytes = 0;              // all tensors' data, the index's "total_size"
};

// Whole tensors in model order, a new shard when the next tensor would take a shard's tensor data
// past this (the "4GB" max_shard_size of the released checkpoints).
inline constexpr uint64_t kSyntheticShardBytes = 4'000'000'000;

Result<SyntheticPlan> plan_synthetic_model(const SyntheticModelOptions& options);

// Writes the checkpoint into `dir` (created if missing; it must be empty): the shards, config.json,
// generation_config.json, a README.md saying the weights are random, then the index. Errors, one
// line each: kInvalidArgument (bad options, `dir` not empty), kIo (cannot create or write, not
// enough free space, naming the path).
Status write_synthetic_model(const std::filesystem::path& dir, const SyntheticModelOptions& options);

// The same models as one GGUF file, each tensor in the type llama-quantize gives it for one of its
// mixes (Q4_K_M: Q4_K, with Q6_K for the output, and for attn_v and ffn_down in the layers its
// use_more_bits picks; Q5_K_M the same with Q5_K; norms and routers F32), under llama.cpp's names
// and metadata. The blocks
// are random bytes with their scale fields set so that the values have the tensor's init spread;
// they are meant for speed, like the bf16 ones. Only architectures the GGUF reader knows (Qwen3-
// MoE, Qwen2-MoE).
enum class SyntheticQuant { kQ4_K_M, kQ5_K_M, kQ4_0, kQ8_0 };
const char* synthetic_quant_name(SyntheticQuant quant);  // "Q4_K_M", "Q5_K_M", "Q4_0", "Q8_0"
Result<SyntheticQuant> parse_synthetic_quant(std::string_view name);

// Writes `file` (which must not exist): options.like and options.layers give the model.
// Errors as write_synthetic_model's; on failure the file is removed.
Status write_synthetic_gguf(const std::filesystem::path& file, const SyntheticModelOptions& options,
                            SyntheticQuant quant);
// The same for any spec (tests use small ones); every quantised tensor's columns must be whole blocks.
Status write_synthetic_gguf(const std::filesystem::path& file, const RandomCheckpointSpec& spec,
                            const SyntheticModelOptions& options, SyntheticQuant quant);

}  // namespace ft::engine

// `freetoken make-synthetic-model --like MODEL DIR`: a random-weight checkpoint with a released
// model's exact shapes, config.json and tensor names, as sharded bf16 safetensors, for benchmarks
// at real size (engine/synthetic_model.h); with --quant FP8 its projections in FP8 as the FP8
// releases store them, with --quant MXFP4 (gpt-oss) its experts as gpt-oss's release stores them;
// with another --quant, one GGUF file in a llama-quantize mix.
#include <tbb/info.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>

#include "commands.h"
#include "ft/engine/synthetic_model.h"

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Progress on stdout: one line rewritten in place on a terminal, else a line every ~2 s so that
// logs stay short.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(::isatty(STDOUT_FILENO) == 1), start_(Clock::now()), last_(start_) {}

  void update(uint64_t done, uint64_t total) {
    const auto now = Clock::now();
    if (done < total && now - last_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::seconds(2))) return;
    last_ = now;
    const double s = seconds(), rate = s > 0 ? double(done) / s : 0;
    const double eta = rate > 0 ? double(total - done) / rate : 0;
    std::printf("%s%6.1f / %.1f GB  %3.0f%%  %5.2f GB/s  ETA %3.0f s%s", tty_ ? "\r" : "", double(done) / 1e9,
                double(total) / 1e9, total ? 100.0 * double(done) / double(total) : 100.0, rate / 1e9, eta,
                tty_ ? "" : "\n");
    std::fflush(stdout);
    open_line_ = tty_;
  }
  // Ends an in-place line before anything else is printed.
  void finish_line() {
    if (open_line_) std::printf("\n");
    open_line_ = false;
    std::fflush(stdout);
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  bool tty_;
  Clock::time_point start_, last_;
  bool open_line_ = false;
};

// --quant: one GGUF file in llama-quantize's types instead of bf16 safetensors.
int write_gguf(const char* cmd, const std::string& file, engine::SyntheticModelOptions options,
               const std::string& quant) {
  auto q = engine::parse_synthetic_quant(quant);
  if (!q) return usage_error(cmd, "--quant: " + q.status().message());
  auto spec = engine::synthetic_model_spec(options.like, options.layers);
  if (!spec) return usage_error(cmd, spec.status().message());
  std::printf("writing a SYNTHETIC %s GGUF (%s) with RANDOM weights (%lld layers)\n",
              engine::synthetic_like_name(options.like), engine::synthetic_quant_name(*q),
              static_cast<long long>(spec->num_layers));
  std::fflush(stdout);
  ProgressPrinter progress;
  uint64_t bytes = 0;
  options.progress = [&](uint64_t done, uint64_t total) {
    progress.update(done, total);
    bytes = total;
  };
  const Status s = engine::write_synthetic_gguf(file, *spec, options, *q);
  progress.finish_line();
  if (!s) return usage_error(cmd, s.message());
  const double secs = progress.seconds();
  std::printf("wrote %s: %.1f GB of tensors in %.1f s (%.2f GB/s)\n", file.c_str(), double(bytes) / 1e9, secs,
              secs > 0 ? double(bytes) / 1e9 / secs : 0.0);
  return 0;
}

int run_make_synthetic_model(const Args& args) {
  const char* cmd = "make-synthetic-model";
  if (args.positional().size() != 1) return usage_error(cmd, "expected one argument: the output DIR");
  const std::string dir = args.positional()[0];
  auto like = engine::parse_synthetic_like(args.get("like"));
  if (!like) return usage_error(cmd, "--like: " + like.status().message());
  engine::SyntheticModelOptions options;
  options.like = *like;
  options.layers = args.get_int("layers");
  options.threads = args.get_int("threads");
  const std::string seed = args.get("seed");
  if (auto [end, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), options.seed);
      ec != std::errc() || end != seed.data() + seed.size()) {
    return usage_error(cmd, "--seed expects an integer from 0 to 2^64-1, got '" + seed + "'");
  }
  if (options.threads < 0) return usage_error(cmd, "--threads must be 0 (all) or more");
  // FP8 and MXFP4 are safetensors checkpoints (the releases' formats); the other types are GGUF mixes.
  using Quant = engine::SyntheticModelOptions::Quant;
  const std::string quant = args.get("quant");
  options.quant = quant == "FP8" || quant == "fp8"       ? Quant::kFp8
                  : quant == "MXFP4" || quant == "mxfp4" ? Quant::kMxfp4
                                                         : Quant::kBf16;
  if (!quant.empty() && options.quant == Quant::kBf16) return write_gguf(cmd, dir, options, quant);
  auto plan = engine::plan_synthetic_model(options);
  if (!plan) return usage_error(cmd, plan.status().message());
  const int threads = options.threads > 0 ? options.threads : tbb::info::default_concurrency();
  auto full = engine::synthetic_model_spec(options.like, 0);
  std::printf(
      "writing a SYNTHETIC %s%s checkpoint with RANDOM weights (%lld of %lld layers, %zu tensors, %.1f GB, "
      "%zu shard(s), %d threads)\n",
      engine::synthetic_like_name(options.like),
      options.quant == Quant::kFp8     ? " FP8"
      : options.quant == Quant::kMxfp4 ? " MXFP4"
                                       : "",
      static_cast<long long>(plan->spec.num_layers), static_cast<long long>(full->num_layers), plan->tensors.size(),
      double(plan->total_bytes) / 1e9, plan->shard_files.size(), threads);
  std::fflush(stdout);

  ProgressPrinter progress;
  options.progress = [&](uint64_t done, uint64_t total) { progress.update(done, total); };
  const Status s = engine::write_synthetic_model(dir, options);
  progress.finish_line();
  if (!s) return usage_error(cmd, s.message());
  const double secs = progress.seconds();
  // The shards, config.json, generation_config.json, README.md and the index.
  const std::size_t files = plan->shard_files.size() + 4;
  std::printf("wrote %s: %zu files, %.1f GB in %.1f s (%.2f GB/s)\n", dir.c_str(), files,
              double(plan->total_bytes) / 1e9, secs, secs > 0 ? double(plan->total_bytes) / 1e9 / secs : 0.0);
  return 0;
}

}  // namespace

const Command kMakeSyntheticModelCommand = {
    "make-synthetic-model",
    "write a random-weight checkpoint with a released model's exact shapes (sharded bf16) for benchmarks",
    "freetoken make-synthetic-model --like qwen3-30b-a3b|qwen3.6-35b-a3b|deepseek-v3|glm-4.5-air|ernie-4.5-21b-a3b|"
    "minimax-m2|gpt-oss-20b|llama4-scout [--layers N] [--threads N] [--seed S] [--quant "
    "FP8|MXFP4|Q4_K_M|Q5_K_M|Q4_0|Q8_0] "
    "DIR|FILE.gguf",
    {{"like", "MODEL",
      "the released model to imitate: qwen3-30b-a3b (48 layers, ~61 GB), qwen3.6-35b-a3b (40 layers, ~69 GB), "
      "deepseek-v3 (61 layers, ~1.3 TB: use --layers), glm-4.5-air (46 layers, ~220 GB), ernie-4.5-21b-a3b (28 "
      "layers, ~44 GB), minimax-m2 (62 layers, ~460 GB: use --layers), gpt-oss-20b (24 layers, ~42 GB) or "
      "llama4-scout (48 layers, ~216 GB: use --layers)",
      "", true},
     {"layers", "N", "write only the first N layers (config.json says N); 0: all", "0", false},
     {"threads", "N", "writer threads; 0: every hardware thread", "0", false},
     {"seed", "S", "random seed of the weights (same seed, same bytes at any thread count)", "0", false},
     {"quant", "TYPE",
      "FP8: the projections in FP8 with 128x128-tile scales, as the FP8 releases (safetensors, DIR); MXFP4 "
      "(gpt-oss-20b): the experts in MXFP4 as gpt-oss's release (safetensors, DIR); Q4_K_M, "
      "Q5_K_M, Q4_0 or Q8_0: one GGUF file (the argument is its path) with llama-quantize's tensor types "
      "(qwen3-30b-a3b, "
      "qwen3.6-35b-a3b)",
      "", false}},
    1,
    run_make_synthetic_model,
};

}  // namespace ft::cli

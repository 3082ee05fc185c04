// write_synthetic_model: plans the shards, prepares the files, lets synthetic_fill.cpp fill them,
// then writes the small files and, last, the index; on failure removes everything it wrote.
#include "ft/engine/synthetic_model.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "weights/safetensors_layout.h"
#include "weights/synthetic_fill.h"
#include "weights/text_file.h"

namespace ft::engine {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";

std::string errno_text() { return std::strerror(errno); }

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&&) = delete;
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closing can report a deferred write error (network filesystems); 0 or the errno.
  int close() {
    const int rc = ::close(std::exchange(fd_, -1));
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Removes what a failed write left behind: every file it created and the directory if it created
// that too. Nothing is removed once committed.
class Rollback {
 public:
  Rollback(fs::path dir, bool created_dir) : dir_(std::move(dir)), created_dir_(created_dir) {}
  Rollback(const Rollback&) = delete;
  Rollback& operator=(const Rollback&) = delete;
  ~Rollback() {
    if (committed_) return;
    std::error_code ec;
    for (const fs::path& f : files_) fs::remove(f, ec);
    if (created_dir_) fs::remove(dir_, ec);
  }
  void add(fs::path file) { files_.push_back(std::move(file)); }
  void commit() { committed_ = true; }

 private:
  fs::path dir_;
  bool created_dir_;
  std::vector<fs::path> files_;
  bool committed_ = false;
};

std::string shard_file_name(std::size_t index, std::size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

std::string gigabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", double(bytes) / 1e9);
  return text;
}

// Creates `dir`, or accepts an existing empty directory; true when it was created here. A
// non-empty directory is refused so that nothing of an older checkpoint mixes with the new one.
Result<bool> prepare_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return invalid_argument(dir.string() + " exists and is not a directory");
    const bool empty = fs::is_empty(dir, ec);
    if (ec) return io_error("cannot read " + dir.string() + ": " + ec.message());
    if (!empty) return invalid_argument(dir.string() + " is not empty (write into a new or empty directory)");
    return false;
  }
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir.string() + ": " + ec.message());
  return true;
}

std::string pretty_name(SyntheticLike like) {
  return like == SyntheticLike::kQwen3_30B_A3B ? "Qwen3-30B-A3B" : "Qwen3.6-35B-A3B";
}

std::string config_note(SyntheticLike like) {
  return std::string("SYNTHETIC MODEL WITH RANDOM WEIGHTS written by `freetoken make-synthetic-model --like ") +
         synthetic_like_name(like) + "`: the shapes, config and tensor names of " + pretty_name(like) +
         " for benchmarks, but it produces meaningless text.";
}

std::string readme(SyntheticLike like, const SyntheticPlan& plan, const SyntheticModelOptions& options) {
  const RandomCheckpointSpec& s = plan.spec;
  std::string text = "# Synthetic " + pretty_name(like) + ": RANDOM WEIGHTS\n\n";
  text += "Written by `freetoken make-synthetic-model --like " + std::string(synthetic_like_name(like)) + "` (layers " +
          std::to_string(s.num_layers) + ", seed " + std::to_string(options.seed) + ").\n";
  text +=
      "This is **not a trained model**: every weight is random (seeded, so the files are reproducible).\n"
      "It has the exact shapes, config.json and Hugging Face tensor names of the released model, as\n";
  text += std::string(options.quant == SyntheticModelOptions::Quant::kFp8
                          ? "safetensors (projections FP8 in 128x128 tiles, the rest bf16)"
                      : options.quant == SyntheticModelOptions::Quant::kMxfp4
                          ? "safetensors (routed experts MXFP4 as gpt-oss's release, the rest bf16)"
                          : "bf16 safetensors") +
          " in " + std::to_string(plan.shard_files.size()) + " shard(s) with model.safetensors.index.json (" +
          gigabytes(plan.total_bytes) + "),\n";
  text +=
      "so the engine can be measured at real size. Its output is meaningless; never use it to judge\n"
      "output quality. No tokenizer is included.\n";
  if (s.family == ModelFamily::kQwen3_5Moe) text += "The vision tower of the wrapper is not included.\n";
  return text;
}

std::string index_json(const SyntheticPlan& plan) {
  nlohmann::json weight_map = nlohmann::json::object();  // sorted by name, like the released indexes
  for (std::size_t i = 0; i < plan.tensors.size(); ++i)
    weight_map[plan.tensors[i].name] = plan.shard_files[plan.shard_of[i]];
  const nlohmann::json index = {{"metadata", {{"total_size", plan.total_bytes}}}, {"weight_map", weight_map}};
  return index.dump(2) + "\n";
}

// gpt-oss's routed experts in bf16 are [experts, in, out]; its MXFP4 release stores them as
// X_blocks [experts, out, in / 32, 16] (two E2M1 codes a byte) and X_scales [experts, out, in / 32].
bool mxfp4_expert(const PlannedTensor& t) {
  return (t.name.ends_with("experts.gate_up_proj") || t.name.ends_with("experts.down_proj")) && t.shape.size() == 3 &&
         t.shape[1] % 32 == 0;
}

// The E8M0 byte giving random E2M1 codes (all 16 alike) a spread of sigma: 2^(byte - 127) ~ sigma / rms.
float mxfp4_scale_byte(double sigma) {
  constexpr double kE2M1Rms = 2.9261749;  // sqrt of the mean square of 0, 0.5, 1, 1.5, 2, 3, 4, 6
  return float(std::clamp(127.0 + std::round(std::log2(sigma / kE2M1Rms)), 1.0, 254.0));
}

}  // namespace

Result<SyntheticPlan> plan_synthetic_model(const SyntheticModelOptions& options) {
  using Quant = SyntheticModelOptions::Quant;
  SyntheticPlan plan;
  FT_ASSIGN_OR_RETURN(plan.spec, synthetic_model_spec(options.like, options.layers));
  plan.spec.seed = options.seed;
  if (options.quant == Quant::kMxfp4 && plan.spec.family != ModelFamily::kGptOss)
    return invalid_argument("MXFP4 safetensors are gpt-oss's release format: use --like gpt-oss-20b");
  for (PlannedTensor& t : random_checkpoint_tensors(plan.spec)) {
    if (options.quant == Quant::kMxfp4 && mxfp4_expert(t)) {
      const int64_t E = t.shape[0], in = t.shape[1], out = t.shape[2];
      const double sigma = t.init.kind == TensorInit::Kind::kNormal ? t.init.scale : 0.02;
      plan.tensors.push_back({t.name + "_blocks", {E, out, in / 32, 16}, t.init});
      plan.dtypes.push_back(DType::kU8);
      plan.constants.push_back(0);
      plan.tensors.push_back({t.name + "_scales", {E, out, in / 32}, t.init});
      plan.dtypes.push_back(DType::kU8);
      plan.constants.push_back(mxfp4_scale_byte(sigma));
      continue;
    }
    const bool fp8 = options.quant == Quant::kFp8 && t.name.ends_with("_proj.weight") && t.shape.size() == 2 &&
                     t.shape[1] % 128 == 0;
    if (!fp8) {
      plan.tensors.push_back(std::move(t));
      plan.dtypes.push_back(DType::kBF16);
      plan.constants.push_back(0);
      continue;
    }
    // Codes of spread fp8_codes_rms(), one scale for every tile giving them the init's spread.
    const double sigma = t.init.kind == TensorInit::Kind::kNormal ? t.init.scale : 0.02;
    PlannedTensor scale{t.name + "_scale_inv", {(t.shape[0] + 127) / 128, t.shape[1] / 128}, t.init};
    plan.tensors.push_back(std::move(t));
    plan.dtypes.push_back(DType::kF8E4M3);
    plan.constants.push_back(0);
    plan.tensors.push_back(std::move(scale));
    plan.dtypes.push_back(DType::kF32);
    plan.constants.push_back(float(sigma / synthetic::fp8_codes_rms()));
  }
  std::size_t shards = 0;
  uint64_t in_shard = 0;
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const uint64_t bytes = dtype_size(plan.dtypes[i]) * uint64_t(plan.tensors[i].numel());
    if (shards == 0 || (in_shard > 0 && in_shard + bytes > kSyntheticShardBytes)) {
      ++shards;
      in_shard = 0;
    }
    in_shard += bytes;
    plan.shard_of.push_back(shards - 1);
    plan.total_bytes += bytes;
  }
  for (std::size_t i = 0; i < shards; ++i) plan.shard_files.push_back(shard_file_name(i, shards));
  return plan;
}

Status write_synthetic_model(const fs::path& dir, const SyntheticModelOptions& options) {
  FT_ASSIGN_OR_RETURN(const SyntheticPlan plan, plan_synthetic_model(options));
  const std::size_t n_shards = plan.shard_files.size();

  // Each shard's header and tensor offsets, before any file exists.
  std::vector<std::vector<std::size_t>> members(n_shards);
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) members[plan.shard_of[i]].push_back(i);
  std::vector<SafetensorsLayout> layouts;
  uint64_t need = 0;
  for (const std::vector<std::size_t>& m : members) {
    std::vector<TensorHeader> headers;
    for (std::size_t i : m) headers.push_back({plan.tensors[i].name, plan.dtypes[i], plan.tensors[i].shape});
    FT_ASSIGN_OR_RETURN(SafetensorsLayout layout, layout_safetensors(headers, {{"format", "pt"}}));
    need += layout.file_size;
    layouts.push_back(std::move(layout));
  }

  FT_ASSIGN_OR_RETURN(const bool created_dir, prepare_dir(dir));
  Rollback rollback(dir, created_dir);
  FT_RETURN_IF_ERROR(synthetic::check_free_space(dir, need + (1 << 20)));

  std::vector<std::string> paths(n_shards);
  std::vector<UniqueFd> fds;
  std::vector<synthetic::TensorTarget> targets(plan.tensors.size());
  for (std::size_t s = 0; s < n_shards; ++s) {
    paths[s] = (dir / plan.shard_files[s]).string();
    UniqueFd fd(::open(paths[s].c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) return io_error("cannot create " + paths[s] + ": " + errno_text());
    rollback.add(paths[s]);
    const std::string& prefix = layouts[s].prefix;
    if (const ssize_t w = ::pwrite(fd.get(), prefix.data(), prefix.size(), 0); w != ssize_t(prefix.size())) {
      return io_error("cannot write " + paths[s] + ": " + (w < 0 ? errno_text() : "short write"));
    }
    // Created at its final size: the workers fill disjoint ranges of it.
    if (::ftruncate(fd.get(), off_t(layouts[s].file_size)) != 0) {
      return io_error("cannot size " + paths[s] + ": " + errno_text());
    }
    for (std::size_t k = 0; k < members[s].size(); ++k) {
      const std::size_t i = members[s][k];
      const DType dt = plan.dtypes[i];
      const synthetic::Encoding e = dt == DType::kBF16                          ? synthetic::Encoding::kBf16
                                    : dt == DType::kF8E4M3                      ? synthetic::Encoding::kFp8Codes
                                    : dt != DType::kU8                          ? synthetic::Encoding::kF32Constant
                                    : plan.tensors[i].name.ends_with("_scales") ? synthetic::Encoding::kU8Constant
                                                                                : synthetic::Encoding::kRandomBytes;
      targets[i] = {fd.get(), layouts[s].begin[k], &paths[s], e, plan.constants[i]};
    }
    fds.push_back(std::move(fd));
  }

  FT_RETURN_IF_ERROR(synthetic::fill_tensors(plan.tensors, targets, options.seed, options.threads, options.progress));
  for (std::size_t s = 0; s < n_shards; ++s) {
    if (const int err = fds[s].close(); err != 0) {
      return io_error("cannot write " + paths[s] + ": " + std::strerror(err));
    }
  }

  const std::vector<std::pair<std::string, std::string>> notes = {{"freetoken_synthetic", config_note(options.like)}};
  std::string config = random_checkpoint_config_json(plan.spec, notes);
  nlohmann::json quantization;  // as the releases say it
  if (options.quant == SyntheticModelOptions::Quant::kFp8) {
    quantization = {
        {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  } else if (options.quant == SyntheticModelOptions::Quant::kMxfp4) {
    quantization = {{"quant_method", "mxfp4"},
                    {"modules_to_not_convert",
                     {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}};
  }
  if (!quantization.is_null()) {
    nlohmann::json j = nlohmann::json::parse(config);
    j["quantization_config"] = std::move(quantization);
    config = j.dump(2) + "\n";
  }
  const std::vector<std::pair<std::string, std::string>> small_files = {
      {"config.json", config},
      {"generation_config.json", random_checkpoint_generation_config_json(plan.spec)},
      {"README.md", readme(options.like, plan, options)},
  };
  for (const auto& [name, text] : small_files) {
    rollback.add(dir / name);
    FT_RETURN_IF_ERROR(write_text_file(dir / name, text));
  }
  // The index last, and renamed into place whole: its presence marks a complete checkpoint.
  const fs::path index_tmp = dir / (std::string(kIndexName) + ".tmp");
  rollback.add(index_tmp);
  FT_RETURN_IF_ERROR(write_text_file(index_tmp, index_json(plan)));
  std::error_code ec;
  fs::rename(index_tmp, dir / kIndexName, ec);
  if (ec) return io_error("cannot write " + (dir / kIndexName).string() + ": " + ec.message());
  rollback.commit();
  return Status::ok();
}

}  // namespace ft::engine

#include "ft/engine/random_checkpoint.h"

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "ft/engine/checkpoint.h"
#include "weights/text_file.h"

namespace ft::engine {
namespace {

// splitmix64 + Box-Muller: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed ^ 0x9e3779b97f4a7c15ull) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    spare_ = r * std::sin(a);
    have_spare_ = true;
    return r * std::cos(a);
  }

 private:
  uint64_t s_;
  double spare_ = 0;
  bool have_spare_ = false;
};

// Rows of k distinct ids of [0, hi) (a partial Fisher-Yates shuffle per row), as I64.
OwnedTensor expert_table(const PlannedTensor& p, Rng& rng) {
  const int64_t rows = p.shape[0], k = p.shape[1], n = int64_t(p.init.hi);
  OwnedTensor t{p.name, DType::kI64, p.shape, std::vector<std::byte>(std::size_t(rows * k) * 8)};
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) ids[std::size_t(i)] = i;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t pick = j + int64_t(rng.next() % uint64_t(n - j));
      std::swap(ids[std::size_t(j)], ids[std::size_t(pick)]);
      std::memcpy(t.data.data() + std::size_t(r * k + j) * 8, &ids[std::size_t(j)], 8);
    }
  }
  return t;
}

// Draws every tensor of the plan in order from one generator, so a spec and seed always give the
// same bytes.
std::vector<OwnedTensor> draw_tensors(const std::vector<PlannedTensor>& plan, uint64_t seed) {
  Rng rng(seed);
  std::vector<OwnedTensor> out;
  out.reserve(plan.size());
  for (const PlannedTensor& p : plan) {
    OwnedTensor t;
    t.name = p.name;
    t.dtype = DType::kBF16;
    t.shape = p.shape;
    const int64_t n = p.numel();
    if (p.init.kind == TensorInit::Kind::kExpertTable) {
      out.push_back(expert_table(p, rng));
      continue;
    }
    t.data.resize(std::size_t(n) * 2);
    const TensorInit& init = p.init;
    for (int64_t i = 0; i < n; ++i) {
      double v = 0;
      switch (init.kind) {
        case TensorInit::Kind::kNormal: v = init.offset + init.scale * rng.normal(); break;
        case TensorInit::Kind::kUniform: v = init.lo + (init.hi - init.lo) * rng.uniform(); break;
        case TensorInit::Kind::kLogUniform: v = std::log(init.lo + (init.hi - init.lo) * rng.uniform()); break;
        case TensorInit::Kind::kExpertTable:
          break;  // drawn above
      }
      const uint16_t b = f32_to_bf16(float(v));
      std::memcpy(t.data.data() + 2 * i, &b, 2);
    }
    out.push_back(std::move(t));
  }
  return out;
}

const char* kDemoReadme =
    "# FreeToken demo model: RANDOM WEIGHTS\n\n"
    "Written by `freetoken make-demo-model`. This is **not a trained model**: every weight is random\n"
    "(seeded, so the files are reproducible). It has the real Hugging Face layout of a Qwen3.5-MoE\n"
    "checkpoint (`qwen3_5_moe` wrapper config with `text_config`, tensors under\n"
    "`model.language_model.*`, `lm_head.weight` at the top level, bf16) at a tiny size: hidden 128,\n"
    "8 layers (6 Gated DeltaNet + 2 gated full attention), 16 experts top-4 plus a shared expert, and\n"
    "the Qwen3 tokenizer's vocabulary size (151936). Use it to exercise the engine end to end\n"
    "(loading, prefill, decode, state snapshots, the CLI and the server), never to judge output quality.\n"
    "The vision tower of the wrapper is not included.\n";

}  // namespace

Status write_random_checkpoint(const std::filesystem::path& dir, const RandomCheckpointSpec& spec) {
  FT_RETURN_IF_ERROR(check_random_checkpoint_spec(spec));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir.string() + ": " + ec.message());

  const std::vector<OwnedTensor> tensors = draw_tensors(random_checkpoint_tensors(spec), spec.seed);
  FT_RETURN_IF_ERROR(write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}}));
  FT_RETURN_IF_ERROR(write_text_file(dir / "config.json", random_checkpoint_config_json(spec)));
  FT_RETURN_IF_ERROR(write_text_file(dir / "generation_config.json", random_checkpoint_generation_config_json(spec)));
  if (spec.demo) FT_RETURN_IF_ERROR(write_text_file(dir / "README.md", kDemoReadme));
  return Status::ok();
}

RandomCheckpointSpec demo_model_spec() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kQwen3_5Moe;
  // hidden 128 rather than 256: the two vocab x hidden matrices dominate the size, and at 256 they
  // alone would be 156 MB in bf16.
  s.vocab_size = 151936;
  s.hidden_size = 128;
  s.num_layers = 8;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.num_experts = 16;
  s.top_k = 4;
  s.moe_intermediate_size = 64;
  s.shared_expert_intermediate_size = 128;
  s.full_attention_interval = 4;
  s.linear_num_key_heads = 2;
  s.linear_num_value_heads = 4;
  s.linear_key_head_dim = 32;
  s.linear_value_head_dim = 32;
  s.linear_conv_kernel_dim = 4;
  s.fused_experts = true;
  s.eos_token_ids = {151645, 151643};  // <|im_end|>, <|endoftext|>
  s.bos_token_id = 151643;
  s.seed = 20240601;
  s.demo = true;
  return s;
}

}  // namespace ft::engine

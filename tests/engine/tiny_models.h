// Helpers for the model tests: tiny random checkpoints of each family, the golden fixtures'
// paths, a minimal safetensors reader (the engine's is private) and error metrics.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "ft/engine/backend.h"
#include "ft/engine/bf16.h"
#include "ft/engine/device.h"
#include "ft/engine/model.h"
#include "ft/engine/model_config.h"
#include "ft/engine/random_checkpoint.h"
#include "ft/engine/sampling.h"
#include "golden_weights.h"
#include "test_support.h"

namespace ft::test {

// Small but structurally complete: GQA, partial RoPE, several experts, 2 linear + 1 full layer
// in the hybrids (interval 3), a dense layer in the families that allow one, attention biases where
// the family has them.
inline engine::RandomCheckpointSpec tiny_spec(engine::ModelFamily family, bool fused_experts, uint64_t seed = 7) {
  engine::RandomCheckpointSpec s;
  s.family = family;
  s.vocab_size = 256;
  s.hidden_size = 64;
  s.num_layers = 3;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 32;
  s.intermediate_size = 80;
  s.num_experts = 8;
  s.top_k = 3;
  s.moe_intermediate_size = 24;
  s.shared_expert_intermediate_size = 40;
  s.full_attention_interval = 3;
  s.linear_num_key_heads = 2;
  s.linear_num_value_heads = 4;
  s.linear_key_head_dim = 16;
  s.linear_value_head_dim = 16;
  s.fused_experts = fused_experts;
  s.seed = seed;
  if (family == engine::ModelFamily::kQwen3Moe) {
    s.mlp_only_layers = {1};
    s.attention_bias = true;
    s.norm_topk_prob = false;
  } else if (family == engine::ModelFamily::kQwen3Next) {
    s.mlp_only_layers = {0};
  } else if (family == engine::ModelFamily::kQwen2Moe) {
    s.mlp_only_layers = {1};
    s.norm_topk_prob = false;  // as Qwen1.5-MoE
  } else if (family == engine::ModelFamily::kOlmoe) {
    // OLMoE's whole-width q_norm needs heads * head_dim == hidden; 32 dims a head, as the GPU's
    // attention kernels take (multiples of 32).
    s.num_heads = 2;
    s.head_dim = s.hidden_size / s.num_heads;
    s.attention_bias = true;
    s.norm_topk_prob = false;  // as OLMoE-1B-7B
  } else if (family == engine::ModelFamily::kDeepseekV3) {
    // Latent attention with the q LoRA (per-expert variant) and with a plain q_proj (fused); keys
    // 32 wide and values 16 (so the KV pages pad the values); YaRN past its original context
    // within the tests' 80 tokens, with an attention factor other than 1 (mscale != mscale_all_dim).
    s.q_lora_rank = fused_experts ? 0 : 24;
    s.kv_lora_rank = 32;
    s.qk_nope_head_dim = 16;
    s.qk_rope_head_dim = 16;
    s.v_head_dim = 16;
    s.attention_bias = !fused_experts;
    s.yarn_factor = 4.0;
    s.yarn_original_max_position_embeddings = 32;
    s.yarn_mscale = 1.0;
    s.yarn_mscale_all_dim = 0.707;
    s.n_group = 2;
    s.topk_group = 1;
    s.routed_scaling_factor = 2.5;
    s.first_k_dense_replace = 1;
  } else if (family == engine::ModelFamily::kGlm4Moe) {
    s.attention_bias = true;
    s.use_qk_norm = !fused_experts;
    s.partial_rotary_factor = 0.5;
    s.n_group = 4;
    s.topk_group = 2;
    s.routed_scaling_factor = 1.5;
    s.first_k_dense_replace = 1;
  } else if (family == engine::ModelFamily::kDots1) {
    s.attention_bias = !fused_experts;
    s.n_group = 2;
    s.topk_group = 2;
    s.n_shared_experts = 2;
    s.norm_topk_prob = false;  // Dots1Config's default
    s.first_k_dense_replace = 1;
  } else if (family == engine::ModelFamily::kErnie4_5Moe) {
    // MoE on layer 1 only (moe_layer_start_index 1, moe_layer_end_index 1): a dense layer on each
    // side; tied embeddings as ERNIE-4.5-21B-A3B in the per-expert variant.
    s.first_k_dense_replace = 1;
    s.moe_layer_end_index = 1;
    s.n_shared_experts = 2;
    s.tie_word_embeddings = !fused_experts;
  } else if (family == engine::ModelFamily::kMinimaxM2) {
    s.partial_rotary_factor = 0.5;  // MiniMax-M2: rotary_dim 64 of head_dim 128
  } else if (family == engine::ModelFamily::kGptOss) {
    // gpt-oss has one expert layout: the two variants differ in their window instead. A window
    // the tests' 80 tokens cross (mid-page), YaRN past its original context.
    s.sliding_window = fused_experts ? 20 : 8;
    s.yarn_factor = 4.0;
    s.yarn_original_max_position_embeddings = 32;
  } else if (family == engine::ModelFamily::kExaoneMoe) {
    // Sliding layers with RoPE (windows the tests' 80 tokens cross) around a global NoPE one; a
    // dense first layer; the router's scaling and groups.
    s.sliding_window = fused_experts ? 20 : 8;
    s.first_k_dense_replace = 1;
    s.n_shared_experts = fused_experts ? 2 : 1;
    s.n_group = 2;
    s.topk_group = 2;
    s.routed_scaling_factor = 2.5;
  } else if (family == engine::ModelFamily::kAfmoe) {
    // Sliding layers with RoPE around global NoPE ones, sandwich norms, the attention's own gate
    // projection; a dense first layer, a scaled router with shared experts.
    s.sliding_window = fused_experts ? 20 : 8;
    s.first_k_dense_replace = 1;
    s.n_shared_experts = fused_experts ? 2 : 1;
    s.routed_scaling_factor = fused_experts ? 1.0 : 2.0;
  } else if (family == engine::ModelFamily::kLlama4Text) {
    // Chunked RoPE layers around a NoPE one whose queries the temperature scales from position 7
    // on (floor_scale 8), chunks the tests' 80 tokens cross; a dense first layer; top-1 experts.
    s.sliding_window = fused_experts ? 20 : 8;
    s.floor_scale = 8;
    s.attn_scale = 0.25;
    s.mlp_only_layers = {0};
    s.top_k = 1;
    s.full_attention_interval = 2;  // RoPE, NoPE, RoPE
  } else if (family == engine::ModelFamily::kGemma4Text) {
    // Sliding layers (windows the tests' 80 tokens cross) and full ones with wider heads: one KV head
    // whose keys are the values (per expert), or as many as the sliding layers with their own
    // values (fused); a dense GeGLU beside the MoE; softcapped logits.
    s.sliding_window = fused_experts ? 20 : 8;
    s.full_attention_interval = 2;  // sliding, full, full (the last always)
    s.global_head_dim = 64;
    s.global_kv_heads = fused_experts ? 2 : 1;
    s.attention_k_eq_v = !fused_experts;
    s.final_logit_softcapping = fused_experts ? 0 : 3.0;
    s.tie_word_embeddings = true;
  } else if (family == engine::ModelFamily::kGlm4MoeLite) {
    // Latent attention with keys (8 + 16) narrower than values (32), so the KV pages pad the keys;
    // the q LoRA and interleaved rope pairs (GLM-4.7-Flash) per expert, a plain q_proj, NeoX pairs
    // and biases fused. One group, as the release.
    s.q_lora_rank = fused_experts ? 0 : 24;
    s.kv_lora_rank = 32;
    s.qk_nope_head_dim = 8;
    s.qk_rope_head_dim = 16;
    s.v_head_dim = 32;
    s.rope_interleave = !fused_experts;
    s.attention_bias = fused_experts;
    s.routed_scaling_factor = 1.8;
    s.first_k_dense_replace = 1;
  } else if (family == engine::ModelFamily::kHunyuanV1Moe) {
    s.attention_bias = !fused_experts;
  } else if (family == engine::ModelFamily::kDeepseekV32 || family == engine::ModelFamily::kGlmMoeDsa) {
    // DeepSeek sparse attention: each query sees its best 8 (per expert) or 20 (fused) of the tests'
    // 80 positions. The q LoRA always (the indexer's query comes from it); DeepSeek-V3.2 with keys
    // wider than values and YaRN, an index key wider than a KV slot when fused (two slots); GLM-5
    // with keys narrower than values and one group. 8 or 16 index heads, as real indexers have
    // many: with a handful, scores of exactly zero (every head's ReLU at zero) are common, and an
    // exact tie across the k-th score is broken as torch.topk breaks it, by the pass's row length
    // (ops_dsa.h), which a restore + suffix or a decode step does not share with one prefill.
    const bool glm5 = family == engine::ModelFamily::kGlmMoeDsa;
    s.q_lora_rank = 24;
    s.kv_lora_rank = 32;
    s.qk_nope_head_dim = glm5 ? 8 : 16;
    s.qk_rope_head_dim = 16;
    s.v_head_dim = glm5 ? 32 : 16;
    s.index_topk = fused_experts ? 20 : 8;
    s.index_head_dim = glm5 ? 32 : fused_experts ? 48 : 24;
    s.index_n_heads = fused_experts ? 16 : 8;
    if (!glm5) {
      s.yarn_factor = 4.0;
      s.yarn_original_max_position_embeddings = 32;
      s.yarn_mscale = 1.0;
      s.yarn_mscale_all_dim = 0.707;
      s.n_group = 2;
    }
    s.topk_group = 1;
    s.routed_scaling_factor = 2.5;
    s.first_k_dense_replace = 1;
  } else if (family == engine::ModelFamily::kDeepseekV4) {
    // Every attention kind, in two orders: windows the tests' 80 tokens cross, CSA entries every 4
    // tokens of which the indexer picks 8 or 12, HCA entries every 8 or 16; the first layer routed
    // by token id; 4 or 2 residual streams; the compress rope's YaRN past its original context; a
    // clamp that bites. HF 5.17's saved tensor names per expert, the releases' fused. 16 index
    // heads, as real indexers have many (see deepseek_v32's above).
    s.num_layers = 4;
    s.num_kv_heads = 1;
    s.q_lora_rank = 24;
    s.sliding_window = fused_experts ? 20 : 8;
    s.v4_layer_types = fused_experts
                           ? std::vector<std::string>{"compressed_sparse_attention", "heavily_compressed_attention",
                                                      "sliding_attention", "compressed_sparse_attention"}
                           : std::vector<std::string>{"sliding_attention", "compressed_sparse_attention",
                                                      "heavily_compressed_attention", "compressed_sparse_attention"};
    s.v4_hca_rate = fused_experts ? 16 : 8;
    s.index_topk = fused_experts ? 12 : 8;
    s.index_head_dim = 16;
    s.index_n_heads = 16;
    s.partial_rotary_factor = 0.25;
    s.yarn_factor = 4.0;
    s.yarn_original_max_position_embeddings = 32;
    s.routed_scaling_factor = 1.5;
    s.hc_mult = fused_experts ? 2 : 4;
    s.scoring_func = fused_experts ? "sigmoid" : "sqrtsoftplus";
    s.v4_released_names = fused_experts;
  }
  return s;
}

// One golden fixture per supported family, named by its model_type: a family without one fails the
// golden tests rather than passing unchecked.
inline const std::vector<std::string>& fixture_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (engine::ModelFamily f : engine::model_families()) out.push_back(engine::model_family_name(f));
    return out;
  }();
  return names;
}

// FT_FIXTURES_DIR in the environment points a copied test binary (the GPU bundle) at the fixtures.
inline std::filesystem::path fixture_dir(const std::string& name) {
  const char* moved = std::getenv("FT_FIXTURES_DIR");
  return std::filesystem::path(moved && *moved ? moved : FT_FIXTURES_DIR) / "models" / name;
}

// Why `backend` cannot run on this machine (no GPU for kCuda), or empty when it can.
inline std::string backend_unavailable(engine::BackendKind backend) {
  if (backend != engine::BackendKind::kCuda) return {};
  auto dev = engine::query_cuda_device();
  return dev ? std::string() : "no GPU: " + dev.status().message();
}
// DeepSeek sparse attention's indexer brings its scores to the host inside a pass (the top-k runs
// there), and DeepSeek-V4's routers choose there: such a family's decode steps never record as
// CUDA graphs yet.
inline bool decode_host_synced(engine::ModelFamily family) {
  return family == engine::ModelFamily::kDeepseekV32 || family == engine::ModelFamily::kGlmMoeDsa ||
         family == engine::ModelFamily::kDeepseekV4;
}
// Why `backend` does not run `family`, or empty when it does: where a backend refuses a family at
// load. Every backend runs every family now; a family whose ops land on the CPU first says so here.
inline std::string family_unsupported(engine::BackendKind backend, engine::ModelFamily family) {
  (void)backend;
  (void)family;
  return {};
}

// The family name a fixture directory is named by, for family_unsupported.
inline engine::ModelFamily fixture_family(const std::string& name) {
  for (engine::ModelFamily f : engine::model_families())
    if (name == engine::model_family_name(f)) return f;
  return engine::ModelFamily::kQwen3Moe;
}

#define FT_SKIP_UNLESS_FAMILY_RUNS(backend, family)                                                    \
  do {                                                                                                 \
    FT_SKIP_UNLESS_RUNNABLE(backend);                                                                  \
    if (auto why = ::ft::test::family_unsupported(backend, family); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

#define FT_SKIP_UNLESS_RUNNABLE(backend)                                         \
  do {                                                                           \
    if (auto why = ::ft::test::backend_unavailable(backend); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

// A fixture's checkpoint directory as the engine loads it: `dir` itself, or, when the fixture keeps
// its weights as a recipe (dir/weights.json, golden_weights.h), a directory with its configs and
// the model.safetensors the recipe makes, built once per process.
inline std::filesystem::path materialized_checkpoint(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(dir / "weights.json")) return dir;
  static std::mutex mu;
  static std::map<fs::path, std::unique_ptr<TempDir>> built;
  std::lock_guard lock(mu);
  if (auto it = built.find(dir); it != built.end()) return it->second->path();
  auto out = std::make_unique<TempDir>();
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".json" && f.path().filename() != "weights.json")
      fs::copy_file(f.path(), out->path() / f.path().filename());
  const Status made = write_golden_weights(nlohmann::json::parse(read_file(dir / "weights.json")), out->path());
  EXPECT_TRUE(made.is_ok()) << dir << ": " << made.to_string();
  return built.emplace(dir, std::move(out)).first->second->path();
}

// The golden fixture <name>'s checkpoint, ready to load (materialized_checkpoint).
inline std::filesystem::path fixture_checkpoint(const std::string& name) {
  return materialized_checkpoint(fixture_dir(name) / "checkpoint");
}

// Whether tests/fixtures/models/<name>/{checkpoint/config.json, golden.safetensors} exist.
inline bool fixture_present(const std::string& name) {
  const auto dir = fixture_dir(name);
  return std::filesystem::exists(dir / "checkpoint" / "config.json") &&
         std::filesystem::exists(dir / "golden.safetensors");
}

// Reads the F32 / I64 tensors of one .safetensors file (tests only: whole file in memory).
struct SafetensorsFile {
  struct Tensor {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> data;
  };
  std::map<std::string, Tensor> tensors;

  static SafetensorsFile read(const std::filesystem::path& path) {
    SafetensorsFile f;
    std::ifstream in(path, std::ios::binary);
    uint64_t header_len = 0;
    in.read(reinterpret_cast<char*>(&header_len), 8);
    std::string header(header_len, '\0');
    in.read(header.data(), std::streamsize(header_len));
    const auto j = nlohmann::json::parse(header);
    std::vector<char> rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      Tensor t;
      t.dtype = it.value().at("dtype").get<std::string>();
      t.shape = it.value().at("shape").get<std::vector<int64_t>>();
      const auto off = it.value().at("data_offsets").get<std::vector<uint64_t>>();
      t.data.resize(off[1] - off[0]);
      std::memcpy(t.data.data(), rest.data() + off[0], t.data.size());
      f.tensors[it.key()] = std::move(t);
    }
    return f;
  }
  bool has(const std::string& name) const { return tensors.count(name) > 0; }
  std::vector<float> f32(const std::string& name) const {
    const Tensor& t = tensors.at(name);
    EXPECT_EQ(t.dtype, "F32") << name;
    std::vector<float> v(t.data.size() / 4);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
  }
  std::vector<int32_t> ids(const std::string& name) const {
    const Tensor& t = tensors.at(name);
    std::vector<int32_t> v;
    if (t.dtype == "I64") {
      for (std::size_t i = 0; i < t.data.size() / 8; ++i) {
        int64_t x;
        std::memcpy(&x, t.data.data() + 8 * i, 8);
        v.push_back(int32_t(x));
      }
    } else {
      EXPECT_EQ(t.dtype, "I32") << name;
      v.resize(t.data.size() / 4);
      std::memcpy(v.data(), t.data.data(), t.data.size());
    }
    return v;
  }
};

// ||a - b|| / ||b|| over n floats.
// Weights stored as bf16, owned by the test (N(0, 1/cols)); views as Matrix.
struct Bf16Matrix {
  std::vector<engine::bf16_t> data;
  int64_t rows = 0, cols = 0;
  Bf16Matrix(int64_t r, int64_t c, std::mt19937& rng) : data(std::size_t(r * c)), rows(r), cols(c) {
    std::normal_distribution<float> n(0.0f, 1.0f / std::sqrt(float(c)));
    for (auto& v : data) v = engine::f32_to_bf16(n(rng));
  }
  engine::Matrix view() const {
    return {engine::DType::kBF16, rows, cols, reinterpret_cast<const std::byte*>(data.data()),
            std::size_t(cols) * sizeof(engine::bf16_t)};
  }
};

inline double rel_l2(const float* a, const float* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Per position: whether any MoE layer chose another set of experts in `a` than in `b` (K each; the
// calls of two RoutingTraces).
inline std::vector<bool> routing_flips(std::size_t T, const std::vector<std::vector<int32_t>>& a,
                                       const std::vector<std::vector<int32_t>>& b, std::size_t K) {
  std::vector<bool> out(T, false);
  EXPECT_EQ(a.size(), b.size());
  for (std::size_t c = 0; c < std::min(a.size(), b.size()); ++c) {
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<int32_t> x(&a[c][t * K], &a[c][t * K] + K);
      std::vector<int32_t> y(&b[c][t * K], &b[c][t * K] + K);
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      if (x != y) out[t] = true;
    }
  }
  return out;
}

// Greedy decoding of n tokens after `ids`: each step's argmax, the next step fed `feed`'s token
// where given (teacher forcing), else its own.
inline std::vector<int32_t> greedy_steps(const engine::Model& m, const std::vector<int32_t>& ids, std::size_t n,
                                         const std::vector<int32_t>* feed = nullptr) {
  std::vector<float> logits(std::size_t(m.vocab_size()));
  engine::SequenceState state = m.new_state();
  std::vector<int32_t> out, input = ids;
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(m.forward(state, input, logits.data(), engine::LogitsMode::kLast).is_ok());
    out.push_back(engine::argmax(logits));
    input = {feed ? (*feed)[i] : out.back()};
  }
  return out;
}

// Deterministic pseudo-random token ids in [0, vocab).
inline std::vector<int32_t> test_tokens(std::size_t n, int64_t vocab, uint64_t seed = 1) {
  std::vector<int32_t> ids(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = int32_t((s >> 33) % uint64_t(vocab));
  }
  return ids;
}

}  // namespace ft::test

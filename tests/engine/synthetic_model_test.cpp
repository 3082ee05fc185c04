// Synthetic full-size checkpoints: both released layouts are checked at full size through the plan
// (no 60 GB written), one real Qwen3-30B-A3B layer (~2.5 GB) is written, read back through the
// loader and written again at another thread count, and the command's errors are one line, exit 2.
#include "ft/engine/synthetic_model.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "ft/engine/checkpoint.h"
#include "ft/engine/model.h"
#include "ft/engine/model_config.h"
#include "test_support.h"

namespace ft::test {
namespace {

using engine::SyntheticLike;
using Shape = std::vector<int64_t>;

engine::SyntheticModelOptions options_for(SyntheticLike like, int64_t layers = 0) {
  engine::SyntheticModelOptions o;
  o.like = like;
  o.layers = layers;
  return o;
}

engine::SyntheticPlan plan_of(SyntheticLike like, int64_t layers = 0) {
  auto plan = engine::plan_synthetic_model(options_for(like, layers));
  EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
  return plan.is_ok() ? *plan : engine::SyntheticPlan{};
}

std::map<std::string, Shape> shapes_of(const engine::SyntheticPlan& plan) {
  std::map<std::string, Shape> out;
  for (const engine::PlannedTensor& t : plan.tensors) out[t.name] = t.shape;
  return out;
}

engine::ModelConfig config_of(const engine::SyntheticPlan& plan) {
  auto cfg = engine::parse_model_config(engine::random_checkpoint_config_json(plan.spec),
                                        engine::random_checkpoint_generation_config_json(plan.spec));
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  return cfg.is_ok() ? *cfg : engine::ModelConfig{};
}

// Whole tensors, at most 4 GB of data per shard, named like the HF releases.
void expect_hf_shards(const engine::SyntheticPlan& plan) {
  std::vector<uint64_t> bytes(plan.shard_files.size());
  for (std::size_t i = 0; i < plan.tensors.size(); ++i)
    bytes[plan.shard_of[i]] += 2 * uint64_t(plan.tensors[i].numel());
  for (std::size_t s = 0; s < bytes.size(); ++s) {
    EXPECT_LE(bytes[s], engine::kSyntheticShardBytes) << plan.shard_files[s];
    char want[64];
    std::snprintf(want, sizeof want, "model-%05zu-of-%05zu.safetensors", s + 1, bytes.size());
    EXPECT_EQ(plan.shard_files[s], want);
  }
}

void expect_one_line_error(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// kB of anonymous (not file-backed) resident memory of this process.
long rss_anon_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  }
  return 0;
}

TEST(SyntheticModel, LikeNamesParseBack) {
  for (SyntheticLike like : engine::all_synthetic_likes()) {
    auto parsed = engine::parse_synthetic_like(engine::synthetic_like_name(like));
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(*parsed, like);
  }
  auto bad = engine::parse_synthetic_like("qwen3-235b");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("qwen3.6-35b-a3b"), std::string::npos) << bad.status().message();
}

TEST(SyntheticModel, PlansQwen3_30B_A3BWithTheReleasedShapes) {
  const engine::SyntheticPlan plan = plan_of(SyntheticLike::kQwen3_30B_A3B);
  const int64_t L = 48, H = 2048, V = 151936;
  // embed + per layer (2 norms, q/k/v/o, q/k norms, router, 128 experts x 3) + final norm + lm_head
  EXPECT_EQ(plan.tensors.size(), std::size_t(1 + L * (2 + 4 + 2 + 1 + 128 * 3) + 2));
  const int64_t per_layer = 2 * H + (4096 + 512 + 512) * H + H * 4096 + 2 * 128 + 128 * H + 128 * 3 * 768 * H;
  EXPECT_EQ(plan.total_bytes, uint64_t(2 * (2 * V * H + H + L * per_layer)));  // 61.06 GB
  const auto shapes = shapes_of(plan);
  EXPECT_EQ(shapes.at("model.embed_tokens.weight"), (Shape{V, H}));
  EXPECT_EQ(shapes.at("lm_head.weight"), (Shape{V, H}));
  EXPECT_EQ(shapes.at("model.norm.weight"), (Shape{H}));
  const std::string p = "model.layers.47.";
  EXPECT_EQ(shapes.at(p + "input_layernorm.weight"), (Shape{H}));
  EXPECT_EQ(shapes.at(p + "self_attn.q_proj.weight"), (Shape{32 * 128, H}));
  EXPECT_EQ(shapes.at(p + "self_attn.k_proj.weight"), (Shape{4 * 128, H}));
  EXPECT_EQ(shapes.at(p + "self_attn.v_proj.weight"), (Shape{4 * 128, H}));
  EXPECT_EQ(shapes.at(p + "self_attn.o_proj.weight"), (Shape{H, 32 * 128}));
  EXPECT_EQ(shapes.at(p + "self_attn.q_norm.weight"), (Shape{128}));
  EXPECT_EQ(shapes.at(p + "self_attn.k_norm.weight"), (Shape{128}));
  EXPECT_EQ(shapes.at(p + "mlp.gate.weight"), (Shape{128, H}));
  EXPECT_EQ(shapes.at(p + "mlp.experts.127.gate_proj.weight"), (Shape{768, H}));
  EXPECT_EQ(shapes.at(p + "mlp.experts.127.up_proj.weight"), (Shape{768, H}));
  EXPECT_EQ(shapes.at(p + "mlp.experts.127.down_proj.weight"), (Shape{H, 768}));
  EXPECT_EQ(plan.shard_files.size(), 16u);  // as the release
  expect_hf_shards(plan);

  const engine::ModelConfig cfg = config_of(plan);
  EXPECT_EQ(cfg.family, engine::ModelFamily::kQwen3Moe);
  EXPECT_EQ(cfg.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(cfg.vocab_size, V);
  EXPECT_EQ(cfg.hidden_size, H);
  EXPECT_EQ(cfg.num_hidden_layers, L);
  EXPECT_EQ(cfg.num_attention_heads, 32);
  EXPECT_EQ(cfg.num_key_value_heads, 4);
  EXPECT_EQ(cfg.head_dim, 128);
  EXPECT_EQ(cfg.intermediate_size, 6144);
  EXPECT_EQ(cfg.num_experts, 128);
  EXPECT_EQ(cfg.num_experts_per_tok, 8);
  EXPECT_EQ(cfg.moe_intermediate_size, 768);
  EXPECT_EQ(cfg.decoder_sparse_step, 1);
  EXPECT_TRUE(cfg.mlp_only_layers.empty());
  EXPECT_TRUE(cfg.norm_topk_prob);
  EXPECT_FALSE(cfg.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(cfg.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(cfg.partial_rotary_factor, 1.0);
  EXPECT_FLOAT_EQ(cfg.rms_norm_eps, 1e-6f);
  EXPECT_EQ(cfg.eos_token_ids, (std::vector<int32_t>{151645}));
  EXPECT_EQ(cfg.bos_token_id, 151643);
  const auto json = nlohmann::json::parse(engine::random_checkpoint_config_json(plan.spec));
  EXPECT_EQ(json.at("max_position_embeddings"), 40960);
}

TEST(SyntheticModel, PlansQwen3_6_35B_A3BWithTheReleasedShapes) {
  const engine::SyntheticPlan plan = plan_of(SyntheticLike::kQwen3_6_35B_A3B);
  const int64_t H = 2048, V = 248320;
  const auto shapes = shapes_of(plan);
  const std::string root = "model.language_model.";
  EXPECT_EQ(shapes.at(root + "embed_tokens.weight"), (Shape{V, H}));
  EXPECT_EQ(shapes.at("lm_head.weight"), (Shape{V, H}));
  EXPECT_EQ(shapes.at(root + "norm.weight"), (Shape{H}));
  // Layer 0: Gated DeltaNet (16 key heads, 32 value heads of 128).
  const std::string a = root + "layers.0.linear_attn.";
  EXPECT_EQ(shapes.at(a + "in_proj_qkv.weight"), (Shape{2 * 2048 + 4096, H}));
  EXPECT_EQ(shapes.at(a + "in_proj_z.weight"), (Shape{4096, H}));
  EXPECT_EQ(shapes.at(a + "in_proj_b.weight"), (Shape{32, H}));
  EXPECT_EQ(shapes.at(a + "in_proj_a.weight"), (Shape{32, H}));
  EXPECT_EQ(shapes.at(a + "conv1d.weight"), (Shape{8192, 1, 4}));
  EXPECT_EQ(shapes.at(a + "dt_bias"), (Shape{32}));
  EXPECT_EQ(shapes.at(a + "A_log"), (Shape{32}));
  EXPECT_EQ(shapes.at(a + "norm.weight"), (Shape{128}));
  EXPECT_EQ(shapes.at(a + "out_proj.weight"), (Shape{H, 4096}));
  // Layer 39: gated full attention (q_proj carries the gate: twice 16 x 256).
  const std::string f = root + "layers.39.self_attn.";
  EXPECT_EQ(shapes.at(f + "q_proj.weight"), (Shape{2 * 16 * 256, H}));
  EXPECT_EQ(shapes.at(f + "k_proj.weight"), (Shape{2 * 256, H}));
  EXPECT_EQ(shapes.at(f + "v_proj.weight"), (Shape{2 * 256, H}));
  EXPECT_EQ(shapes.at(f + "o_proj.weight"), (Shape{H, 16 * 256}));
  EXPECT_EQ(shapes.at(f + "q_norm.weight"), (Shape{256}));
  const std::string m = root + "layers.39.mlp.";
  EXPECT_EQ(shapes.at(m + "gate.weight"), (Shape{256, H}));
  EXPECT_EQ(shapes.at(m + "experts.gate_up_proj"), (Shape{256, 2 * 512, H}));
  EXPECT_EQ(shapes.at(m + "experts.down_proj"), (Shape{256, H, 512}));
  EXPECT_EQ(shapes.at(m + "shared_expert.gate_proj.weight"), (Shape{512, H}));
  EXPECT_EQ(shapes.at(m + "shared_expert.down_proj.weight"), (Shape{H, 512}));
  EXPECT_EQ(shapes.at(m + "shared_expert_gate.weight"), (Shape{1, H}));
  EXPECT_EQ(shapes.count(root + "layers.39.linear_attn.A_log"), 0u);
  EXPECT_EQ(shapes.count(root + "layers.40.input_layernorm.weight"), 0u);
  const int64_t norms = 2 * H, moe = 256 * H + 256 * 1024 * H + 256 * H * 512 + 3 * 512 * H + H;
  const int64_t linear = (8192 + 4096 + 2 * 32) * H + 8192 * 4 + 2 * 32 + 128 + H * 4096;
  const int64_t full = (8192 + 2 * 512) * H + H * 4096 + 2 * 256;
  EXPECT_EQ(plan.total_bytes, uint64_t(2 * (2 * V * H + H + 40 * (norms + moe) + 30 * linear + 10 * full)));  // 69.3 GB
  expect_hf_shards(plan);

  const engine::ModelConfig cfg = config_of(plan);
  EXPECT_EQ(cfg.family, engine::ModelFamily::kQwen3_5Moe);
  EXPECT_EQ(cfg.architecture, "Qwen3_5MoeForConditionalGeneration");
  EXPECT_TRUE(cfg.nested_text_config);
  EXPECT_EQ(cfg.vocab_size, V);
  EXPECT_EQ(cfg.num_hidden_layers, 40);
  EXPECT_EQ(cfg.count_layers(engine::LayerKind::kFullAttention), 10);
  EXPECT_EQ(cfg.layer_types[3], engine::LayerKind::kFullAttention);
  EXPECT_EQ(cfg.num_attention_heads, 16);
  EXPECT_EQ(cfg.num_key_value_heads, 2);
  EXPECT_EQ(cfg.head_dim, 256);
  EXPECT_DOUBLE_EQ(cfg.partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(cfg.rope_theta, 1e7);
  EXPECT_EQ(cfg.linear_num_key_heads, 16);
  EXPECT_EQ(cfg.linear_num_value_heads, 32);
  EXPECT_EQ(cfg.linear_key_head_dim, 128);
  EXPECT_EQ(cfg.linear_value_head_dim, 128);
  EXPECT_EQ(cfg.linear_conv_kernel_dim, 4);
  EXPECT_EQ(cfg.num_experts, 256);
  EXPECT_EQ(cfg.num_experts_per_tok, 8);
  EXPECT_EQ(cfg.moe_intermediate_size, 512);
  EXPECT_EQ(cfg.shared_expert_intermediate_size, 512);
  EXPECT_FALSE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.eos_token_ids, (std::vector<int32_t>{248044}));
}

// DeepSeek-V3's released shapes (latent attention, 3 dense layers, 256 routed + 1 shared expert)
// and GLM-4.5-Air's (GQA with q/k/v biases, 1 dense layer, 128 + 1 experts): what their configs
// parse to, and the tensors the loader reads.
TEST(SyntheticModel, PlansDeepseekV3AndGlm4_5AirWithTheReleasedShapes) {
  {
    const engine::SyntheticPlan plan = plan_of(SyntheticLike::kDeepseekV3);
    const int64_t H = 7168;
    const auto shapes = shapes_of(plan);
    const std::string dense = "model.layers.2.", moe = "model.layers.60.";
    EXPECT_EQ(shapes.at(dense + "self_attn.q_a_proj.weight"), (Shape{1536, H}));
    EXPECT_EQ(shapes.at(dense + "self_attn.q_a_layernorm.weight"), (Shape{1536}));
    EXPECT_EQ(shapes.at(dense + "self_attn.q_b_proj.weight"), (Shape{128 * 192, 1536}));
    EXPECT_EQ(shapes.at(dense + "self_attn.kv_a_proj_with_mqa.weight"), (Shape{512 + 64, H}));
    EXPECT_EQ(shapes.at(dense + "self_attn.kv_a_layernorm.weight"), (Shape{512}));
    EXPECT_EQ(shapes.at(dense + "self_attn.kv_b_proj.weight"), (Shape{128 * (128 + 128), 512}));
    EXPECT_EQ(shapes.at(dense + "self_attn.o_proj.weight"), (Shape{H, 128 * 128}));
    EXPECT_EQ(shapes.at(dense + "mlp.gate_proj.weight"), (Shape{18432, H}));
    EXPECT_EQ(shapes.count("model.layers.3.mlp.gate_proj.weight"), 0u);  // first_k_dense_replace 3
    EXPECT_EQ(shapes.at(moe + "mlp.gate.weight"), (Shape{256, H}));
    EXPECT_EQ(shapes.at(moe + "mlp.gate.e_score_correction_bias"), (Shape{256}));
    EXPECT_EQ(shapes.at(moe + "mlp.experts.255.down_proj.weight"), (Shape{H, 2048}));
    EXPECT_EQ(shapes.at(moe + "mlp.shared_experts.gate_proj.weight"), (Shape{2048, H}));
    std::printf("deepseek-v3: %.0f GB in bf16\n", double(plan.total_bytes) / 1e9);
    expect_hf_shards(plan);
    const engine::ModelConfig cfg = config_of(plan);
    EXPECT_EQ(cfg.family, engine::ModelFamily::kDeepseekV3);
    EXPECT_EQ(cfg.head_dim, 192);  // the KV pages' width
    EXPECT_EQ(cfg.num_experts, 256);
    EXPECT_EQ(cfg.n_group, 8);
    EXPECT_EQ(cfg.topk_group, 4);
    EXPECT_DOUBLE_EQ(cfg.routed_scaling_factor, 2.5);
    EXPECT_EQ(cfg.first_k_dense_replace, 3);
    EXPECT_EQ(cfg.rope_type, "yarn");
    EXPECT_DOUBLE_EQ(cfg.yarn.factor, 40);
    EXPECT_EQ(cfg.yarn.original_max_position_embeddings, 4096);
    EXPECT_TRUE(cfg.rope_interleave);
  }
  {
    const engine::SyntheticPlan plan = plan_of(SyntheticLike::kGlm4_5Air);
    const int64_t H = 4096;
    const auto shapes = shapes_of(plan);
    const std::string p = "model.layers.45.";
    EXPECT_EQ(shapes.at(p + "self_attn.q_proj.weight"), (Shape{96 * 128, H}));
    EXPECT_EQ(shapes.at(p + "self_attn.q_proj.bias"), (Shape{96 * 128}));
    EXPECT_EQ(shapes.at(p + "self_attn.k_proj.bias"), (Shape{8 * 128}));
    EXPECT_EQ(shapes.count(p + "self_attn.o_proj.bias"), 0u);
    EXPECT_EQ(shapes.count(p + "self_attn.q_norm.weight"), 0u);  // use_qk_norm false
    EXPECT_EQ(shapes.at(p + "mlp.experts.127.gate_proj.weight"), (Shape{1408, H}));
    EXPECT_EQ(shapes.at(p + "mlp.shared_experts.down_proj.weight"), (Shape{H, 1408}));
    EXPECT_EQ(shapes.at("model.layers.0.mlp.gate_proj.weight"), (Shape{10944, H}));
    std::printf("glm-4.5-air: %.0f GB in bf16\n", double(plan.total_bytes) / 1e9);
    const engine::ModelConfig cfg = config_of(plan);
    EXPECT_EQ(cfg.family, engine::ModelFamily::kGlm4Moe);
    EXPECT_EQ(cfg.rotary_dim(), 64);
    EXPECT_TRUE(cfg.attention_bias);
    EXPECT_EQ(cfg.eos_token_ids, (std::vector<int32_t>{151329, 151336, 151338}));
  }
}

TEST(SyntheticModel, PlansErnie4_5_21B_A3BWithTheReleasedShapes) {
  const engine::SyntheticPlan plan = plan_of(SyntheticLike::kErnie4_5_21B_A3B);
  const int64_t H = 2560;
  const auto shapes = shapes_of(plan);
  EXPECT_EQ(shapes.count("lm_head.weight"), 0u);  // tied to the embedding
  EXPECT_EQ(shapes.at("model.layers.0.mlp.gate_proj.weight"), (Shape{12288, H}));
  const std::string p = "model.layers.27.";
  EXPECT_EQ(shapes.at(p + "self_attn.q_proj.weight"), (Shape{20 * 128, H}));
  EXPECT_EQ(shapes.at(p + "self_attn.k_proj.weight"), (Shape{4 * 128, H}));
  EXPECT_EQ(shapes.at(p + "mlp.moe_statics.e_score_correction_bias"), (Shape{1, 64}));
  EXPECT_EQ(shapes.at(p + "mlp.experts.63.down_proj.weight"), (Shape{H, 1536}));
  EXPECT_EQ(shapes.at(p + "mlp.shared_experts.gate_proj.weight"), (Shape{2 * 1536, H}));
  std::printf("ernie-4.5-21b-a3b: %.0f GB in bf16\n", double(plan.total_bytes) / 1e9);
  const engine::ModelConfig cfg = config_of(plan);
  EXPECT_EQ(cfg.family, engine::ModelFamily::kErnie4_5Moe);
  EXPECT_TRUE(cfg.tie_word_embeddings);
  EXPECT_FALSE(cfg.is_moe_layer(0));
  EXPECT_TRUE(cfg.is_moe_layer(27));
}

TEST(SyntheticModel, PlansMinimaxM2WithTheReleasedShapes) {
  const engine::SyntheticPlan plan = plan_of(SyntheticLike::kMinimaxM2);
  const int64_t H = 3072;
  const auto shapes = shapes_of(plan);
  const std::string p = "model.layers.61.";
  EXPECT_EQ(shapes.at(p + "self_attn.q_norm.weight"), (Shape{48 * 128}));  // over the whole projection
  EXPECT_EQ(shapes.at(p + "self_attn.k_norm.weight"), (Shape{8 * 128}));
  EXPECT_EQ(shapes.at(p + "block_sparse_moe.gate.weight"), (Shape{256, H}));
  EXPECT_EQ(shapes.at(p + "block_sparse_moe.e_score_correction_bias"), (Shape{256}));
  EXPECT_EQ(shapes.at(p + "block_sparse_moe.experts.255.w2.weight"), (Shape{H, 1536}));
  std::printf("minimax-m2: %.0f GB in bf16\n", double(plan.total_bytes) / 1e9);
  const engine::ModelConfig cfg = config_of(plan);
  EXPECT_EQ(cfg.family, engine::ModelFamily::kMinimaxM2);
  EXPECT_EQ(cfg.rotary_dim(), 64);
  EXPECT_EQ(cfg.num_experts, 256);
  EXPECT_EQ(cfg.moe_intermediate_size, 1536);
}

TEST(SyntheticModel, PlansLlama4ScoutWithTheReleasedShapes) {
  const engine::SyntheticPlan plan = plan_of(SyntheticLike::kLlama4Scout);
  const int64_t H = 5120;
  const auto shapes = shapes_of(plan);
  const std::string p = "model.layers.47.";
  EXPECT_EQ(shapes.at(p + "self_attn.q_proj.weight"), (Shape{40 * 128, H}));
  EXPECT_EQ(shapes.at(p + "self_attn.k_proj.weight"), (Shape{8 * 128, H}));
  EXPECT_EQ(shapes.at(p + "feed_forward.router.weight"), (Shape{16, H}));
  EXPECT_EQ(shapes.at(p + "feed_forward.experts.gate_up_proj"), (Shape{16, H, 2 * 8192}));  // [in, out]
  EXPECT_EQ(shapes.at(p + "feed_forward.experts.down_proj"), (Shape{16, 8192, H}));
  EXPECT_EQ(shapes.at(p + "feed_forward.shared_expert.down_proj.weight"), (Shape{H, 8192}));
  EXPECT_EQ(shapes.count(p + "self_attn.q_norm.weight"), 0u);  // Llama 4's q/k norms have no weight
  std::printf("llama4-scout: %.0f GB in bf16\n", double(plan.total_bytes) / 1e9);
  const engine::ModelConfig cfg = config_of(plan);
  EXPECT_EQ(cfg.family, engine::ModelFamily::kLlama4Text);
  EXPECT_EQ(cfg.num_experts, 16);
  EXPECT_EQ(cfg.num_experts_per_tok, 1);
  EXPECT_EQ(cfg.attention_chunk_size, 8192);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(cfg.is_nope_layer(i), i % 4 == 3) << i;
    EXPECT_EQ(cfg.is_chunked_layer(i), i % 4 != 3) << i;
    EXPECT_TRUE(cfg.is_moe_layer(i)) << i;
  }
}

TEST(SyntheticModel, LayersCutsTheTensorsAndTheConfig) {
  const engine::SyntheticPlan plan = plan_of(SyntheticLike::kQwen3_6_35B_A3B, 5);
  const auto shapes = shapes_of(plan);
  EXPECT_EQ(shapes.count("model.language_model.layers.4.linear_attn.A_log"), 1u);
  EXPECT_EQ(shapes.count("model.language_model.layers.5.input_layernorm.weight"), 0u);
  EXPECT_EQ(shapes.count("lm_head.weight"), 1u);
  const engine::ModelConfig cfg = config_of(plan);
  EXPECT_EQ(cfg.num_hidden_layers, 5);
  using K = engine::LayerKind;
  EXPECT_EQ(cfg.layer_types, (std::vector<K>{K::kLinearAttention, K::kLinearAttention, K::kLinearAttention,
                                             K::kFullAttention, K::kLinearAttention}));
  EXPECT_FALSE(engine::plan_synthetic_model(options_for(SyntheticLike::kQwen3_30B_A3B, 49)).is_ok());
  EXPECT_FALSE(engine::plan_synthetic_model(options_for(SyntheticLike::kQwen3_30B_A3B, -1)).is_ok());
}

// XXH3 of every tensor's bytes, by name.
std::map<std::string, uint64_t> tensor_hashes(const engine::Checkpoint& ckpt) {
  std::map<std::string, uint64_t> out;
  for (const std::string& name : ckpt.tensor_names()) {
    auto view = ckpt.tensor(name);
    if (view.is_ok()) out[name] = XXH3_64bits(view->data, view->nbytes);
  }
  return out;
}

// Mean and standard deviation of a bf16 tensor's first (up to) 8 Mi values.
std::pair<double, double> moments(const engine::TensorView& view) {
  std::vector<float> values(std::size_t(std::min<int64_t>(view.numel(), int64_t(8) << 20)));
  EXPECT_TRUE(engine::to_f32(view, values.data(), 0, values.size()).is_ok());
  double sum = 0, sum_sq = 0;
  for (float v : values) {
    sum += v;
    sum_sq += double(v) * v;
  }
  const double n = double(values.size()), mean = sum / n;
  return {mean, std::sqrt(sum_sq / n - mean * mean)};
}

// The checkpoint loads on the CPU and a 4-token prompt gives finite logits.
void expect_runs(const std::filesystem::path& dir) {
  engine::LoadOptions lo;
  lo.threads = 2;
  auto model = engine::load_model(dir, lo);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  engine::SequenceState state = (*model)->new_state();
  std::vector<float> logits(std::size_t((*model)->vocab_size()));
  const std::vector<int32_t> ids = {1, 2, 3, 4};
  ASSERT_TRUE((*model)->forward(state, ids, logits.data(), engine::LogitsMode::kLast).is_ok());
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
}

TEST(SyntheticModel, WritesOneQwen3_30B_A3BLayerTheLoaderReadsAndTheSameBytesAtAnyThreadCount) {
  TempDir tmp;
  const auto dir = tmp.path() / "qwen3-30b-a3b-1";
  engine::SyntheticModelOptions opts = options_for(SyntheticLike::kQwen3_30B_A3B, 1);
  opts.threads = 2;
  opts.seed = 42;
  std::vector<std::pair<uint64_t, uint64_t>> reports;
  opts.progress = [&](uint64_t done, uint64_t total) { reports.emplace_back(done, total); };
  const auto t0 = std::chrono::steady_clock::now();
  const Status written = engine::write_synthetic_model(dir, opts);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(written.is_ok()) << written.to_string();
  const engine::SyntheticPlan plan = plan_of(SyntheticLike::kQwen3_30B_A3B, 1);
  std::printf("wrote %.2f GB in %.2f s (%.2f GB/s, 2 threads)\n", double(plan.total_bytes) / 1e9, seconds,
              double(plan.total_bytes) / 1e9 / seconds);
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back(), std::pair(plan.total_bytes, plan.total_bytes));
  for (std::size_t i = 1; i < reports.size(); ++i) EXPECT_LE(reports[i - 1].first, reports[i].first);

  auto ckpt = engine::Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  auto cfg = engine::parse_model_config(ckpt->config_text(), ckpt->generation_config_text());
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->family, engine::ModelFamily::kQwen3Moe);
  EXPECT_EQ(cfg->num_hidden_layers, 1);
  EXPECT_EQ(cfg->hidden_size, 2048);
  EXPECT_EQ(cfg->num_experts, 128);
  EXPECT_EQ(cfg->eos_token_ids, (std::vector<int32_t>{151645}));
  EXPECT_NE(ckpt->config_text().find("freetoken_synthetic"), std::string::npos);
  EXPECT_NE(read_file(dir / "README.md").find("RANDOM WEIGHTS"), std::string::npos);

  // Every planned tensor, exact shape, bf16; nothing else.
  EXPECT_EQ(ckpt->tensor_names().size(), plan.tensors.size());
  for (const engine::PlannedTensor& t : plan.tensors) {
    auto view = ckpt->tensor(t.name, t.shape);
    ASSERT_TRUE(view.is_ok()) << view.status().to_string();
    EXPECT_EQ(view->dtype, engine::DType::kBF16) << t.name;
  }
  // The index maps every tensor to a shard that exists.
  const auto index = nlohmann::json::parse(read_file(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index.at("metadata").at("total_size").get<uint64_t>(), plan.total_bytes);
  EXPECT_EQ(index.at("weight_map").size(), plan.tensors.size());
  for (const engine::PlannedTensor& t : plan.tensors) {
    const std::string shard = index.at("weight_map").at(t.name).get<std::string>();
    EXPECT_TRUE(std::filesystem::exists(dir / shard)) << shard;
  }

  // The init rules: matrices N(0, 1/fan_in), norms 1 + N(0, 0.1), embeddings N(0, 1).
  auto expect_moments = [&](const std::string& name, double mean, double std, double tolerance) {
    auto view = ckpt->tensor(name);
    ASSERT_TRUE(view.is_ok()) << name;
    const auto [m, s] = moments(*view);
    EXPECT_NEAR(m, mean, 0.02 * std + (mean != 0 ? 0.01 : 0)) << name;
    EXPECT_NEAR(s, std, tolerance * std) << name;
  };
  expect_moments("model.layers.0.mlp.experts.5.gate_proj.weight", 0.0, 1 / std::sqrt(2048.0), 0.05);
  expect_moments("model.layers.0.mlp.experts.77.down_proj.weight", 0.0, 1 / std::sqrt(768.0), 0.05);
  expect_moments("model.layers.0.self_attn.o_proj.weight", 0.0, 1 / std::sqrt(4096.0), 0.05);
  expect_moments("model.embed_tokens.weight", 0.0, 1.0, 0.05);
  expect_moments("model.layers.0.input_layernorm.weight", 1.0, 0.1, 0.1);

  // The engine runs it in place: after loading and a forward pass the process holds little
  // anonymous memory beyond what it held before (the weights stay file-backed, never copied).
  {
    const long anon0 = rss_anon_kb();
    engine::LoadOptions lo;
    lo.threads = 2;
    auto model = engine::load_model(dir, lo);
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    engine::SequenceState state = (*model)->new_state();
    std::vector<int32_t> ids(16);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i * 9973 % 151936);
    std::vector<float> logits(std::size_t((*model)->vocab_size()));
    ASSERT_TRUE((*model)->forward(state, ids, logits.data(), engine::LogitsMode::kLast).is_ok());
    EXPECT_TRUE(std::isfinite(logits[0]));
    const double grown = double(rss_anon_kb() - anon0) * 1024.0;
    std::printf("anonymous RSS grew %.0f MB loading and running a %.2f GB model\n", grown / 1e6,
                double(plan.total_bytes) / 1e9);
    EXPECT_LT(grown, 0.25 * double(plan.total_bytes));
  }

  // Same seed, another thread count: the same bytes. The first copy is removed before the second
  // is written, so the test never needs more than one (2.5 GB).
  const auto hashes = tensor_hashes(*ckpt);
  ckpt = Status(ErrorCode::kNotFound, "unmapped");
  std::filesystem::remove_all(dir);
  opts.threads = 1;
  opts.progress = nullptr;
  ASSERT_TRUE(engine::write_synthetic_model(dir, opts).is_ok());
  auto again = engine::Checkpoint::open(dir);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(tensor_hashes(*again), hashes);
}

// --quant FP8: the projections as the FP8 releases store them (F8_E4M3 with a weight_scale_inv a
// 128x128 tile), the router, norms and embeddings bf16; read back as FP8 row blocks whose values
// have the init's spread, and run.
TEST(SyntheticModel, WritesAnFp8LayerAsTheFp8ReleasesStoreIt) {
  TempDir tmp;
  const auto dir = tmp.path() / "qwen3-30b-a3b-fp8";
  engine::SyntheticModelOptions opts = options_for(SyntheticLike::kQwen3_30B_A3B, 1);
  opts.threads = 2;
  opts.quant = engine::SyntheticModelOptions::Quant::kFp8;
  const auto plan = engine::plan_synthetic_model(opts);
  ASSERT_TRUE(plan.is_ok());
  std::size_t fp8 = 0;
  for (std::size_t i = 0; i < plan->tensors.size(); ++i) {
    const std::string& name = plan->tensors[i].name;
    const bool proj = name.ends_with("_proj.weight");
    EXPECT_EQ(plan->dtypes[i], proj                           ? engine::DType::kF8E4M3
                               : name.ends_with("_scale_inv") ? engine::DType::kF32
                                                              : engine::DType::kBF16)
        << name;
    fp8 += proj;
  }
  EXPECT_EQ(fp8, 4u + 3u * 128u);  // q, k, v, o and every expert's three
  ASSERT_TRUE(engine::write_synthetic_model(dir, opts).is_ok());

  auto ckpt = engine::Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  const auto config = nlohmann::json::parse(ckpt->config_text());
  EXPECT_EQ(config.at("quantization_config").at("quant_method"), "fp8");
  EXPECT_EQ(config.at("quantization_config").at("weight_block_size"), nlohmann::json({128, 128}));
  auto q = ckpt->tensor("model.layers.0.self_attn.q_proj.weight", {4096, 2048});
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(q->dtype, engine::DType::kF8E4M3B128);
  EXPECT_FALSE(ckpt->has("model.layers.0.self_attn.q_proj.weight_scale_inv"));
  EXPECT_EQ(ckpt->tensor("model.layers.0.mlp.gate.weight")->dtype, engine::DType::kBF16);
  for (const auto& [name, fan_in] : std::vector<std::pair<std::string, double>>{
           {"model.layers.0.self_attn.q_proj.weight", 2048}, {"model.layers.0.mlp.experts.77.down_proj.weight", 768}}) {
    const auto [m, sd] = moments(*ckpt->tensor(name));
    EXPECT_NEAR(m, 0.0, 0.02 / std::sqrt(fan_in)) << name;
    EXPECT_NEAR(sd, 1 / std::sqrt(fan_in), 0.05 / std::sqrt(fan_in)) << name;
  }
  expect_runs(dir);
}

// --quant MXFP4 (gpt-oss): the routed experts as gpt-oss's release stores them (X_blocks
// [experts, out, in / 32, 16] and X_scales, quantization_config mxfp4), the rest bf16; read back
// as MXFP4 weights whose values have the init's spread, and run.
TEST(SyntheticModel, WritesGptOssExpertsInMxfp4AsItsReleaseStoresThem) {
  TempDir tmp;
  const auto dir = tmp.path() / "gpt-oss-20b-mxfp4";
  engine::SyntheticModelOptions opts = options_for(SyntheticLike::kGptOss20B, 1);
  opts.threads = 2;
  opts.quant = engine::SyntheticModelOptions::Quant::kMxfp4;
  const auto plan = engine::plan_synthetic_model(opts);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  std::size_t u8 = 0;
  for (std::size_t i = 0; i < plan->tensors.size(); ++i) u8 += plan->dtypes[i] == engine::DType::kU8;
  EXPECT_EQ(u8, 4u);  // gate_up and down: blocks and scales
  ASSERT_TRUE(engine::write_synthetic_model(dir, opts).is_ok());

  auto ckpt = engine::Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  EXPECT_EQ(nlohmann::json::parse(ckpt->config_text()).at("quantization_config").at("quant_method"), "mxfp4");
  EXPECT_FALSE(ckpt->has("model.layers.0.mlp.experts.gate_up_proj_scales"));
  // (gate_up's interleaved rows presented as gate and up: quantized_safetensors.h)
  const auto gate_up = ckpt->tensor("model.layers.0.mlp.experts.gate_proj", {32, 2880, 2880});
  ASSERT_TRUE(gate_up.is_ok()) << gate_up.status().to_string();
  EXPECT_EQ(gate_up->dtype, engine::DType::kMXFP4);
  EXPECT_EQ(ckpt->tensor("model.layers.0.mlp.experts.up_proj")->dtype, engine::DType::kMXFP4);
  EXPECT_EQ(ckpt->tensor("model.layers.0.mlp.experts.down_proj")->dtype, engine::DType::kMXFP4);
  EXPECT_EQ(ckpt->tensor("model.layers.0.self_attn.q_proj.weight")->dtype, engine::DType::kBF16);
  const auto [m, sd] = moments(*gate_up);
  EXPECT_NEAR(m, 0.0, 0.02 / std::sqrt(2880.0));
  // The scale is the nearest power of two to sigma / rms: within a factor 2^0.5 of the spread.
  EXPECT_GT(sd, 0.7 / std::sqrt(2880.0));
  EXPECT_LT(sd, 1.42 / std::sqrt(2880.0));
  expect_runs(dir);
  // Only gpt-oss has this format.
  opts.like = SyntheticLike::kQwen3_30B_A3B;
  EXPECT_EQ(engine::plan_synthetic_model(opts).status().code(), ErrorCode::kInvalidArgument);
}

TEST(SyntheticModelCli, UnknownLikeExitsTwoWithOneLine) {
  TempDir tmp;
  expect_one_line_error(run_freetoken({"make-synthetic-model", "--like", "qwen9-1t", (tmp.path() / "m").string()}),
                        "unknown model 'qwen9-1t'");
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "m"));
}

TEST(SyntheticModelCli, TooManyLayersAndANonEmptyDirExitTwoWithOneLine) {
  TempDir tmp;
  expect_one_line_error(
      run_freetoken({"make-synthetic-model", "--like", "qwen3-30b-a3b", "--layers", "49", tmp.path().string()}),
      "has 48 layers");
  std::ofstream(tmp.path() / "keep.txt") << "x";
  expect_one_line_error(
      run_freetoken({"make-synthetic-model", "--like", "qwen3-30b-a3b", "--layers", "1", tmp.path().string()}),
      "is not empty");
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "keep.txt"));
}

}  // namespace
}  // namespace ft::test

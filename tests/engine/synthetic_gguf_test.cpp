// Synthetic GGUF models (write_synthetic_gguf): a small Qwen3-MoE written as Q4_K_M reads back
// through the GGUF loader with llama-quantize's type for every tensor (Q6_K for the output and for
// attn_v / ffn_down in use_more_bits' layers, Q4_K elsewhere, F32 norms and routers), values that
// spread like the init, the same bytes at any thread count, and a model that loads and runs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>

#include "ft/engine/checkpoint.h"
#include "ft/engine/model.h"
#include "ft/engine/synthetic_model.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using engine::DType;

// Shapes whose rows are whole 256-value super-blocks, 8 layers (use_more_bits: 0, 3, 6, 7).
engine::RandomCheckpointSpec small_spec() {
  engine::RandomCheckpointSpec s;
  s.family = engine::ModelFamily::kQwen3Moe;
  s.vocab_size = 512;
  s.hidden_size = 256;
  s.num_layers = 8;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.intermediate_size = 512;
  s.num_experts = 4;
  s.top_k = 2;
  s.moe_intermediate_size = 256;
  return s;
}

Status write(const fs::path& file, engine::SyntheticQuant q, int threads = 0, uint64_t seed = 3) {
  engine::SyntheticModelOptions o;
  o.threads = threads;
  o.seed = seed;
  return engine::write_synthetic_gguf(file, small_spec(), o, q);
}

std::string bytes_of(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(SyntheticGguf, Q4KMHasLlamaQuantizesTypesAndReadsBack) {
  TempDir dir;
  const fs::path file = dir.path() / "m.gguf";
  ASSERT_TRUE(write(file, engine::SyntheticQuant::kQ4_K_M).is_ok());
  auto ckpt = engine::Checkpoint::open(file);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  const auto dtype = [&](const std::string& name) {
    auto v = ckpt->tensor(name);
    EXPECT_TRUE(v.is_ok()) << name;
    return v.is_ok() ? v->dtype : DType::kF32;
  };
  EXPECT_EQ(dtype("lm_head.weight"), DType::kQ6_K);
  EXPECT_EQ(dtype("model.embed_tokens.weight"), DType::kQ4_K);
  EXPECT_EQ(dtype("model.norm.weight"), DType::kF32);
  for (int layer = 0; layer < 8; ++layer) {
    SCOPED_TRACE(layer);
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const bool more = layer == 0 || layer == 3 || layer == 6 || layer == 7;
    const DType wide = more ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(dtype(p + "self_attn.v_proj.weight"), wide);
    EXPECT_EQ(dtype(p + "mlp.experts.3.down_proj.weight"), wide);
    EXPECT_EQ(dtype(p + "self_attn.q_proj.weight"), DType::kQ4_K);
    EXPECT_EQ(dtype(p + "self_attn.k_proj.weight"), DType::kQ4_K);
    EXPECT_EQ(dtype(p + "self_attn.o_proj.weight"), DType::kQ4_K);
    EXPECT_EQ(dtype(p + "mlp.experts.0.gate_proj.weight"), DType::kQ4_K);
    EXPECT_EQ(dtype(p + "mlp.experts.0.up_proj.weight"), DType::kQ4_K);
    EXPECT_EQ(dtype(p + "mlp.gate.weight"), DType::kF32);
    EXPECT_EQ(dtype(p + "input_layernorm.weight"), DType::kF32);
    EXPECT_EQ(dtype(p + "self_attn.q_norm.weight"), DType::kF32);
  }
  // Layers differ in expert size (Q6_K downs where use_more_bits): the plan knows the largest.
  engine::LoadOptions cpu;
  cpu.backend = engine::BackendKind::kCpu;
  auto m = engine::load_model(file, cpu);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const uint64_t q4k_row = 256 / 256 * 144, q6k_row = 256 / 256 * 210;  // a 256-wide row
  EXPECT_EQ((*m)->placement().largest_expert_bytes, 2 * 256 * q4k_row + 256 * q6k_row);
  EXPECT_GT((*m)->placement().largest_expert_bytes * 4 * 8, (*m)->placement().routed_expert_bytes);
  // The decoded values spread like the init (normal, the spec's scale), in every block type.
  std::map<std::string, double> scale;
  for (const engine::PlannedTensor& t : engine::random_checkpoint_tensors(small_spec())) scale[t.name] = t.init.scale;
  for (const char* name :
       {"model.layers.1.mlp.experts.2.down_proj.weight", "model.layers.0.mlp.experts.2.down_proj.weight",
        "model.layers.2.self_attn.q_proj.weight", "lm_head.weight"}) {
    SCOPED_TRACE(name);
    auto v = ckpt->tensor(name);
    ASSERT_TRUE(v.is_ok());
    std::vector<float> x(std::size_t(v->numel()));
    ASSERT_TRUE(engine::to_f32(*v, x.data(), 0, x.size()).is_ok());
    double sum = 0, sq = 0;
    for (float f : x) {
      ASSERT_TRUE(std::isfinite(f));
      sum += f;
      sq += double(f) * f;
    }
    const double mean = sum / double(x.size()), sd = std::sqrt(sq / double(x.size()) - mean * mean);
    const std::string like = std::string(name).find("experts.") != std::string::npos
                                 ? "model.layers.0.mlp.experts.0.down_proj.weight"
                                 : name;
    ASSERT_GT(scale.count(like), 0u);
    EXPECT_LT(std::abs(mean), 0.1 * scale[like]);
    EXPECT_NEAR(sd, scale[like], 0.1 * scale[like]);
  }
}

// Q5_K_M: llama-quantize's same mix with Q5_K for Q4_K, the values spread like the init.
TEST(SyntheticGguf, Q5KMHasLlamaQuantizesTypesAndTheInitSpread) {
  TempDir dir;
  const fs::path file = dir.path() / "m.gguf";
  ASSERT_TRUE(write(file, engine::SyntheticQuant::kQ5_K_M).is_ok());
  auto ckpt = engine::Checkpoint::open(file);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  const auto dtype = [&](const std::string& name) { return ckpt->tensor(name)->dtype; };
  EXPECT_EQ(dtype("lm_head.weight"), DType::kQ6_K);
  EXPECT_EQ(dtype("model.layers.0.self_attn.v_proj.weight"), DType::kQ6_K);  // use_more_bits
  EXPECT_EQ(dtype("model.layers.1.self_attn.v_proj.weight"), DType::kQ5_K);
  EXPECT_EQ(dtype("model.layers.1.mlp.experts.0.gate_proj.weight"), DType::kQ5_K);
  std::map<std::string, double> scale;
  for (const engine::PlannedTensor& t : engine::random_checkpoint_tensors(small_spec())) scale[t.name] = t.init.scale;
  const char* name = "model.layers.1.mlp.experts.2.down_proj.weight";
  auto v = ckpt->tensor(name);
  ASSERT_TRUE(v.is_ok());
  ASSERT_EQ(v->dtype, DType::kQ5_K);
  std::vector<float> x(std::size_t(v->numel()));
  ASSERT_TRUE(engine::to_f32(*v, x.data(), 0, x.size()).is_ok());
  double sum = 0, sq = 0;
  for (float f : x) {
    sum += f;
    sq += double(f) * f;
  }
  const double mean = sum / double(x.size()), sd = std::sqrt(sq / double(x.size()) - mean * mean);
  const double want = scale["model.layers.0.mlp.experts.0.down_proj.weight"];
  EXPECT_LT(std::abs(mean), 0.1 * want);
  EXPECT_NEAR(sd, want, 0.1 * want);
}

TEST(SyntheticGguf, LoadsAndRunsOnTheCpu) {
  TempDir dir;
  const fs::path file = dir.path() / "m.gguf";
  ASSERT_TRUE(write(file, engine::SyntheticQuant::kQ4_0).is_ok());
  engine::LoadOptions o;
  o.backend = engine::BackendKind::kCpu;
  auto m = engine::load_model(file, o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const std::vector<int32_t> ids = {1, 7, 42, 300, 511};
  std::vector<float> logits(ids.size() * 512);
  engine::SequenceState s = (*m)->new_state();
  ASSERT_TRUE((*m)->forward(s, ids, logits.data(), engine::LogitsMode::kAll).is_ok());
  for (float f : logits) ASSERT_TRUE(std::isfinite(f));
  EXPECT_NE(logits[0], logits[512]);  // positions differ
}

// Q4_K_M and Q5_K_M models on the GPU (Q4_K or Q5_K projections and gate/up, Q6_K downs, through
// the lane kernels; the prefill decodes tiles of rows instead): decode steps give the prefill's
// logits (2e-3, as every GPU decode-vs-prefill test), and with the experts in host RAM behind 16
// slots (12 cached of the 32 experts, the rest transient) every step gives the all-resident
// logits, with the prefill's expert copies one by one (FT_CUDA_COPY_RUNS=0) or in strided runs
// (consecutive experts of the stacked tensors into consecutive slots of one allocation: 16 slots
// come in chunks of two, 5 would be five chunks of one and never form a run).
class SyntheticGgufOnTheGpu : public ::testing::TestWithParam<engine::SyntheticQuant> {};

TEST_P(SyntheticGgufOnTheGpu, DecodesAsItPrefillsResidentOrOffloaded) {
  FT_SKIP_UNLESS_RUNNABLE(engine::BackendKind::kCuda);
  TempDir dir;
  const fs::path file = dir.path() / "m.gguf";
  ASSERT_TRUE(write(file, GetParam()).is_ok());
  const auto load = [&](int slots) {
    engine::LoadOptions o;
    o.backend = engine::BackendKind::kCuda;
    o.deterministic = true;
    o.expert_slots = slots;
    o.kv_budget_bytes = 64ull << 20;
    auto m = engine::load_model(file, o);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    return m.is_ok() ? std::move(m).value() : nullptr;
  };
  auto resident = load(0);
  ASSERT_TRUE(resident);
  const std::size_t V = 512, T = 40, steps = 6;
  std::vector<int32_t> ids(T);
  for (std::size_t i = 0; i < T; ++i) ids[i] = int32_t((i * 37 + 11) % V);
  std::vector<float> full(T * V);
  engine::SequenceState s = resident->new_state();
  ASSERT_TRUE(resident->forward(s, ids, full.data(), engine::LogitsMode::kAll).is_ok());
  for (const bool runs : {false, true}) {
    SCOPED_TRACE(runs ? "copies in strided runs" : "copies one by one");
    const ScopedEnv copy_runs("FT_CUDA_COPY_RUNS", runs ? "1" : "0");
    auto offloaded = load(16);
    ASSERT_TRUE(offloaded);
    engine::SequenceState r = resident->new_state(), o = offloaded->new_state();
    const auto prefix = std::span(ids).first(T - steps);
    ASSERT_TRUE(resident->forward(r, prefix, nullptr, engine::LogitsMode::kNone).is_ok());
    ASSERT_TRUE(offloaded->forward(o, prefix, nullptr, engine::LogitsMode::kNone).is_ok());
    for (std::size_t i = T - steps; i < T; ++i) {
      std::vector<float> lr(V), lo(V);
      ASSERT_TRUE(resident->forward(r, std::span(ids).subspan(i, 1), lr.data(), engine::LogitsMode::kLast).is_ok());
      ASSERT_TRUE(offloaded->forward(o, std::span(ids).subspan(i, 1), lo.data(), engine::LogitsMode::kLast).is_ok());
      if (!runs) {
        EXPECT_LT(rel_l2(lr.data(), &full[i * V], V), 2e-3) << "position " << i;
      }
      EXPECT_LT(rel_l2(lo.data(), lr.data(), V), 1e-4) << "position " << i;
    }
    const auto st = offloaded->expert_offload_stats();
    ASSERT_TRUE(st);
    EXPECT_GT(st->misses, 0u);
    if (runs) {
      EXPECT_GT(st->fetched_in_runs, 0u) << "no two consecutive experts went into consecutive slots";
    } else {
      EXPECT_EQ(st->fetched_in_runs, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KQuants, SyntheticGgufOnTheGpu,
                         ::testing::Values(engine::SyntheticQuant::kQ4_K_M, engine::SyntheticQuant::kQ5_K_M),
                         [](const auto& info) {
                           return info.param == engine::SyntheticQuant::kQ4_K_M ? "Q4_K_M" : "Q5_K_M";
                         });

TEST(SyntheticGguf, SameSeedSameBytesAtAnyThreadCount) {
  TempDir dir;
  ASSERT_TRUE(write(dir.path() / "a.gguf", engine::SyntheticQuant::kQ4_K_M, 1).is_ok());
  ASSERT_TRUE(write(dir.path() / "b.gguf", engine::SyntheticQuant::kQ4_K_M, 3).is_ok());
  ASSERT_TRUE(write(dir.path() / "c.gguf", engine::SyntheticQuant::kQ4_K_M, 3, 4).is_ok());
  const std::string a = bytes_of(dir.path() / "a.gguf");
  EXPECT_GT(a.size(), 1000000u);
  EXPECT_TRUE(a == bytes_of(dir.path() / "b.gguf"));
  EXPECT_FALSE(a == bytes_of(dir.path() / "c.gguf"));
}

TEST(SyntheticGguf, RefusesOtherFamiliesPartialBlocksAndExistingFiles) {
  TempDir dir;
  const fs::path file = dir.path() / "m.gguf";
  engine::SyntheticModelOptions o;
  engine::RandomCheckpointSpec mixtral = small_spec();
  mixtral.family = engine::ModelFamily::kMixtral;
  Status s = engine::write_synthetic_gguf(file, mixtral, o, engine::SyntheticQuant::kQ4_0);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported) << s.to_string();
  engine::RandomCheckpointSpec narrow = small_spec();
  narrow.moe_intermediate_size = 96;  // down_proj rows of 96 values: not whole Q4_K super-blocks
  s = engine::write_synthetic_gguf(file, narrow, o, engine::SyntheticQuant::kQ4_K_M);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("down_exps"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(file));
  ASSERT_TRUE(write(file, engine::SyntheticQuant::kQ8_0).is_ok());
  s = write(file, engine::SyntheticQuant::kQ8_0);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_TRUE(engine::Checkpoint::open(file).is_ok());  // the first one is untouched
}

// Qwen3.5 / 3.6 MoE (qwen35moe): three Gated DeltaNet layers to one full-attention layer, fused
// expert stacks, the norms stored as 1 + w and A_log as -exp(A_log), as llama.cpp's converter
// writes them; they read back as the model's own values, and the model runs.
TEST(SyntheticGguf, Qwen35MoeReadsBackAsTheHfModelAndRuns) {
  engine::RandomCheckpointSpec s = small_spec();
  s.family = engine::ModelFamily::kQwen3_5Moe;
  s.head_dim = 64;
  s.partial_rotary_factor = 0.25;
  s.full_attention_interval = 4;
  s.linear_num_key_heads = 2;
  s.linear_num_value_heads = 4;
  s.linear_key_head_dim = 32;
  s.linear_value_head_dim = 64;
  s.linear_conv_kernel_dim = 4;
  s.shared_expert_intermediate_size = 256;
  s.fused_experts = true;
  s.intermediate_size = 0;
  TempDir dir;
  const fs::path file = dir.path() / "m.gguf";
  engine::SyntheticModelOptions o;
  ASSERT_TRUE(engine::write_synthetic_gguf(file, s, o, engine::SyntheticQuant::kQ4_K_M).is_ok());
  auto ckpt = engine::Checkpoint::open(file);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  const auto values = [&](const std::string& name) {
    auto v = ckpt->tensor(name);
    EXPECT_TRUE(v.is_ok()) << name;
    std::vector<float> x(v.is_ok() ? std::size_t(v->numel()) : 0);
    if (v.is_ok()) {
      EXPECT_TRUE(engine::to_f32(*v, x.data(), 0, x.size()).is_ok());
    }
    return std::make_pair(v.is_ok() ? v->dtype : DType::kF32, x);
  };
  // Zero-centred norms drawn N(0, 0.1^2): read back around 0, not around the stored 1.
  for (const char* name :
       {"model.norm.weight", "model.layers.0.input_layernorm.weight", "model.layers.3.post_attention_layernorm.weight",
        "model.layers.3.self_attn.q_norm.weight"}) {
    const auto [dtype, x] = values(name);
    EXPECT_EQ(dtype, DType::kF32) << name;
    double sum = 0;
    for (float f : x) sum += f;
    EXPECT_LT(std::abs(sum / double(x.size())), 0.05) << name;
  }
  // A_log drawn log U(1, 8): back in [0, log 8] through -exp and log.
  const auto [a_type, a_log] = values("model.layers.0.linear_attn.A_log");
  for (float f : a_log) {
    EXPECT_GE(f, -1e-6f);
    EXPECT_LE(f, std::log(8.0f) + 1e-5f);
  }
  EXPECT_EQ(values("model.layers.0.linear_attn.conv1d.weight").first, DType::kF32);
  EXPECT_EQ(values("model.layers.0.linear_attn.in_proj_qkv.weight").first, DType::kQ6_K);  // use_more_bits
  EXPECT_EQ(values("model.layers.1.linear_attn.in_proj_qkv.weight").first, DType::kQ4_K);
  EXPECT_EQ(values("model.layers.1.linear_attn.in_proj_b.weight").first, DType::kQ4_K);
  EXPECT_EQ(values("model.layers.3.mlp.experts.0.up_proj.weight").first, DType::kQ4_K);
  EXPECT_FALSE(ckpt->has("model.layers.3.linear_attn.A_log"));  // a full-attention layer

  engine::LoadOptions cpu;
  cpu.backend = engine::BackendKind::kCpu;
  auto m = engine::load_model(file, cpu);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(engine::model_family_name((*m)->config().family), std::string("qwen3_5_moe"));
  const std::vector<int32_t> ids = {1, 7, 42, 300, 511};
  std::vector<float> logits(ids.size() * 512);
  engine::SequenceState st = (*m)->new_state();
  ASSERT_TRUE((*m)->forward(st, ids, logits.data(), engine::LogitsMode::kAll).is_ok());
  for (float f : logits) ASSERT_TRUE(std::isfinite(f));
  EXPECT_NE(logits[0], logits[512]);
}

}  // namespace
}  // namespace ft::test

// Models loaded from GGUF files that llama.cpp's own tools made (tests/fixtures/gguf/models, made by
// scripts/goldens/make-gguf-goldens.sh): a random shrunk Qwen3-MoE / Qwen2-MoE converted by
// convert_hf_to_gguf.py and quantised by llama-quantize (one file holds Q8_0, Q4_0, Q4_1, Q4_K,
// Q5_K and Q6_K tensors, another MXFP4 experts), with the logits HF transformers computes after
// loading that GGUF (dequantised by gguf-py) in float32.
//   - the file reads as the HF checkpoint it came from (config, names, block dtypes in place);
//   - the fp32 reference is within 1e-3 of transformers at every position and greedy-identical;
//   - the CPU and CUDA runtimes on the packed blocks are within 1e-3 of themselves on the
//     dequantised weights (an F32 checkpoint written from our dequantisation, which equals ggml's
//     bit for bit), and within 1e-2 of transformers;
//   - restore + suffix equals the whole sequence; broken files are one-line errors.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "ft/engine/checkpoint.h"
#include "ft/engine/model.h"
#include "ft/engine/sampling.h"
#include "ft/engine/state_checkpoint.h"
#include "gguf_from_hf.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using engine::BackendKind;
using engine::LogitsMode;

fs::path gguf_model(const std::string& name) {
  return fs::path(FT_FIXTURES_DIR) / "gguf" / "models" / (name + ".gguf");
}

// slots > 0: the routed experts stay in host RAM with that many GPU slots, misses served by `policy`.
std::unique_ptr<engine::Model> load(const fs::path& path, BackendKind backend, int slots = 0,
                                    const char* policy = "adaptive", bool deterministic = true) {
  engine::LoadOptions o;
  o.backend = backend;
  o.deterministic = deterministic;
  // A few hundred tokens: without a KV budget a resident model's pool takes all the GPU has, and a
  // test that holds two models would find no room for the second.
  o.kv_budget_bytes = 64ull << 20;
  if (slots > 0) {
    o.expert_slots = slots;
    o.threads = 2;
    auto p = engine::parse_moe_policy(policy);
    EXPECT_TRUE(p.is_ok());
    if (p.is_ok()) o.moe_policy = *p;
  }
  auto m = engine::load_model(path, o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

std::vector<float> logits_of(const engine::Model& m, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * std::size_t(m.vocab_size()));
  engine::SequenceState s = m.new_state();
  const Status st = m.forward(s, ids, out.data(), LogitsMode::kAll);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out;
}

std::vector<int32_t> greedy(const engine::Model& m, const std::vector<int32_t>& ids, std::size_t n) {
  std::vector<float> logits(std::size_t(m.vocab_size()));
  engine::SequenceState s = m.new_state();
  std::vector<int32_t> out, input = ids;
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(m.forward(s, input, logits.data(), LogitsMode::kLast).is_ok());
    out.push_back(engine::argmax(logits));
    input = {out.back()};
  }
  return out;
}

double worst_rel_l2(const std::vector<float>& a, const std::vector<float>& b, std::size_t V) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t t = 0; t * V < a.size() && t * V < b.size(); ++t)
    worst = std::max(worst, rel_l2(&a[t * V], &b[t * V], V));
  return worst;
}

// The same checkpoint with every tensor dequantised to F32 by the reference dequantisers (equal to
// ggml's bit for bit, gguf_dequant_test): what "the same model on the dequantised weights" means.
fs::path write_dequantised(const engine::Checkpoint& ckpt, const fs::path& dir) {
  std::vector<engine::OwnedTensor> tensors;
  for (const std::string& name : ckpt.tensor_names()) {
    auto view = ckpt.tensor(name);
    EXPECT_TRUE(view.is_ok()) << view.status().to_string();
    if (!view.is_ok()) continue;
    engine::OwnedTensor t{name, engine::DType::kF32, view->shape, {}};
    t.data.resize(std::size_t(view->numel()) * sizeof(float));
    EXPECT_TRUE(engine::to_f32(*view, reinterpret_cast<float*>(t.data.data()), 0, std::size_t(view->numel())).is_ok());
    tensors.push_back(std::move(t));
  }
  EXPECT_TRUE(engine::write_safetensors(dir / "model.safetensors", tensors).is_ok());
  std::ofstream(dir / "config.json") << ckpt.config_text();
  if (!ckpt.generation_config_text().empty())
    std::ofstream(dir / "generation_config.json") << ckpt.generation_config_text();
  return dir;
}

class GgufModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ =
        SafetensorsFile::read(fs::path(FT_FIXTURES_DIR) / "gguf" / "models" / (GetParam() + ".golden.safetensors"));
    ASSERT_TRUE(golden_.has("input_ids") && golden_.has("logits") && golden_.has("greedy_ids"));
  }
  fs::path path() const { return gguf_model(GetParam()); }
  SafetensorsFile golden_;
};

TEST_P(GgufModel, ReferenceMatchesTransformersOnTheSameFile) {
  auto m = load(path(), BackendKind::kReference);
  ASSERT_TRUE(m);
  const auto ids = golden_.ids("input_ids");
  const double worst = worst_rel_l2(logits_of(*m, ids), golden_.f32("logits"), std::size_t(m->vocab_size()));
  EXPECT_LT(worst, 1e-3);
  EXPECT_EQ(greedy(*m, ids, golden_.ids("greedy_ids").size()), golden_.ids("greedy_ids"));
  std::printf("[ %s on reference ] worst logits rel L2 %.3g against transformers\n", GetParam().c_str(), worst);
}

// The runtime backends on the packed blocks against themselves on the dequantised weights (the
// products' own error: 1e-3), and (with bf16 KV: 1e-2) against the reference on the same file routed
// as the runtime was: the reference is transformers to 1e-6 (above), but a rounding that flips a
// router's near-tie sends a position elsewhere, as in the HF golden tests; flips stay under 5%.
void expect_runtime_matches(const fs::path& gguf, const SafetensorsFile& golden, BackendKind backend) {
  auto ckpt = engine::Checkpoint::open(gguf);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  TempDir tmp;
  auto packed = load(gguf, backend);
  auto dense = load(write_dequantised(*ckpt, tmp.path()), backend);
  auto ref = load(gguf, BackendKind::kReference);
  ASSERT_TRUE(packed && dense && ref);
  const auto ids = golden.ids("input_ids");
  const std::size_t V = std::size_t(packed->vocab_size()), T = ids.size();
  engine::RoutingTrace trace, along;
  packed->set_routing_trace(&trace);
  const std::vector<float> got = logits_of(*packed, ids);
  packed->set_routing_trace(nullptr);
  ASSERT_TRUE(ref->set_forced_routing(&trace));
  ref->set_routing_trace(&along);
  const std::vector<float> want = logits_of(*ref, ids);
  const double self = worst_rel_l2(got, logits_of(*dense, ids), V);
  const double routed_alike = worst_rel_l2(got, want, V);
  std::size_t flips = 0;
  for (std::size_t t = 0; t < T; ++t) {
    bool flipped = false;
    for (std::size_t c = 0; c < along.unforced.size(); ++c) {
      for (std::size_t k = 0; k < trace.top_k; ++k) {
        const auto& a = along.unforced[c];
        const auto& b = trace.calls[c];
        flipped = flipped || std::find(b.begin() + long(t * trace.top_k), b.begin() + long((t + 1) * trace.top_k),
                                       a[t * trace.top_k + k]) == b.begin() + long((t + 1) * trace.top_k);
      }
    }
    flips += flipped;
  }
  EXPECT_LT(self, 1e-3);
  EXPECT_LT(routed_alike, 1e-2);
  EXPECT_LE(flips * 20, T) << flips << " of " << T << " positions routed otherwise than the reference would";
  std::printf(
      "[ %s on %s ] worst logits rel L2 %.3g against the dequantised weights, %.3g against the reference "
      "routed alike; %zu of %zu positions with a flipped routing\n",
      gguf.filename().c_str(), engine::backend_name(backend), self, routed_alike, flips, T);
}

TEST_P(GgufModel, CpuOnPackedBlocksMatchesItselfOnDequantisedWeights) {
  expect_runtime_matches(path(), golden_, BackendKind::kCpu);
}

// A prefill on a CPU with AMX multiplies the blocks decoded into bf16 hi + lo tiles (linear and
// the experts, 48 assignments an expert here); decode steps and a deterministic backend keep the
// integer and fused kernels. Both runtime paths keep KV in bf16, whose roundings a product's last
// bits move (~1e-3 of the logits against the fp32 reference, on these tiny random models): the AMX
// prefill is no further from the reference than the integer and fused kernels are.
TEST_P(GgufModel, CpuPrefillOnAmxFollowsTheReferenceAsTheIntegerKernelsDo) {
  if (!engine::cpu_isa_supported(engine::CpuIsa::kAmxBf16)) GTEST_SKIP() << "this CPU has no AMX";
  auto amx = load(path(), BackendKind::kCpu, 0, "adaptive", /*deterministic=*/false);
  auto fixed = load(path(), BackendKind::kCpu);
  auto ref = load(path(), BackendKind::kReference);
  ASSERT_TRUE(amx && fixed && ref);
  std::mt19937 rng(3);
  std::vector<int32_t> ids(96);
  for (int32_t& id : ids) id = int32_t(rng() % std::uint32_t(amx->vocab_size()));
  const std::size_t V = std::size_t(amx->vocab_size());
  const std::vector<float> got = logits_of(*amx, ids), integer = logits_of(*fixed, ids), want = logits_of(*ref, ids);
  const double amx_err = worst_rel_l2(got, want, V), integer_err = worst_rel_l2(integer, want, V);
  EXPECT_LT(amx_err, 1e-2);
  EXPECT_LT(amx_err, 1.25 * integer_err);
  EXPECT_NE(0, std::memcmp(got.data(), integer.data(), got.size() * sizeof(float))) << "the AMX path did not run";
  std::printf(
      "[ %s prefill on AMX ] worst logits rel L2 %.3g against the reference (the integer and fused kernels: %.3g)\n",
      GetParam().c_str(), amx_err, integer_err);
}

TEST_P(GgufModel, CudaOnPackedBlocksMatchesItselfOnDequantisedWeights) {
  FT_SKIP_UNLESS_RUNNABLE(BackendKind::kCuda);
  expect_runtime_matches(path(), golden_, BackendKind::kCuda);
}

// The routed experts in host RAM, as stored (one slot holds an expert's blocks), with fewer GPU
// slots than a layer has experts: every policy gives the logits of the model with every expert in
// VRAM, in prefill (experts streamed through the slots in rounds) and in decode (hits, fetches and
// the CPU's share on the same blocks).
TEST_P(GgufModel, CudaWithExpertsInHostRamMatchesAllResident) {
  FT_SKIP_UNLESS_RUNNABLE(BackendKind::kCuda);
  // Prefill: the same kernels but for the order a token's experts are added in. Decode: the GPU's
  // products on int8 activations against the CPU's share on fp32 or on int8 planes of its own,
  // each ~2e-5-1e-4 from the exact product (an expert computed wrongly is ~1e-1).
  constexpr double kTolerance = 1e-4, kDecodeTolerance = 5e-4;
  auto resident = load(path(), BackendKind::kCuda);
  ASSERT_TRUE(resident);
  const auto ids = golden_.ids("input_ids");
  ASSERT_GT(ids.size(), 16u);  // the prefill path
  const std::size_t V = std::size_t(resident->vocab_size());
  engine::SequenceState rs = resident->new_state();
  std::vector<float> want(ids.size() * V);
  ASSERT_TRUE(resident->forward(rs, ids, want.data(), LogitsMode::kAll).is_ok());
  std::vector<int32_t> steps{engine::argmax(std::span(want).subspan((ids.size() - 1) * V, V))};
  std::vector<std::vector<float>> want_steps;
  for (int i = 0; i < 4; ++i) {
    std::vector<float> l(V);
    ASSERT_TRUE(resident->forward(rs, {&steps.back(), 1}, l.data(), LogitsMode::kLast).is_ok());
    want_steps.push_back(l);
    steps.push_back(engine::argmax(l));
  }
  const int experts = int(resident->config().num_experts), top_k = int(resident->config().num_experts_per_tok);
  const int slots = top_k + 3;  // the fewest offload takes (top_k + 2) and one more
  ASSERT_LT(slots - top_k, experts) << "the cache must be smaller than a layer's experts";
  // The slot kernels take gate and up in one type; a file that quantised them differently (the
  // mixed fixture: Q4_K gate, Q5_K up) is refused with that reason, and the pass fails cleanly.
  auto ckpt = engine::Checkpoint::open(path());
  ASSERT_TRUE(ckpt.is_ok());
  if (ckpt->tensor("model.layers.0.mlp.experts.0.gate_proj.weight")->dtype !=
      ckpt->tensor("model.layers.0.mlp.experts.0.up_proj.weight")->dtype) {
    auto m = load(path(), BackendKind::kCuda, slots);
    ASSERT_TRUE(m);
    engine::SequenceState s = m->new_state();
    const Status st = m->forward(s, ids, nullptr, LogitsMode::kNone);
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("gate and up in one type"), std::string::npos) << st.to_string();
    return;
  }
  for (const char* policy : {"fetch", "cpu", "adaptive"}) {
    SCOPED_TRACE(policy);
    auto m = load(path(), BackendKind::kCuda, slots, policy);
    ASSERT_TRUE(m);
    EXPECT_TRUE(m->placement().experts_on_host);
    engine::SequenceState s = m->new_state();
    std::vector<float> got(ids.size() * V);
    ASSERT_TRUE(m->forward(s, ids, got.data(), LogitsMode::kAll).is_ok());
    EXPECT_LT(worst_rel_l2(got, want, V), kTolerance);
    const auto prefill = m->expert_offload_stats();
    ASSERT_TRUE(prefill);
    EXPECT_GT(prefill->fetched, 0u);
    for (std::size_t i = 0; i < want_steps.size(); ++i) {
      std::vector<float> l(V);
      ASSERT_TRUE(m->forward(s, {&steps[i], 1}, l.data(), LogitsMode::kLast).is_ok());
      EXPECT_LT(rel_l2(l.data(), want_steps[i].data(), V), kDecodeTolerance) << "step " << i;
    }
    const auto st = m->expert_offload_stats();
    ASSERT_TRUE(st);
    if (std::string(policy) == "cpu") {
      EXPECT_GT(st->cpu_computed, 0u);
    } else if (std::string(policy) == "fetch") {
      EXPECT_GT(st->fetched, prefill->fetched);
    }
  }
}

// Decode steps on the GPU (one token a pass: the block GEMV and expert kernels, the fp32 router's
// fused routing) give the logits the prefill of the same tokens gives (split bf16 GEMMs), to the
// 2e-3 every GPU decode-vs-prefill test allows.
TEST_P(GgufModel, CudaDecodeStepsMatchThePrefillOfTheSameTokens) {
  FT_SKIP_UNLESS_RUNNABLE(BackendKind::kCuda);
  auto m = load(path(), BackendKind::kCuda);
  ASSERT_TRUE(m);
  const auto ids = golden_.ids("input_ids");
  const std::size_t V = std::size_t(m->vocab_size()), T = ids.size(), steps = 6;
  const std::vector<float> full = logits_of(*m, ids);
  engine::SequenceState s = m->new_state();
  ASSERT_TRUE(m->forward(s, std::span(ids).first(T - steps), nullptr, LogitsMode::kNone).is_ok());
  for (std::size_t i = T - steps; i < T; ++i) {
    std::vector<float> l(V);
    ASSERT_TRUE(m->forward(s, std::span(ids).subspan(i, 1), l.data(), LogitsMode::kLast).is_ok());
    EXPECT_LT(rel_l2(l.data(), &full[i * V], V), 2e-3) << "position " << i;
  }
}

TEST_P(GgufModel, RestorePlusSuffixEqualsTheWholeSequence) {
  auto m = load(path(), BackendKind::kCpu);
  ASSERT_TRUE(m);
  const auto ids = golden_.ids("input_ids");
  const std::size_t V = std::size_t(m->vocab_size()), T = ids.size();
  const std::vector<float> full = logits_of(*m, ids);
  for (const std::size_t split : {std::size_t(1), std::size_t(17), T - 1}) {
    engine::SequenceState prefix = m->new_state();
    ASSERT_TRUE(m->forward(prefix, std::span(ids).first(split), nullptr, LogitsMode::kNone).is_ok());
    const store::ModelState saved = engine::to_model_state(prefix, engine::store_fingerprint(*m));
    engine::SequenceState resumed = m->new_state();
    ASSERT_TRUE(engine::restore_from_model_state(saved, resumed).is_ok());
    std::vector<float> logits((T - split) * V);
    ASSERT_TRUE(m->forward(resumed, std::span(ids).subspan(split), logits.data(), LogitsMode::kAll).is_ok());
    EXPECT_EQ(0, std::memcmp(logits.data(), &full[split * V], logits.size() * sizeof(float))) << "split " << split;
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppFiles, GgufModel,
                         ::testing::Values("qwen3_moe-mixed", "qwen3_moe-mxfp4", "qwen2_moe-q4_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The file reads as the HF checkpoint it was converted from: its config, HF names, each tensor in
// the block dtype llama-quantize chose, experts as per-expert views of the stacks.
TEST(GgufCheckpoint, ReadsAsTheHfCheckpointItCameFrom) {
  auto ckpt = engine::Checkpoint::open(gguf_model("qwen3_moe-mixed"));
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  const auto cfg = nlohmann::json::parse(ckpt->config_text());
  EXPECT_EQ(cfg["model_type"], "qwen3_moe");
  EXPECT_EQ(cfg["hidden_size"], 256);
  EXPECT_EQ(cfg["num_hidden_layers"], 2);
  EXPECT_EQ(cfg["num_attention_heads"], 4);
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_EQ(cfg["head_dim"], 64);
  EXPECT_EQ(cfg["num_experts"], 4);
  EXPECT_EQ(cfg["num_experts_per_tok"], 2);
  EXPECT_EQ(cfg["moe_intermediate_size"], 256);
  EXPECT_EQ(cfg["vocab_size"], 512);
  EXPECT_EQ(cfg["tie_word_embeddings"], false);
  EXPECT_EQ(cfg["mlp_only_layers"], nlohmann::json::array());
  EXPECT_DOUBLE_EQ(cfg["rope_parameters"]["rope_theta"].get<double>(), 1e6);
  const auto dtype = [&](const std::string& name) {
    auto v = ckpt->tensor(name);
    EXPECT_TRUE(v.is_ok()) << v.status().to_string();
    return v.is_ok() ? std::string(engine::dtype_name(v->dtype)) : std::string("?");
  };
  EXPECT_EQ(dtype("model.embed_tokens.weight"), "Q4_K");
  EXPECT_EQ(dtype("lm_head.weight"), "Q6_K");
  EXPECT_EQ(dtype("model.layers.0.self_attn.q_proj.weight"), "Q8_0");
  EXPECT_EQ(dtype("model.layers.0.self_attn.k_proj.weight"), "Q4_0");
  EXPECT_EQ(dtype("model.layers.1.self_attn.v_proj.weight"), "Q4_1");
  EXPECT_EQ(dtype("model.layers.1.self_attn.o_proj.weight"), "Q5_K");
  EXPECT_EQ(dtype("model.layers.0.mlp.experts.3.gate_proj.weight"), "Q4_K");
  EXPECT_EQ(dtype("model.layers.0.mlp.experts.3.up_proj.weight"), "Q5_K");
  EXPECT_EQ(dtype("model.layers.0.mlp.experts.3.down_proj.weight"), "Q6_K");
  EXPECT_EQ(dtype("model.layers.0.mlp.gate.weight"), "F32");
  EXPECT_EQ(dtype("model.layers.0.self_attn.q_norm.weight"), "F32");
  EXPECT_FALSE(ckpt->has("model.layers.0.mlp.experts.4.gate_proj.weight"));
  // Expert e of a stack starts e experts' bytes in, and they do not overlap.
  auto e0 = ckpt->tensor("model.layers.0.mlp.experts.0.down_proj.weight");
  auto e1 = ckpt->tensor("model.layers.0.mlp.experts.1.down_proj.weight");
  ASSERT_TRUE(e0.is_ok() && e1.is_ok());
  EXPECT_EQ(e0->shape, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(e1->data, e0->data + e0->nbytes);
  EXPECT_EQ(e0->nbytes, std::size_t(256) * 256 / 256 * 210);  // Q6_K: 210 bytes per 256 values
}

// Byte-for-byte copy of a fixture with one string replaced by another of the same length.
fs::path patched_copy(const fs::path& from, const std::string& find, const std::string& replace, const fs::path& dir) {
  std::string bytes = read_file(from);
  const std::size_t at = bytes.find(find);
  EXPECT_NE(at, std::string::npos) << find;
  if (at != std::string::npos) bytes.replace(at, find.size(), replace);
  const fs::path out = dir / from.filename();
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

TEST(GgufCheckpoint, UnknownArchitectureOrTensorIsAOneLineError) {
  TempDir tmp;
  const fs::path src = gguf_model("qwen3_moe-mixed");
  auto arch = engine::Checkpoint::open(patched_copy(src, "qwen3moe", "qwen9moe", tmp.path()));
  ASSERT_FALSE(arch.is_ok());
  EXPECT_EQ(arch.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(arch.status().message().find("'qwen9moe'"), std::string::npos) << arch.status().message();
  EXPECT_NE(arch.status().message().find("qwen3moe"), std::string::npos) << "lists what is supported";

  TempDir tmp2;
  auto tensor = engine::Checkpoint::open(patched_copy(src, "blk.1.ffn_norm", "blk.1.ffn_nurm", tmp2.path()));
  ASSERT_FALSE(tensor.is_ok());
  EXPECT_EQ(tensor.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(tensor.status().message().find("blk.1.ffn_nurm"), std::string::npos) << tensor.status().message();
  EXPECT_EQ(tensor.status().message().find('\n'), std::string::npos);
}

// A "llama" GGUF is Mixtral when it has experts; without them it is a dense Llama, which is not a
// MoE model: refused in one line rather than loaded as something else.
TEST(GgufCheckpoint, ADenseLlamaIsRefusedInOneLine) {
  auto dense = engine::Checkpoint::open(fs::path(FT_FIXTURES_DIR) / "gguf" / "q4_k.gguf");
  ASSERT_FALSE(dense.is_ok());
  EXPECT_EQ(dense.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(dense.status().message().find("dense"), std::string::npos) << dense.status().message();
  EXPECT_EQ(dense.status().message().find('\n'), std::string::npos);
}

TEST(GgufCheckpoint, TwoTensorsOfOneNameAreAnError) {
  TempDir tmp;
  auto ckpt = engine::Checkpoint::open(
      patched_copy(gguf_model("qwen3_moe-mixed"), "blk.1.attn_k_norm", "blk.1.attn_q_norm", tmp.path()));
  ASSERT_FALSE(ckpt.is_ok());
  EXPECT_NE(ckpt.status().message().find("attn_q_norm"), std::string::npos) << ckpt.status().message();
}

// The tests' random Qwen-MoE checkpoints (q/k/v/o biases, a dense layer, norm_topk_prob off, a
// gated shared expert for Qwen2-MoE) written as GGUF files with the same bytes: every config
// field and tensor must come back, so both load to the same model, logits equal bit for bit.
class GgufRoundTrip : public ::testing::TestWithParam<engine::ModelFamily> {};

TEST_P(GgufRoundTrip, TheSameWeightsFromGgufGiveTheSameLogits) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path() / "hf", tiny_spec(GetParam(), false)));
  gguf_from_hf::write(dir.path() / "hf", dir.path() / "model.gguf");
  for (const BackendKind backend : {BackendKind::kReference, BackendKind::kCpu}) {
    auto hf = load(dir.path() / "hf", backend);
    auto gguf = load(dir.path() / "model.gguf", backend);
    ASSERT_TRUE(hf && gguf);
    EXPECT_EQ(gguf->config().model_type, hf->config().model_type);
    const std::vector<int32_t> ids = {1, 77, 3, 200, 5, 9, 250, 0, 31, 31, 7};
    const std::vector<float> a = logits_of(*hf, ids), b = logits_of(*gguf, ids);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << engine::backend_name(backend);
  }
}

INSTANTIATE_TEST_SUITE_P(QwenMoe, GgufRoundTrip,
                         ::testing::Values(engine::ModelFamily::kQwen3Moe, engine::ModelFamily::kQwen2Moe),
                         [](const auto& info) { return engine::model_family_name(info.param); });

}  // namespace
}  // namespace ft::test

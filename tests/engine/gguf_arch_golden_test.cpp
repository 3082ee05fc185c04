// GGUF files of the golden models written by llama.cpp's own converter (tests/fixtures/gguf/arch/,
// made by scripts/goldens/make_gguf_arch_fixtures.py; bf16, so lossless): each architecture's names,
// layouts and metadata keys as the converter writes them (Mixtral's permuted q/k rows, GLM-4.5's
// post_attention_norm and router bias, gpt-oss's split gate/up stacks with their biases and sinks,
// OLMoE's whole-projection q/k norms, ERNIE 4.5's interleaved MoE layers and correction bias,
// DeepSeek-V3's and GLM-4.7-Flash's latent attention with kv_b_proj split in two, one half
// transposed, and YaRN's mscale_all_dim as a log multiplier; Qwen3-Next's and Qwen3.5's norms stored
// as 1 + w, A_log as -exp(A_log), Qwen3-Next's projections split and Qwen3.5's value heads reordered
// into tiled order) must read back as the model HF
// computed the family's golden logits from.
//   - the fp32 reference on the GGUF is within 1e-3 of HF at every position, greedy-identical;
//   - the CPU and CUDA runtimes on the GGUF are within 1e-2 of the reference routed alike (flips
//     of near-ties by rounding at most 5% of positions), and within 1e-3 of themselves on the
//     safetensors checkpoint up to the first position routed differently (the same model through
//     other kernels, adjacent rotary pairs instead of halves, gpt-oss's experts one by one instead of
//     transposed, an F32 router instead of bf16, rounds at the ulp and can flip a near-tie; measured
//     up to 7.2e-4).
#include <gtest/gtest.h>

#include <cstdlib>

#include "ft/engine/model.h"
#include "ft/engine/sampling.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using engine::BackendKind;

// The family's GGUF, decompressed once per process.
fs::path arch_gguf(const std::string& family) {
  static TempDir dir;
  const fs::path out = dir.path() / (family + ".gguf");
  if (fs::exists(out)) return out;
  const fs::path xz = fixture_dir(family).parent_path().parent_path() / "gguf" / "arch" / (family + ".gguf.xz");
  const std::string cmd = "xz -dc '" + xz.string() + "' > '" + out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << " (scripts/setup.sh installs xz-utils)";
  return out;
}

std::unique_ptr<engine::Model> load(const fs::path& path, BackendKind backend) {
  engine::LoadOptions o;
  o.backend = backend;
  o.deterministic = true;
  // The test holds two models at once: without a KV budget the first one's pool takes all the GPU has.
  o.kv_budget_bytes = 64ull << 20;
  auto m = engine::load_model(path, o);
  EXPECT_TRUE(m.is_ok()) << path << ": " << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

std::vector<float> logits_of(const engine::Model& m, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * std::size_t(m.vocab_size()));
  engine::SequenceState s = m.new_state();
  const Status st = m.forward(s, ids, out.data(), engine::LogitsMode::kAll);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out;
}

class GgufArch : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufArch, ReadsAsTheHfModelItWasConvertedFrom) {
  const std::string family = GetParam();
  auto gguf = load(arch_gguf(family), BackendKind::kReference);
  ASSERT_TRUE(gguf);
  // GLM-4.7-Flash is a DeepSeek-V3 to llama.cpp (arch deepseek2): it reads as one.
  EXPECT_EQ(engine::model_family_name(gguf->config().family), family == "glm4_moe_lite" ? "deepseek_v3" : family);
  const SafetensorsFile golden = SafetensorsFile::read(fixture_dir(family) / "golden.safetensors");
  const auto ids = golden.ids("input_ids");
  const auto want = golden.f32("logits");
  const std::size_t V = std::size_t(gguf->vocab_size()), T = ids.size();
  ASSERT_EQ(want.size(), T * V);
  const std::vector<float> got = logits_of(*gguf, ids);
  double worst = 0;
  for (std::size_t t = 0; t < T; ++t) worst = std::max(worst, rel_l2(&got[t * V], &want[t * V], V));
  EXPECT_LT(worst, 1e-3) << family << ": the worst position's relative L2 against HF";
  const auto want_greedy = golden.ids("greedy_ids");
  EXPECT_EQ(greedy_steps(*gguf, ids, want_greedy.size()), want_greedy) << family;
  std::printf("[ %s ] GGUF vs HF: worst position relative L2 %.2e\n", family.c_str(), worst);
}

// A runtime backend on the GGUF: at every position within 1e-2 of the fp32 reference on the same
// file routed as the runtime was (its bf16 products and KV; a near-tie the runtime's rounding sent
// elsewhere, counted, is at most 5% of the positions), and within 1e-3 of the same runtime on the
// safetensors checkpoint up to the first position the two files' runs routed differently.
void expect_same_runtime(const std::string& family, BackendKind backend) {
  auto gguf = load(arch_gguf(family), backend);
  auto hf = load(fixture_checkpoint(family), backend);
  auto ref = load(arch_gguf(family), BackendKind::kReference);
  ASSERT_TRUE(gguf && hf && ref);
  // The golden's tokens: the golden tests bound the runtimes' flips on the same input.
  const auto ids = SafetensorsFile::read(fixture_dir(family) / "golden.safetensors").ids("input_ids");
  const std::size_t T = ids.size(), V = std::size_t(hf->vocab_size());
  engine::RoutingTrace ta, tb, along;
  gguf->set_routing_trace(&ta);
  hf->set_routing_trace(&tb);
  const std::vector<float> a = logits_of(*gguf, ids), b = logits_of(*hf, ids);
  ASSERT_TRUE(ref->set_forced_routing(&ta));
  ref->set_routing_trace(&along);
  const std::vector<float> want = logits_of(*ref, ids);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t t = 0; t < T; ++t) worst = std::max(worst, rel_l2(&a[t * V], &want[t * V], V));
  const std::vector<bool> flipped = routing_flips(T, along.unforced, ta.calls, ta.top_k);
  const std::size_t root_flips = std::size_t(std::count(flipped.begin(), flipped.end(), true));
  EXPECT_LT(worst, 1e-2) << family << " on " << engine::backend_name(backend) << ", against the reference routed alike";
  EXPECT_LE(root_flips * 20, T) << family << ": " << root_flips << " positions' routing flipped by rounding";
  const std::vector<bool> diverged = routing_flips(T, ta.calls, tb.calls, ta.top_k);
  const std::size_t same = std::size_t(std::find(diverged.begin(), diverged.end(), true) - diverged.begin());
  const double rel = rel_l2(a.data(), b.data(), same * V);
  EXPECT_LT(rel, 1e-3) << family << " on " << engine::backend_name(backend) << ", against the safetensors";
  std::printf(
      "[ %s on %s ] GGUF: worst %.2e against the reference routed alike (%zu of %zu positions flipped); %.2e against "
      "the safetensors over the %zu positions routed alike\n",
      family.c_str(), engine::backend_name(backend), worst, root_flips, T, rel, same);
}

TEST_P(GgufArch, RuntimeOnTheGgufEqualsTheRuntimeOnTheSafetensors) {
  expect_same_runtime(GetParam(), BackendKind::kCpu);
}

TEST_P(GgufArch, CudaOnTheGgufEqualsCudaOnTheSafetensors) {
  FT_SKIP_UNLESS_RUNNABLE(BackendKind::kCuda);
  expect_same_runtime(GetParam(), BackendKind::kCuda);
}

INSTANTIATE_TEST_SUITE_P(Families, GgufArch,
                         ::testing::Values("mixtral", "glm4_moe", "gpt_oss", "olmoe", "ernie4_5_moe", "deepseek_v3",
                                           "glm4_moe_lite", "qwen3_next", "qwen3_5_moe"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ft::test

// GGUF files of the golden models written by llama.cpp's own converter (tests/fixtures/gguf/arch/,
// made by scripts/goldens/make_gguf_arch_fixtures.py; bf16, so lossless): each architecture's names,
// layouts and metadata keys as the converter writes them (Mixtral's permuted q/k rows, GLM-4.5's
// post_attention_norm and router bias, gpt-oss's split gate/up stacks with their biases and sinks,
// OLMoE's whole-projection q/k norms, ERNIE 4.5's interleaved MoE layers and correction bias,
// DeepSeek-V3's and GLM-4.7-Flash's latent attention with kv_b_proj split in two, one half
// transposed, and YaRN's mscale_all_dim as a log multiplier) must read back as the model HF
// computed the family's golden logits from.
//   - the fp32 reference on the GGUF is within 1e-3 of HF at every position, greedy-identical;
//   - the CPU runtime on the GGUF matches the CPU runtime on the safetensors checkpoint (1e-3: the
//     same model through other kernels, adjacent rotary pairs instead of halves, gpt-oss's experts
//     per expert instead of transposed, rounds its bf16 activations and KV differently at the ulp;
//     measured 2.6e-4).
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

TEST_P(GgufArch, RuntimeOnTheGgufEqualsTheRuntimeOnTheSafetensors) {
  const std::string family = GetParam();
  auto gguf = load(arch_gguf(family), BackendKind::kCpu);
  auto hf = load(fixture_checkpoint(family), BackendKind::kCpu);
  ASSERT_TRUE(gguf && hf);
  const auto ids = test_tokens(40, hf->vocab_size(), 3);
  const std::vector<float> a = logits_of(*gguf, ids), b = logits_of(*hf, ids);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LT(rel_l2(a.data(), b.data(), a.size()), 1e-3) << family;
}

INSTANTIATE_TEST_SUITE_P(Families, GgufArch,
                         ::testing::Values("mixtral", "glm4_moe", "gpt_oss", "olmoe", "ernie4_5_moe", "deepseek_v3",
                                           "glm4_moe_lite"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ft::test

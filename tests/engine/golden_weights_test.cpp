// The golden fixtures' weight recipe (tests/support/golden_weights.h) draws the same numbers as
// scripts/goldens/golden_weights.py: the expected values below were printed by the Python side
// (numpy), so a change on either side that would make the engine load other weights than HF
// computed its reference from fails here first.
#include "golden_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "ft/engine/model.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

TEST(GoldenWeights, TheGeneratorDrawsWhatThePythonSideDraws) {
  EXPECT_EQ(golden_tensor_seed("model.embed_tokens.weight", 0), 0xa88fd795d5c6d156ull);
  const std::uint64_t seed = golden_tensor_seed("model.embed_tokens.weight", 1234);
  const double want[] = {1.3822750386135854, 0.3395878958949798, 0.42386778089816723, -1.0030553364544077,
                         0.8883022770272625};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(golden_uniform(seed, std::uint64_t(i)), want[i]) << i;
}

TEST(GoldenWeights, AManifestBecomesTheCheckpointPythonWrote) {
  const std::string name = "model.layers.0.mlp.experts.3.down_proj.weight";
  const nlohmann::json manifest = {
      {"seed", 1234},
      {"tensors",
       {{{"name", name}, {"dtype", "BF16"}, {"shape", {3, 4}}, {"offset", 0.0}, {"scale", 0.125}},
        {{"name", "norm.weight"}, {"dtype", "F32"}, {"shape", {2, 3}}, {"offset", 1.0}, {"scale", 0.1}}}}};
  TempDir dir;
  ASSERT_TRUE(write_golden_weights(manifest, dir.path()).is_ok());
  const SafetensorsFile f = SafetensorsFile::read(dir.path() / "model.safetensors");
  ASSERT_TRUE(f.has(name) && f.has("norm.weight"));
  const auto& t = f.tensors.at(name);
  EXPECT_EQ(t.dtype, "BF16");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 4}));
  const std::uint16_t want_bf16[] = {0xbe42, 0xbe04, 0xbe4d, 0x3d8e, 0x3dcf, 0xbab2,
                                     0xbc0c, 0x3d7d, 0x3e54, 0x3e59, 0x3c35, 0x3dbb};
  ASSERT_EQ(t.data.size(), sizeof want_bf16);
  for (int i = 0; i < 12; ++i) {
    std::uint16_t got;
    std::memcpy(&got, t.data.data() + 2 * i, 2);
    EXPECT_EQ(got, want_bf16[i]) << i;
  }
  const std::vector<float> norm = f.f32("norm.weight");
  const float want_norm[] = {0.97817462682724f,   1.1497056484222412f, 0.8779079914093018f,
                             0.8879871368408203f, 0.9341830015182495f, 1.0354580879211426f};
  ASSERT_EQ(norm.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(norm[i], want_norm[i]) << i;
}

// DeepSeek-V4's hash-routing tables are kept as their values, I64 or I32, in the manifest's order.
TEST(GoldenWeights, IndexTablesAreWrittenAsTheirValues) {
  const nlohmann::json manifest = {{"seed", 1},
                                   {"tensors",
                                    {{{"name", "model.layers.0.ffn.gate.tid2eid"},
                                      {"dtype", "I64"},
                                      {"shape", {3, 2}},
                                      {"values", {2, 8, 10, 4, 0, 15}}},
                                     {{"name", "narrow"}, {"dtype", "I32"}, {"shape", {2}}, {"values", {-1, 7}}}}}};
  TempDir dir;
  ASSERT_TRUE(write_golden_weights(manifest, dir.path()).is_ok());
  const SafetensorsFile f = SafetensorsFile::read(dir.path() / "model.safetensors");
  const auto& wide = f.tensors.at("model.layers.0.ffn.gate.tid2eid");
  EXPECT_EQ(wide.dtype, "I64");
  EXPECT_EQ(wide.shape, (std::vector<int64_t>{3, 2}));
  std::vector<int64_t> got(6);
  ASSERT_EQ(wide.data.size(), 48u);
  std::memcpy(got.data(), wide.data.data(), 48);
  EXPECT_EQ(got, (std::vector<int64_t>{2, 8, 10, 4, 0, 15}));
  const auto& narrow = f.tensors.at("narrow");
  EXPECT_EQ(narrow.dtype, "I32");
  std::int32_t n[2];
  ASSERT_EQ(narrow.data.size(), 8u);
  std::memcpy(n, narrow.data.data(), 8);
  EXPECT_EQ(n[0], -1);
  EXPECT_EQ(n[1], 7);

  nlohmann::json short_list = manifest;
  short_list["tensors"][0]["values"] = {1, 2, 3};
  const Status st = write_golden_weights(short_list, dir.path());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("tid2eid"), std::string::npos) << st.message();
}

// The DeepSeek-V4 fixture (made ahead of its family) rebuilds with its hash tables: layer 0 routes
// every token to 4 distinct experts of 16, as the golden script drew them.
TEST(GoldenWeights, TheDeepseekV4FixtureRebuildsWithItsHashTables) {
  const std::filesystem::path dir = materialized_checkpoint(fixture_dir("deepseek_v4") / "checkpoint");
  const SafetensorsFile f = SafetensorsFile::read(dir / "model.safetensors");
  const auto& t = f.tensors.at("model.layers.0.ffn.gate.tid2eid");
  ASSERT_EQ(t.dtype, "I64");
  ASSERT_EQ(t.shape, (std::vector<int64_t>{1024, 4}));
  std::vector<int64_t> ids(1024 * 4);
  std::memcpy(ids.data(), t.data.data(), ids.size() * 8);
  for (std::size_t row = 0; row < 1024; ++row) {
    std::vector<int64_t> r(ids.begin() + std::ptrdiff_t(4 * row), ids.begin() + std::ptrdiff_t(4 * row + 4));
    std::sort(r.begin(), r.end());
    ASSERT_TRUE(r.front() >= 0 && r.back() < 16 && std::adjacent_find(r.begin(), r.end()) == r.end()) << row;
  }
  EXPECT_FALSE(f.has("model.layers.1.ffn.gate.tid2eid"));  // layer 1 routes by score
  EXPECT_TRUE(f.has("model.layers.1.ffn.gate.bias"));
}

TEST(GoldenWeights, AFixtureWithARecipeLoadsAsAModel) {
  // A tiny checkpoint's tensor list as a recipe, in a fixture-like directory without weights.
  TempDir written, fixture;
  ASSERT_TRUE(engine::write_random_checkpoint(written.path(), tiny_spec(engine::ModelFamily::kQwen3Moe, false)));
  const SafetensorsFile f = SafetensorsFile::read(written.path() / "model.safetensors");
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& [name, t] : f.tensors) {
    const bool matrix = t.shape.size() >= 2;
    tensors.push_back({{"name", name},
                       {"dtype", t.dtype},
                       {"shape", t.shape},
                       {"offset", matrix ? 0.0 : 1.0},
                       {"scale", matrix ? 1.0 / std::sqrt(double(t.shape.back())) : 0.1}});
  }
  std::filesystem::copy_file(written.path() / "config.json", fixture.path() / "config.json");
  std::ofstream(fixture.path() / "weights.json") << nlohmann::json{{"seed", 5}, {"tensors", tensors}}.dump();

  const std::filesystem::path dir = materialized_checkpoint(fixture.path());
  ASSERT_NE(dir, fixture.path());
  EXPECT_EQ(materialized_checkpoint(fixture.path()), dir) << "built once";
  EXPECT_EQ(SafetensorsFile::read(dir / "model.safetensors").tensors.size(), f.tensors.size());
  engine::LoadOptions o;
  o.backend = engine::BackendKind::kReference;
  auto m = engine::load_model(dir, o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  std::vector<float> logits(std::size_t((*m)->vocab_size()));
  engine::SequenceState s = (*m)->new_state();
  ASSERT_TRUE(
      (*m)->forward(s, test_tokens(8, (*m)->vocab_size(), 1), logits.data(), engine::LogitsMode::kLast).is_ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace ft::test

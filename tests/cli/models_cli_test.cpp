// Models where users keep them: a Hugging Face repo id resolved in a hub cache laid out as the hub
// client lays it out (refs/<branch> naming a commit, snapshots/<commit>/ of symlinks into
// blobs/), and `freetoken models` listing that cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ft/engine/random_checkpoint.h"
#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Moves every file of `checkpoint` into <repo>/blobs/<name-hash> and links it from
// <repo>/snapshots/<commit>/<name>, as the hub client does; returns the bytes moved.
std::uint64_t add_snapshot(const fs::path& repo, const fs::path& checkpoint, const std::string& commit) {
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  std::uint64_t bytes = 0;
  for (const auto& f : fs::directory_iterator(checkpoint)) {
    const std::string blob = std::to_string(std::hash<std::string>{}(commit + f.path().filename().string()));
    bytes += fs::file_size(f.path());
    fs::rename(f.path(), repo / "blobs" / blob);
    fs::create_symlink(fs::path("../../blobs") / blob, repo / "snapshots" / commit / f.path().filename());
  }
  return bytes;
}

class HubCache : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::RandomCheckpointSpec spec;
    spec.family = engine::ModelFamily::kQwen3Moe;
    spec.vocab_size = 256;
    spec.hidden_size = 32;
    spec.num_layers = 2;
    spec.head_dim = 16;
    const fs::path repo = hub() / "models--acme--tiny-moe";
    // An older snapshot (other weights) and the one refs/main names.
    spec.seed = 1;
    ASSERT_TRUE(engine::write_random_checkpoint(dir_.path() / "old", spec));
    add_snapshot(repo, dir_.path() / "old", kOld);
    spec.seed = 2;
    ASSERT_TRUE(engine::write_random_checkpoint(dir_.path() / "new", spec));
    bytes_ = add_snapshot(repo, dir_.path() / "new", kMain);
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << kMain;
    // A repo of an architecture this build does not run.
    const fs::path other = hub() / "models--meta--llama-ish" / "snapshots" / kOld;
    fs::create_directories(other);
    std::ofstream(other / "config.json") << R"({"model_type": "llama", "torch_dtype": "bfloat16"})";
    // An FP8 release names its format in quantization_config (torch_dtype is the unquantized tensors').
    const fs::path fp8 = hub() / "models--qwen--moe-fp8" / "snapshots" / kOld;
    fs::create_directories(fp8);
    std::ofstream(fp8 / "config.json")
        << R"({"model_type": "qwen3_moe", "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})";
  }
  fs::path hub() const { return dir_.path() / "hub"; }
  // The hub cache under test, and no Ollama store or GGUF folders (a user's own would add rows).
  std::vector<std::pair<std::string, std::string>> env() const {
    return {{"HF_HUB_CACHE", hub().string()},
            {"OLLAMA_MODELS", (hub() / "no-ollama").string()},
            {"HOME", (hub() / "no-home").string()},
            {"LLAMA_CACHE", (hub() / "no-llama").string()}};
  }

  static constexpr const char* kOld = "1111111111111111111111111111111111111111";
  static constexpr const char* kMain = "2222222222222222222222222222222222222222";
  TempDir dir_;
  std::uint64_t bytes_ = 0;
};

TEST_F(HubCache, ARepoIdRunsTheSnapshotRefsMainNamesAndARevisionPicksAnother) {
  const auto run = [&](const std::string& model, const std::string& out) {
    return run_freetoken({"logits", "--model", model, "--tokens", "1,2,3", "--out", (dir_.path() / out).string(),
                          "--device", "cpu"},
                         env());
  };
  const CommandResult main_r = run("acme/tiny-moe", "main.safetensors");
  ASSERT_EQ(main_r.exit_code, 0) << main_r.err;
  const CommandResult pinned = run("acme/tiny-moe@" + std::string(kMain), "pinned.safetensors");
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  const CommandResult old = run("acme/tiny-moe@" + std::string(kOld), "old.safetensors");
  ASSERT_EQ(old.exit_code, 0) << old.err;
  EXPECT_EQ(read_file(dir_.path() / "main.safetensors"), read_file(dir_.path() / "pinned.safetensors"));
  EXPECT_NE(read_file(dir_.path() / "main.safetensors"), read_file(dir_.path() / "old.safetensors"))
      << "the old snapshot has other weights";

  const CommandResult missing = run("acme/not-here", "x.safetensors");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nothing is downloaded"), std::string::npos) << missing.err;
  const CommandResult bad_rev = run("acme/tiny-moe@nope", "x.safetensors");
  EXPECT_EQ(bad_rev.exit_code, 2);
  EXPECT_NE(bad_rev.err.find("no branch or snapshot 'nope'"), std::string::npos) << bad_rev.err;
}

TEST_F(HubCache, ModelsListsWhatTheCacheHoldsAndWhetherItRuns) {
  const CommandResult r = run_freetoken({"models", "--json"}, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json list = json::parse(r.out);
  ASSERT_EQ(list.size(), 3u) << r.out;
  const json& tiny = list[0];
  EXPECT_EQ(tiny["name"], "acme/tiny-moe");
  EXPECT_EQ(tiny["revision"], kMain);
  EXPECT_EQ(tiny["architecture"], "qwen3_moe");
  EXPECT_EQ(tiny["supported"], true);
  EXPECT_EQ(tiny["bytes"].get<std::uint64_t>(), bytes_) << "sizes are the blobs' behind the links";
  EXPECT_NE(tiny["placement"].get<std::string>().find("GiB"), std::string::npos);
  const json& llama = list[1];
  EXPECT_EQ(llama["name"], "meta/llama-ish");
  EXPECT_EQ(llama["supported"], false);
  EXPECT_EQ(llama["dtype"], "bfloat16");
  EXPECT_NE(llama["support"].get<std::string>().find("llama"), std::string::npos) << llama["support"];
  EXPECT_EQ(list[2]["name"], "qwen/moe-fp8");
  EXPECT_EQ(list[2]["dtype"], "fp8");

  const CommandResult table = run_freetoken({"models"}, env());
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("acme/tiny-moe"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("qwen3_moe"), std::string::npos) << table.out;
}

TEST(HubCacheFamilies, ModelsReportsACheckpointOfEveryFamilyAsSupported) {
  TempDir dir;
  const fs::path hub = dir.path() / "hub";
  for (engine::ModelFamily family : engine::model_families()) {
    engine::RandomCheckpointSpec spec;
    spec.family = family;
    spec.vocab_size = 64;
    spec.hidden_size = 32;
    spec.num_layers = 2;
    spec.head_dim = 8;  // hidden / heads, as OLMoE requires
    if (family == engine::ModelFamily::kLlama4Text) spec.top_k = 1;  // the releases' top-1, all the engine runs
    if (family == engine::ModelFamily::kDeepseekV32 || family == engine::ModelFamily::kGlmMoeDsa) {
      spec.q_lora_rank = 16;  // the indexer's queries come from the q LoRA latent
    }
    const std::string name = engine::model_family_name(family);
    ASSERT_TRUE(engine::write_random_checkpoint(dir.path() / name, spec));
    add_snapshot(hub / ("models--acme--" + name), dir.path() / name, "3333333333333333333333333333333333333333");
  }
  const CommandResult r = run_freetoken({"models", "--json"}, {{"HF_HUB_CACHE", hub.string()},
                                                               {"OLLAMA_MODELS", (hub / "none").string()},
                                                               {"HOME", (hub / "none").string()},
                                                               {"LLAMA_CACHE", (hub / "none").string()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json list = json::parse(r.out);
  ASSERT_EQ(list.size(), engine::model_families().size()) << r.out;
  for (const json& m : list) {
    const std::string name = m["name"].get<std::string>();
    EXPECT_EQ("acme/" + m["architecture"].get<std::string>(), name);
    EXPECT_EQ(m["supported"], true) << name << ": " << m["support"];
  }
}

// DeepSeek-V4's config as HF 5.17 saves it (the golden fixture's: nested ropes, compress_rates,
// mlp_layer_types) is listed as run.
TEST(HubCacheFamilies, ModelsReportsDeepseekV4AsSupported) {
  TempDir dir;
  const fs::path hub = dir.path() / "hub";
  const fs::path snapshot =
      hub / "models--deepseek-ai--v4-tiny" / "snapshots" / "4444444444444444444444444444444444444444";
  fs::create_directories(snapshot);
  fs::copy_file(fs::path(FT_FIXTURES_DIR) / "models" / "deepseek_v4" / "checkpoint" / "config.json",
                snapshot / "config.json");
  const CommandResult r = run_freetoken({"models", "--json"}, {{"HF_HUB_CACHE", hub.string()},
                                                               {"OLLAMA_MODELS", (hub / "none").string()},
                                                               {"HOME", (hub / "none").string()},
                                                               {"LLAMA_CACHE", (hub / "none").string()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json list = json::parse(r.out);
  ASSERT_EQ(list.size(), 1u) << r.out;
  EXPECT_EQ(list[0]["architecture"], "deepseek_v4");
  EXPECT_EQ(list[0]["supported"], true) << list[0]["support"];
}

}  // namespace
}  // namespace ft::test

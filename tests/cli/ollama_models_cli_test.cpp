// Models `ollama pull` stored: `--model ollama:NAME[:TAG]` reads the manifest under $OLLAMA_MODELS
// and runs the GGUF blob it names in place (a blob has no .gguf name: it is known by its magic);
// `freetoken models` lists them under that name, and the loose GGUF files llama.cpp and LM Studio
// keep under theirs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;

// An Ollama store holding one model, NAME:TAG, whose model layer is `gguf` (copied as its blob).
class OllamaStore : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path gguf = fs::path(FT_FIXTURES_DIR) / "gguf/models/qwen3_moe-mixed.gguf";
    const std::string hex(64, 'a');
    fs::create_directories(root() / "blobs");
    fs::copy_file(gguf, root() / "blobs" / ("sha256-" + hex));
    const fs::path manifest = root() / "manifests/registry.ollama.ai/library/tiny-moe/q4";
    fs::create_directories(manifest.parent_path());
    nlohmann::json m = {{"schemaVersion", 2},
                        {"layers",
                         {{{"mediaType", "application/vnd.ollama.image.template"}, {"digest", "sha256:" + hex}},
                          {{"mediaType", "application/vnd.ollama.image.model"}, {"digest", "sha256:" + hex}}}}};
    std::ofstream(manifest) << m.dump();
  }
  fs::path root() const { return dir_.path() / "models"; }
  std::vector<std::pair<std::string, std::string>> env() const { return {{"OLLAMA_MODELS", root().string()}}; }
  CommandResult logits(const std::string& model, const fs::path& out) const {
    return run_freetoken({"logits", "--model", model, "--tokens", "1,2,3,500", "--out", out.string()}, env());
  }
  TempDir dir_;
};

TEST_F(OllamaStore, AnOllamaNameRunsTheBlobItsManifestNames) {
  const CommandResult by_name = logits("ollama:tiny-moe:q4", dir_.path() / "a.safetensors");
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  const CommandResult by_path =
      logits((fs::path(FT_FIXTURES_DIR) / "gguf/models/qwen3_moe-mixed.gguf").string(), dir_.path() / "b.safetensors");
  ASSERT_EQ(by_path.exit_code, 0) << by_path.err;
  EXPECT_EQ(read_file(dir_.path() / "a.safetensors"), read_file(dir_.path() / "b.safetensors"));
  // The full name means the same model.
  EXPECT_EQ(logits("ollama:registry.ollama.ai/library/tiny-moe:q4", dir_.path() / "c.safetensors").exit_code, 0);
}

TEST_F(OllamaStore, AMissingModelOrBlobIsAOneLineError) {
  const CommandResult missing = logits("ollama:tiny-moe", dir_.path() / "x.safetensors");  // tag latest: absent
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no manifest"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("library/tiny-moe/latest"), std::string::npos) << missing.err;
  fs::remove(root() / "blobs" / ("sha256-" + std::string(64, 'a')));
  const CommandResult no_blob = logits("ollama:tiny-moe:q4", dir_.path() / "y.safetensors");
  EXPECT_EQ(no_blob.exit_code, 2);
  EXPECT_NE(no_blob.err.find("missing or not a GGUF file"), std::string::npos) << no_blob.err;
}

TEST_F(OllamaStore, ModelsListsItUnderTheNameModelTakes) {
  TempDir hub;
  auto env_both = env();
  env_both.push_back({"HF_HUB_CACHE", hub.path().string()});
  env_both.push_back({"HOME", hub.path().string()});  // no llama.cpp or LM Studio folders
  env_both.push_back({"LLAMA_CACHE", (hub.path() / "none").string()});
  const CommandResult r = run_freetoken({"models", "--json"}, env_both);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto list = nlohmann::json::parse(r.out);
  ASSERT_EQ(list.size(), 1u) << r.out;
  EXPECT_EQ(list[0]["name"], "ollama:tiny-moe:q4");
  EXPECT_EQ(list[0]["architecture"], "qwen3_moe");
  EXPECT_EQ(list[0]["dtype"], "Q4_K");
  EXPECT_EQ(list[0]["supported"], true) << list[0]["support"];
  EXPECT_EQ(list[0]["bytes"], fs::file_size(fs::path(FT_FIXTURES_DIR) / "gguf/models/qwen3_moe-mixed.gguf"));
  const CommandResult table = run_freetoken({"models"}, env_both);
  EXPECT_NE(table.out.find("ollama:tiny-moe:q4"), std::string::npos) << table.out;
}

// Loose GGUF files: llama.cpp's cache ($LLAMA_CACHE), LM Studio's folder under $HOME, and --dir;
// a split model is one row (its first part, the parts' bytes), and a file that is not GGUF is not
// a row. Each row is named as --model takes it.
TEST(GgufFolders, ModelsListsTheFilesLlamaCppAndLmStudioKeep) {
  TempDir home;
  const fs::path gguf = fs::path(FT_FIXTURES_DIR) / "gguf/models/qwen3_moe-mixed.gguf";
  const std::uint64_t size = fs::file_size(gguf);
  const fs::path llama = home.path() / "llama", studio = home.path() / ".lmstudio/models/acme/tiny-GGUF",
                 mine = home.path() / "mine/nested";
  for (const fs::path& d : {llama, studio, mine}) fs::create_directories(d);
  fs::copy_file(gguf, llama / "acme_tiny-GGUF_tiny-Q4_K_M.gguf");
  fs::copy_file(gguf, studio / "tiny-00001-of-00002.gguf");
  fs::copy_file(gguf, studio / "tiny-00002-of-00002.gguf");
  fs::copy_file(gguf, mine / "q4_0.gguf");
  std::ofstream(mine / "notes.gguf") << "not a model";
  const std::vector<std::pair<std::string, std::string>> env = {{"HOME", home.path().string()},
                                                                {"LLAMA_CACHE", llama.string()},
                                                                {"HF_HUB_CACHE", (home.path() / "hub").string()},
                                                                {"OLLAMA_MODELS", (home.path() / "ollama").string()}};
  const CommandResult r = run_freetoken({"models", "--json", "--dir", (home.path() / "mine").string()}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto list = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& m : list) by_name[m["name"].get<std::string>()] = m;
  ASSERT_EQ(by_name.size(), 3u) << r.out;
  const std::string cached = (llama / "acme_tiny-GGUF_tiny-Q4_K_M.gguf").string(),
                    split = (studio / "tiny-00001-of-00002.gguf").string(), own = (mine / "q4_0.gguf").string();
  ASSERT_TRUE(by_name.contains(cached) && by_name.contains(split) && by_name.contains(own)) << r.out;
  EXPECT_EQ(by_name[cached]["bytes"], size);
  EXPECT_EQ(by_name[split]["bytes"], 2 * size);
  for (const auto& [name, m] : by_name) {
    EXPECT_EQ(m["architecture"], "qwen3_moe") << name;
    EXPECT_EQ(m["supported"], true) << name << ": " << m["support"];
  }
  // The name runs as listed.
  const CommandResult run = run_freetoken(
      {"logits", "--model", cached, "--tokens", "1,2", "--out", (home.path() / "l.safetensors").string()}, env);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const CommandResult table = run_freetoken({"models"}, env);
  EXPECT_NE(table.out.find(split), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(llama.string()), std::string::npos) << table.out;
}

}  // namespace
}  // namespace ft::test

// Models `ollama pull` stored: `--model ollama:NAME[:TAG]` reads the manifest under $OLLAMA_MODELS
// and runs the GGUF blob it names in place (a blob has no .gguf name: it is known by its magic);
// `freetoken models` lists them under that name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

}  // namespace
}  // namespace ft::test

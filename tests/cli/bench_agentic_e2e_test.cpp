// `freetoken bench agentic` on the demo model: Codex's two captured turns replayed through a real
// `serve`, each beside the same prompt as a new conversation. The replayed second turn restores
// its prefix, its fresh twin only the agent's shared system prompt and tools; both are the same
// length, both are timed, and the report carries the ratio of their decode rates.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace ft::test {
namespace {

using nlohmann::json;

TEST(BenchAgenticE2E, ReplayedTurnsAndTheirFreshTwinsAreTimedSideBySide) {
  if (!have_qwen3_tokenizer()) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
  TempDir work;
  const auto model = work.path() / "demo";
  const CommandResult made =
      run_freetoken({"make-demo-model", model.string(), "--tokenizer-from", qwen3_tokenizer_dir().string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;

  const CommandResult r =
      run_freetoken({"bench", "agentic", "--model", model.string(), "--max-tokens", "16", "--json", "--dir",
                     work.path().string(), "--traffic", (std::filesystem::path(FT_FIXTURES_DIR) / "traffic").string(),
                     "--conversations", "codex-multiturn", "--", "--kv-budget", "1"});
  const json report = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << report.dump(2) << r.err;
  EXPECT_EQ(report["failed"], 0) << report.dump(2);
  EXPECT_EQ(report["serve_exit_code"], 0);

  const json& turns = report["turns"];
  ASSERT_EQ(turns.size(), 2u) << report.dump(2);
  for (const json& t : turns) {
    for (const char* run : {"replay", "fresh"}) {
      EXPECT_TRUE(t[run]["completed"].get<bool>()) << t.dump(2);
      EXPECT_EQ(t[run]["output_tokens"], 16) << t.dump(2);  // random weights do not stop early
      EXPECT_GT(t[run]["tok_s"].get<double>(), 0) << t.dump(2);
      EXPECT_GT(t[run]["engine_decode_seconds"].get<double>(), 0) << t.dump(2);
    }
    // The same prompt but for the session tag in the first user message.
    const int replay_len = t["replay"]["prompt_tokens"], fresh_len = t["fresh"]["prompt_tokens"];
    EXPECT_LE(std::abs(replay_len - fresh_len), 8) << t.dump(2);
  }
  // The second turn restores the first turn's prompt; its twin, a conversation of its own, only
  // the part every session of the agent shares.
  const json& second = turns[1];
  EXPECT_GT(second["replay"]["cached_tokens"].get<int>(), second["fresh"]["cached_tokens"].get<int>())
      << second.dump(2);
  EXPECT_GT(second["replay"]["cached_tokens"].get<int>(), second["replay"]["prompt_tokens"].get<int>() / 2);

  EXPECT_EQ(report["timed"], 2);
  EXPECT_GT(report["replay_tok_s"].get<double>(), 0);
  EXPECT_GT(report["fresh_tok_s"].get<double>(), 0);
  EXPECT_NEAR(report["ratio"].get<double>(), report["replay_tok_s"].get<double>() / report["fresh_tok_s"].get<double>(),
              1e-9);
}

// On the host the RAM tier's checkpoints are KV pages of the engine's pool. With a KV budget of
// ~16k tokens, OpenCode's and Codex's turns (6-9k tokens each, every one checkpointed) need pages
// the checkpoints hold: the engine takes them back from the RAM tier instead of failing requests
// with "KV budget exhausted" (6 of 12 requests failed so before).
TEST(BenchAgenticE2E, RequestsTakeKvPagesBackFromCheckpointsWhenTheBudgetIsShort) {
  if (!have_qwen3_tokenizer()) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
  TempDir work;
  const auto model = work.path() / "demo";
  ASSERT_EQ(
      run_freetoken({"make-demo-model", model.string(), "--tokenizer-from", qwen3_tokenizer_dir().string()}).exit_code,
      0);
  const CommandResult r = run_freetoken(
      {"bench", "agentic", "--model", model.string(), "--max-tokens", "16", "--json", "--dir", work.path().string(),
       "--traffic", (std::filesystem::path(FT_FIXTURES_DIR) / "traffic").string(), "--conversations",
       "opencode-multiturn,codex-multiturn", "--", "--kv-budget", "0.016", "--checkpoint-ram-gb", "4"});
  const json report = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out << r.err;
  EXPECT_EQ(report["failed"], 0) << report.dump(2);
  EXPECT_EQ(report["timed"], 6) << report.dump(2);
}

TEST(BenchAgenticE2E, TooFewTokensOutIsRefusedWithOneLine) {
  const CommandResult r = run_freetoken({"bench", "agentic", "--max-tokens", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-tokens"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ft::test

// `freetoken bench load` in small: a few sessions of replayed agent traffic through a real `serve`
// on the demo model while its engine is SIGKILLed every few seconds. Every request completes or is
// retried to completion, every answer equals the no-cache server's, the store verifies, and the
// report carries its figures.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace ft::test {
namespace {

using nlohmann::json;

TEST(BenchLoadE2E, SessionsSurviveEngineKillsWithTheNoCacheAnswers) {
  if (!have_qwen3_tokenizer()) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
  TempDir work;
  const auto model = work.path() / "demo";
  const CommandResult made =
      run_freetoken({"make-demo-model", model.string(), "--tokenizer-from", qwen3_tokenizer_dir().string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;

  // Two of the shorter captures (OpenCode's chat completions, Codex's responses) in two variants:
  // every session a conversation of its own, and a no-cache reference pass of twelve requests.
  const CommandResult r = run_freetoken({"bench",
                                         "load",
                                         "--model",
                                         model.string(),
                                         "--sessions",
                                         "4",
                                         "--variants",
                                         "2",
                                         "--seconds",
                                         "20",
                                         "--chaos-kill-every",
                                         "8",
                                         "--check-outputs",
                                         "--json",
                                         "--progress-every",
                                         "5",
                                         "--dir",
                                         work.path().string(),
                                         "--traffic",
                                         (std::filesystem::path(FT_FIXTURES_DIR) / "traffic").string(),
                                         "--conversations",
                                         "opencode-multiturn,codex-multiturn",
                                         "--",
                                         "--kv-budget",
                                         "1"});
  const json report = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << report.dump(2) << r.err;

  const json& requests = report["requests"];
  EXPECT_GT(requests["completed"].get<int>(), 0) << report.dump(2);
  EXPECT_EQ(requests["failed"], 0) << report.dump(2);
  EXPECT_EQ(requests["wrong_output"], 0) << report.dump(2);
  EXPECT_EQ(requests["compared"], requests["completed"]);
  EXPECT_GT(requests["answered"].get<int>(), 0);  // the answers compared are not all empty
  EXPECT_GE(report["engine_kills"].get<int>(), 1);
  EXPECT_GT(report["engine_processes"].get<int>(), 1);  // serve brought it back
  EXPECT_GT(report["output_tokens"].get<int>(), 0);
  EXPECT_GT(report["tok_s"].get<double>(), 0);
  EXPECT_GT(report["ttft_seconds"]["p50"].get<double>(), 0);
  EXPECT_GE(report["ttft_seconds"]["p99"].get<double>(), report["ttft_seconds"]["p50"].get<double>());
  EXPECT_GT(report["cached_tokens"].get<int>(), 0);  // later turns restored their prefix
  EXPECT_GT(report["rss"]["proxy"]["end_mib"].get<double>(), 0);
  EXPECT_GT(report["rss"]["engine"]["end_mib"].get<double>(), 0);
  EXPECT_EQ(report["serve_exit_code"], 0);
  EXPECT_EQ(report["verify"]["exit_code"], 0) << report["verify"].dump();
  EXPECT_EQ(report["verify"]["report"]["corrupt"], 0);
  EXPECT_TRUE(report["pass"].get<bool>());
}

TEST(BenchLoadE2E, BadFlagsAreRefusedWithOneLine) {
  const CommandResult r = run_freetoken({"bench", "load", "--sessions", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sessions"), std::string::npos) << r.err;
  const CommandResult chaos =
      run_freetoken({"bench", "load", "--url", "http://127.0.0.1:9", "--chaos-kill-every", "5"});
  EXPECT_EQ(chaos.exit_code, 2);
  EXPECT_NE(chaos.err.find("--serve-pid"), std::string::npos) << chaos.err;
}

}  // namespace
}  // namespace ft::test

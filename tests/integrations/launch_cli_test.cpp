// `freetoken launch` through the real binary: --dry-run prints the plan as a script and changes
// nothing, arguments after "--" reach the agent verbatim, and a missing server is a clear error.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;

// Puts a stand-in for every agent first on PATH (inherited by run_freetoken), so the dry run finds
// a program even where scripts/setup.sh has not installed the real ones.
class LaunchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"claude", "opencode", "openclaw", "codex"}) {
      const fs::path p = fake_bin_.path() / name;
      std::ofstream(p) << "#!/bin/sh\nexit 0\n";
      fs::permissions(p, fs::perms::owner_all);
    }
    const char* path = std::getenv("PATH");
    saved_path_ = path ? path : "";
    setenv("PATH", (fake_bin_.path().string() + ":" + saved_path_).c_str(), 1);
  }
  void TearDown() override { setenv("PATH", saved_path_.c_str(), 1); }

  TempDir fake_bin_, work_;
  std::string saved_path_;
};

TEST_F(LaunchCli, HelpListsLaunch) {
  auto r = run_freetoken({"--help"});
  EXPECT_NE(r.out.find("launch"), std::string::npos);
  r = run_freetoken({"launch", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--dry-run"), std::string::npos);
}

TEST_F(LaunchCli, DryRunPrintsTheScriptAndWritesNothing) {
  const fs::path dir = work_.path() / "agents/opencode";
  auto r = run_freetoken({"launch", "opencode", "--dry-run", "--port", "4321", "--model", "m1", "--config-dir",
                          dir.string(), "--max-output-tokens", "64", "--", "run", "hello world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mkdir -p '" + dir.string() + "'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cat > '" + (dir / "opencode.json").string() + "' <<'FREETOKEN_EOF'\n"), std::string::npos);
  EXPECT_NE(r.out.find("\"baseURL\": \"http://127.0.0.1:4321/v1\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"output\": 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("export OPENCODE_CONFIG='" + (dir / "opencode.json").string() + "'\n"), std::string::npos);
  EXPECT_NE(r.out.find("' 'run' 'hello world'\n"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(work_.path() / "agents")) << "a dry run must not write";
}

TEST_F(LaunchCli, ArgumentsAfterDoubleDashPassThroughVerbatim) {
  auto r = run_freetoken({"launch", "claude", "--dry-run", "--model", "m1", "--", "-p", "hi there", "--allowedTools",
                          "Bash", "--help", "--", "--port"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Usage:"), std::string::npos) << "--help after -- belongs to the agent";
  EXPECT_NE(r.out.find("' '-p' 'hi there' '--allowedTools' 'Bash' '--help' '--' '--port'\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("export ANTHROPIC_MODEL='m1'\n"), std::string::npos) << r.out;
}

TEST_F(LaunchCli, DoubleDashStillRejectedByCommandsWithoutPassThrough) {
  auto r = run_freetoken({"version", "--", "x"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(LaunchCli, DryRunWithoutModelOrServerUsesTheDemoModelName) {
  auto r = run_freetoken({"launch", "codex", "--dry-run", "--port", std::to_string(unused_loopback_port()), "--config-dir",
                          (work_.path() / "codex").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# model 'freetoken-demo' (from no server answered"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model = \"freetoken-demo\"\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("export CODEX_HOME='" + (work_.path() / "codex").string() + "'\n"), std::string::npos);
}

TEST_F(LaunchCli, NoServerIsAClearErrorNamingServe) {
  const int port = unused_loopback_port();
  auto r = run_freetoken({"launch", "claude", "--port", std::to_string(port), "--model", "m1",
                          "--config-dir", (work_.path() / "c").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no FreeToken server answers at http://127.0.0.1:" + std::to_string(port) + "/health"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("freetoken serve --port " + std::to_string(port)), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work_.path() / "c"));
}

TEST_F(LaunchCli, UnknownOrMissingAgentExitsTwo) {
  auto r = run_freetoken({"launch", "cursor", "--dry-run"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown agent 'cursor'"), std::string::npos) << r.err;
  r = run_freetoken({"launch", "--dry-run"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("claude|opencode|openclaw|codex"), std::string::npos) << r.err;
}

TEST_F(LaunchCli, ABadScopeExitsTwoAndAGoodOneReachesThePlan) {
  auto r = run_freetoken({"launch", "claude", "--dry-run", "--scope", "a/b"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("X-FreeToken-Scope must be"), std::string::npos) << r.err;
  r = run_freetoken({"launch", "claude", "--dry-run", "--scope", "session-7"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("X-FreeToken-Scope: session-7"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ft::test

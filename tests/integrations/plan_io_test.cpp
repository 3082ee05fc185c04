// Carrying out a plan: the --dry-run script really does what launching does, and the files are
// written whole, owner-only, with their parents.
#include "ft/integrations/plan_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "test_support.h"

namespace ft::integrations {
namespace {

namespace fs = std::filesystem;

std::string run_shell(const std::string& script) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("/bin/sh -c " + shell_quote(script)).c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  for (size_t n; p && (n = fread(buf, 1, sizeof buf, p.get())) > 0;) out.append(buf, n);
  return out;
}

TEST(PlanIo, ShellQuoteSurvivesTheShell) {
  for (std::string s : {"plain", "two words", "it's", "$HOME `x` \"q\" \\", "", "a\nb"})
    EXPECT_EQ(run_shell("printf %s " + shell_quote(s)), s);
}

TEST(PlanIo, DescribedPlanIsTheScriptThatLaunches) {
  test::TempDir dir;
  LaunchPlan plan;
  plan.files = {{dir.path() / "a/b/cfg.json", "{\"x\": 'y'}\n"}, {dir.path() / "c.toml", "no newline"}};
  plan.set_env = {{"FT_PLAN_TEST_A", "it's $HOME"}};
  plan.unset_env = {"FT_PLAN_TEST_B"};
  plan.argv = {"env"};
  const std::string script = describe_plan(plan, "/usr/bin/env");
  EXPECT_NE(script.find("exec '/usr/bin/env'\n"), std::string::npos) << script;

  const std::string env_out = run_shell("FT_PLAN_TEST_B=1; export FT_PLAN_TEST_B; " + script);
  EXPECT_NE(env_out.find("FT_PLAN_TEST_A=it's $HOME\n"), std::string::npos) << env_out;
  EXPECT_EQ(env_out.find("FT_PLAN_TEST_B="), std::string::npos) << env_out;
  EXPECT_EQ(test::read_file(dir.path() / "a/b/cfg.json"), "{\"x\": 'y'}\n");
  EXPECT_EQ(test::read_file(dir.path() / "c.toml"), "no newline\n");  // a here-document ends its last line
}

TEST(PlanIo, WritesFilesWithParentsOwnerOnlyAndReplacesOldOnes) {
  test::TempDir dir;
  const fs::path path = dir.path() / "agents/opencode/opencode.json";
  LaunchPlan plan;
  plan.files = {{path, "first"}};
  ASSERT_TRUE(write_plan_files(plan));
  plan.files[0].content = "second";
  ASSERT_TRUE(write_plan_files(plan));
  EXPECT_EQ(test::read_file(path), "second");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // the file may hold the API key
  EXPECT_EQ(std::distance(fs::directory_iterator(path.parent_path()), fs::directory_iterator()), 1);  // no temp left
}

TEST(PlanIo, UnwritableDirectoryIsAnError) {
  test::TempDir dir;
  const fs::path blocker = dir.path() / "file";
  { std::FILE* f = std::fopen(blocker.c_str(), "w"); std::fclose(f); }
  LaunchPlan plan;
  plan.files = {{blocker / "sub/cfg.json", "x"}};
  Status s = write_plan_files(plan);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find(blocker.string()), std::string::npos) << s.message();
}

TEST(PlanIo, AppliesEnvironment) {
  setenv("FT_PLAN_TEST_GONE", "1", 1);
  LaunchPlan plan;
  plan.set_env = {{"FT_PLAN_TEST_SET", "v"}};
  plan.unset_env = {"FT_PLAN_TEST_GONE"};
  apply_plan_env(plan);
  EXPECT_STREQ(std::getenv("FT_PLAN_TEST_SET"), "v");
  EXPECT_EQ(std::getenv("FT_PLAN_TEST_GONE"), nullptr);
  unsetenv("FT_PLAN_TEST_SET");
}

}  // namespace
}  // namespace ft::integrations

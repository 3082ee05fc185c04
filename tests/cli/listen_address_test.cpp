// Listening beyond loopback is a decision: the API server needs a key (or says it goes without),
// the engine, which has no authentication, an explicit --allow-remote. Refused with one line, exit 2.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_support.h"

namespace ft::test {
namespace {

void expect_refused(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ListenAddress, ServeAndProxyBeyondLoopbackNeedAKey) {
  TempDir dir;  // any directory: the refusal comes before the model is read
  expect_refused(run_freetoken({"serve", "--model", dir.path().string(), "--host", "0.0.0.0", "--port", "0"}),
                 "listens beyond this machine: set --api-key");
  expect_refused(run_freetoken({"proxy", "--engine", "127.0.0.1:9", "--model", dir.path().string(), "--host", "0.0.0.0",
                                "--port", "0"}),
                 "listens beyond this machine");
}

TEST(ListenAddress, TheEngineBeyondLoopbackNeedsAllowRemote) {
  expect_refused(run_freetoken({"engine", "--host", "0.0.0.0", "--port", "0", "--no-store"}),
                 "the engine has no authentication");
}

}  // namespace
}  // namespace ft::test

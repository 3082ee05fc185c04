// Model-name matching: glob patterns and the transparent / strict policies.
#include <gtest/gtest.h>

#include "../../proxy/src/model_names.h"

namespace ft::proxy {
namespace {

TEST(GlobMatch, StarAndQuestionMark) {
  EXPECT_TRUE(glob_match("claude-*", "claude-opus-4-5"));
  EXPECT_TRUE(glob_match("claude-*-4-5", "claude-haiku-4-5"));
  EXPECT_FALSE(glob_match("claude-*-4-5", "claude-haiku-4-6"));
  EXPECT_TRUE(glob_match("gpt-?", "gpt-5"));
  EXPECT_FALSE(glob_match("gpt-?", "gpt-55"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("exact", "exact"));
  EXPECT_FALSE(glob_match("exact", "exactly"));
  EXPECT_TRUE(glob_match("a*b*c", "a-xbx-b-c"));
  EXPECT_FALSE(glob_match("a*b*c", "a-xbx-b-"));
  // Many stars against a long name stay fast (no exponential backtracking).
  EXPECT_FALSE(glob_match(std::string(200, '*') + "x", std::string(10000, 'a')));
}

TEST(ModelNames, TransparentByDefaultStrictOnRequest) {
  ServerOptions o;
  o.model_id = "qwen3";
  o.model_aliases = {"claude-*"};
  ModelNames open(o);
  EXPECT_TRUE(open.serves("qwen3"));
  EXPECT_TRUE(open.serves("gpt-9"));
  EXPECT_TRUE(open.serves("gpt-9"));  // logged once, served every time
  o.strict_model_names = true;
  ModelNames strict(o);
  EXPECT_TRUE(strict.serves("qwen3"));
  EXPECT_TRUE(strict.serves("claude-haiku-4-5"));
  EXPECT_FALSE(strict.serves("gpt-9"));
}

// Model names come from clients: a client cycling through random names neither grows the proxy's
// memory nor floods its log, and every request is still served.
TEST(ModelNames, RememberedNamesAreBounded) {
  ServerOptions o;
  o.model_id = "qwen3";
  ModelNames names(o);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(names.serves("random-" + std::to_string(i)));
  EXPECT_EQ(names.names_remembered(), ModelNames::kMaxLoggedNames);
}

}  // namespace
}  // namespace ft::proxy

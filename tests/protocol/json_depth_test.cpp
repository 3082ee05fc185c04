// The nesting guard both servers run on request bodies before parsing them.
#include <gtest/gtest.h>

#include <string>

#include "ft/protocol/json_depth.h"

namespace ft::protocol {
namespace {

std::string nested(std::size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonDepth, CountsArraysAndObjectsButNotBracketsInStrings) {
  EXPECT_TRUE(json_depth_within(R"({"a":[1,{"b":[]}]})", 4));
  EXPECT_FALSE(json_depth_within(R"({"a":[1,{"b":[]}]})", 3));
  EXPECT_TRUE(json_depth_within(nested(256)));
  EXPECT_FALSE(json_depth_within(nested(257)));
  // Brackets inside strings, escaped quotes included, are text.
  EXPECT_TRUE(json_depth_within(R"({"s":"[[[[[[[[\"[[[[["})", 1));
  EXPECT_FALSE(json_depth_within(R"({"s":"\\"}[[[)", 2));  // an escaped backslash, then the quote ends the string
  // A body nested a few hundred thousand levels deep is refused in one pass.
  EXPECT_FALSE(json_depth_within(nested(300000, '{', '}')));
  EXPECT_TRUE(json_depth_within(""));
  EXPECT_TRUE(json_depth_within("]]]}}"));  // unbalanced closers: the parser's business
}

}  // namespace
}  // namespace ft::protocol

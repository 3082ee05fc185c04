#include "ft/common/result.h"

#include <gtest/gtest.h>

namespace ft {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("not positive: " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  FT_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Result, CarriesValueOrStatus) {
  EXPECT_EQ(*doubled(4), 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.status().to_string(), "invalid argument: not positive: -1");
}

TEST(Status, ReturnIfErrorPropagates) {
  auto f = [](bool fail) -> Status {
    FT_RETURN_IF_ERROR(fail ? corrupt("bad bytes") : Status::ok());
    return not_found("reached the end");
  };
  EXPECT_EQ(f(true).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(f(false).code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace ft

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ft/engine/ops.h"

namespace ft::engine {
namespace {

TEST(RmsNormRef, MatchesHandComputedValues) {
  // x = [3, 4]: mean(x^2) = 12.5, 1/sqrt(12.5) = 0.28284271
  const std::vector<float> x = {3.f, 4.f}, w = {1.f, 2.f};
  std::vector<float> out(2);
  ref::rms_norm(x.data(), w.data(), out.data(), 1, 2, 0.f, false);
  EXPECT_NEAR(out[0], 3.f * 0.28284271f, 1e-6);
  EXPECT_NEAR(out[1], 4.f * 0.28284271f * 2.f, 1e-6);
}

TEST(RmsNormRef, ZeroCenteredWeightIsOffsetFromOne) {
  const std::vector<float> x = {1.f, -1.f, 1.f, -1.f}, w = {0.f, 0.5f, -0.5f, 1.f};
  std::vector<float> out(4);
  ref::rms_norm(x.data(), w.data(), out.data(), 1, 4, 0.f, true);
  EXPECT_FLOAT_EQ(out[0], 1.f);
  EXPECT_FLOAT_EQ(out[1], -1.5f);
  EXPECT_FLOAT_EQ(out[2], 0.5f);
  EXPECT_FLOAT_EQ(out[3], -2.f);
}

}  // namespace
}  // namespace ft::engine

// The GPU this process can use, or why none.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ft/engine/cuda_ops.h"
#include "ft/engine/device.h"
#include "gpu_test_util.h"
#include "ft/engine/ops.h"

namespace ft::engine {
namespace {

TEST(CudaDevice, ReportsItselfOrWhyNot) {
  auto dev = query_cuda_device();
  if (!built_with_cuda()) {
    ASSERT_FALSE(dev);
    EXPECT_NE(dev.status().message().find("no CUDA support"), std::string::npos);
    GTEST_SKIP() << "built without CUDA";
  }
  if (!dev) GTEST_SKIP() << "no GPU: " << dev.status().message();
  EXPECT_GT(dev->total_bytes, 0u);
  EXPECT_GE(dev->compute_major, 7);
}

}  // namespace
}  // namespace ft::engine

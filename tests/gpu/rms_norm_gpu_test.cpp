// CUDA RMSNorm against the CPU reference. Skips, saying why, where no GPU is usable.
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

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(RmsNormCuda, MatchesCpuReference) {
  FT_REQUIRE_GPU();
  for (bool zero_centered : {false, true}) {
    for (int dim : {64, 2048, 5000}) {
      const int rows = 37;
      std::mt19937 rng(dim);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x(size_t(rows) * dim), w(dim), want(x.size()), got(x.size());
      for (auto& v : x) v = nd(rng);
      for (auto& v : w) v = nd(rng);
      ref::rms_norm(x.data(), w.data(), want.data(), rows, dim, 1e-6f, zero_centered);

      auto dx = cuda::DeviceBuffer::allocate(x.size() * 4);
      auto dw = cuda::DeviceBuffer::allocate(w.size() * 4);
      auto dout = cuda::DeviceBuffer::allocate(x.size() * 4);
      ASSERT_TRUE(dx && dw && dout);
      ASSERT_TRUE(dx->copy_from_host(x.data(), x.size() * 4));
      ASSERT_TRUE(dw->copy_from_host(w.data(), w.size() * 4));
      Status st = cuda::rms_norm(dx->as<float>(), dw->as<float>(), dout->as<float>(), rows, dim,
                                 1e-6f, zero_centered);
      ASSERT_TRUE(st) << st.to_string();
      ASSERT_TRUE(dout->copy_to_host(got.data(), got.size() * 4));
      EXPECT_LT(rel_l2(got, want), 1e-6) << "dim " << dim << " zero_centered " << zero_centered;
    }
  }
}

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

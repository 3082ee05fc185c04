// Shared by the gpu suite: skip a test, saying why, where no GPU is usable; a fixture with the CUDA
// backend and the fp32 reference side by side.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "ft/engine/backend.h"
#include "ft/engine/device.h"

#define FT_REQUIRE_GPU()                                                           \
  do {                                                                             \
    auto ft_dev_ = ::ft::engine::query_cuda_device();                              \
    if (!ft_dev_) GTEST_SKIP() << "no GPU: " << ft_dev_.status().message();        \
  } while (0)

namespace ft::engine {

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// The CUDA backend (cuda_) and the fp32 reference backend (ref_), with device copies of host values
// and back; skips without a GPU.
class CudaAndReference : public ::testing::Test {
 protected:
  void SetUp() override {
    FT_REQUIRE_GPU();
    BackendOptions options;
    options.kind = BackendKind::kCuda;
    auto cuda = make_backend(options);
    ASSERT_TRUE(cuda) << cuda.status().to_string();
    cuda_ = std::move(cuda).value();
    options.kind = BackendKind::kReference;
    ref_ = std::move(make_backend(options)).value();
  }
  template <typename T>
  T* dev(const std::vector<T>& v) {
    auto block = MemoryBlock::allocate(cuda_->memory(), std::max<std::size_t>(v.size(), 1) * sizeof(T));
    EXPECT_TRUE(block) << block.status().to_string();
    MemoryBlock& b = blocks_.emplace_back(std::move(block).value());
    cuda_->memory()->from_host(b.data(), v.data(), v.size() * sizeof(T));
    return b.as<T>();
  }
  float* dev_zeros(std::size_t n) { return dev(std::vector<float>(n, 0.f)); }
  template <typename T>
  std::vector<T> host(const T* d, std::size_t n) {
    std::vector<T> v(n);
    cuda_->memory()->to_host(v.data(), reinterpret_cast<const std::byte*>(d), n * sizeof(T));
    return v;
  }
  template <typename Fn>
  void on(Backend& b, const Fn& fn) {
    const Status st = b.execute(fn);
    ASSERT_TRUE(st) << st.to_string();
  }

  std::unique_ptr<Backend> cuda_, ref_;
  std::vector<MemoryBlock> blocks_;
};

}  // namespace ft::engine

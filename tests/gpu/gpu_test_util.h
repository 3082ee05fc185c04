// Shared by the gpu suite: skip a test, saying why, where no GPU is usable; a fixture with the CUDA
// backend and the fp32 reference side by side, random values and weights, and paged KV on both.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "ft/engine/backend.h"
#include "ft/engine/bf16.h"
#include "ft/engine/device.h"
#include "ft/engine/kv_pool.h"
#include "ft/engine/ops_attention.h"

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
  // N(0, scale) values from the fixture's generator (seeded by each suite).
  std::vector<float> random(std::size_t n, float scale = 1.f) {
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng_);
    return v;
  }
  // A bf16 weight [rows, cols] ~ N(0, 1/cols), kept alive by the fixture; placed on the GPU. The
  // rows listed in nan_rows are NaN (a broken checkpoint's).
  Matrix weight(int64_t rows, int64_t cols, std::initializer_list<int64_t> nan_rows = {}) {
    std::vector<bf16_t>& bytes = weights_.emplace_back(std::size_t(rows * cols));
    for (bf16_t& b : bytes) b = f32_to_bf16(random(1, 1.f / std::sqrt(float(cols)))[0]);
    for (int64_t r : nan_rows)
      std::fill_n(bytes.begin() + r * cols, cols, f32_to_bf16(std::numeric_limits<float>::quiet_NaN()));
    Matrix m{DType::kBF16, rows, cols, reinterpret_cast<const std::byte*>(bytes.data()), std::size_t(cols) * 2};
    EXPECT_TRUE(cuda_->place(m));
    return m;
  }
  const float* param(const std::vector<float>& v) { return *cuda_->place(std::span<const float>(v)); }
  // One MoE call on both backends (host_w: the same layer with its vectors in host memory, for the
  // reference; router_x: the router's own input, or empty): the choices agree on at least 95%, and
  // where they all agree the outputs are within 1e-2.
  void expect_moe_like_reference(const MoeWeights& w, const MoeWeights& host_w, std::size_t T,
                                 const std::vector<float>& router_x = {}) {
    const std::size_t H = std::size_t(w.hidden), K = w.router_spec.top_k;
    const std::vector<float> x = random(T * H);
    std::vector<float> want(x.size());
    RoutingTrace ref_trace, gpu_trace;
    const float* rx = router_x.empty() ? nullptr : router_x.data();
    ref_->set_routing_trace(&ref_trace);
    on(*ref_, [&] { ref_->moe(host_w, x.data(), T, want.data(), rx); });
    ref_->set_routing_trace(nullptr);
    const float* dx = dev(x);
    const float* drx = router_x.empty() ? nullptr : dev(router_x);
    float* out = dev_zeros(x.size());
    cuda_->set_routing_trace(&gpu_trace);
    on(*cuda_, [&] { cuda_->moe(w, dx, T, out, drx); });
    cuda_->set_routing_trace(nullptr);
    ASSERT_EQ(gpu_trace.calls.size(), 1u);
    std::size_t same = 0;
    for (std::size_t i = 0; i < T * K; ++i) same += gpu_trace.calls[0][i] == ref_trace.calls[0][i];
    EXPECT_GE(same * 20, T * K * 19) << "routing differs on more than 5% of the choices, T " << T;
    if (same == T * K) {
      EXPECT_LT(rel_l2(host(out, x.size()), want), 1e-2) << "T " << T;
    }
  }
  template <typename Fn>
  void on(Backend& b, const Fn& fn) {
    const Status st = b.execute(fn);
    ASSERT_TRUE(st) << st.to_string();
  }

  // One sequence of a paged-KV call: `rows` new rows after `pos0` positions already held.
  struct KvSeq {
    std::size_t rows;
    int64_t pos0;
  };
  static constexpr int64_t kKvLayer = 1;  // of the twin's two layers, the one the calls use
  // The KV of layer kKvLayer in bf16 pages with the same values on the reference backend (host pool)
  // and on the GPU (device pool): every position of every sequence written, this call's rows
  // included, as a block writes them before it reads; host_seqs / dev_seqs describe the call.
  struct PagedKvTwin {
    KvLayout layout;
    std::shared_ptr<KvPool> host_pool, dev_pool;
    std::vector<std::vector<KvPageRef>> keep;
    std::vector<std::vector<std::byte*>> host_tables, dev_tables;
    std::vector<AttentionSeq> host_seqs, dev_seqs;
    std::size_t T = 0;
  };
  // K and V of `slots` heads of `width` in pages of page_tokens, values from random(n).
  PagedKvTwin paged_kv(int64_t slots, int64_t width, int64_t page_tokens, const std::vector<KvSeq>& shape,
                       const std::function<std::vector<float>(std::size_t)>& random) {
    PagedKvTwin out;
    out.layout = KvLayout{2, slots, width, page_tokens, KvDType::kBf16, {}};
    int64_t pages = 0;
    for (const KvSeq& q : shape) pages += out.layout.pages_for(q.pos0 + int64_t(q.rows));
    const std::uint64_t bytes = std::uint64_t(pages + 1) * out.layout.page_bytes();
    out.host_pool = *KvPool::create(out.layout, bytes);
    out.dev_pool = *KvPool::create(out.layout, bytes, cuda_->memory());
    out.host_tables.resize(shape.size());
    out.dev_tables.resize(shape.size());
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const int64_t ctx = shape[i].pos0 + int64_t(shape[i].rows);
      std::vector<KvPageRef>& mine = out.keep.emplace_back();
      for (int64_t p = 0; p < out.layout.pages_for(ctx); ++p) {
        mine.push_back(*out.host_pool->allocate());
        out.host_tables[i].push_back(mine.back()->data());
        mine.push_back(*out.dev_pool->allocate());
        out.dev_tables[i].push_back(mine.back()->data());
      }
      const std::size_t n = std::size_t(ctx) * std::size_t(slots * width);
      const std::vector<float> k = random(n), v = random(n);
      const AttentionSeq h{0, std::size_t(ctx), 0, out.host_tables[i].data()};
      const AttentionSeq d{0, std::size_t(ctx), 0, out.dev_tables[i].data()};
      on(*ref_, [&] { ref_->kv_write(out.layout, kKvLayer, k.data(), v.data(), {&h, 1}); });
      const float *dk = dev(k), *dv = dev(v);
      on(*cuda_, [&] { cuda_->kv_write(out.layout, kKvLayer, dk, dv, {&d, 1}); });
      out.host_seqs.push_back({out.T, shape[i].rows, shape[i].pos0, out.host_tables[i].data()});
      out.dev_seqs.push_back({out.T, shape[i].rows, shape[i].pos0, out.dev_tables[i].data()});
      out.T += shape[i].rows;
    }
    return out;
  }

  std::unique_ptr<Backend> cuda_, ref_;
  std::vector<MemoryBlock> blocks_;
  std::mt19937 rng_{0};
  std::vector<std::vector<bf16_t>> weights_;
};

}  // namespace ft::engine

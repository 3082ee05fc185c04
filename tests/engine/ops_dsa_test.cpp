// DeepSeek sparse attention's ops (ops_dsa.h): the fp32 references on their own (LayerNorm, the
// top-k's order and ties, sparse attention over every position being causal attention), and the
// CPU backend's versions against them on the same KV pages, with a row's result the same bits
// whether it runs in a prefill or as a decode step.
#include "ft/engine/ops_dsa.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ft/engine/backend.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::Backend;
using engine::BackendKind;

std::vector<float> randn(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::unique_ptr<Backend> backend(BackendKind kind) {
  engine::BackendOptions o;
  o.kind = kind;
  o.threads = 2;
  o.deterministic = true;
  auto b = engine::make_backend(o);
  EXPECT_TRUE(b.is_ok()) << b.status().to_string();
  return b.is_ok() ? std::move(b).value() : nullptr;
}

TEST(DsaReference, LayerNormIsTorchs) {
  std::mt19937 rng(3);
  const std::size_t rows = 5, dim = 24;
  const auto x = randn(rows * dim, rng, 3.0f), w = randn(dim, rng), b = randn(dim, rng);
  std::vector<float> out(x.size());
  engine::ref::layer_norm(x.data(), w.data(), b.data(), out.data(), rows, dim, 1e-6f);
  for (std::size_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < dim; ++i) mean += x[r * dim + i];
    mean /= double(dim);
    for (std::size_t i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
    var /= double(dim);  // biased, as torch
    for (std::size_t i = 0; i < dim; ++i) {
      const double want = (x[r * dim + i] - mean) / std::sqrt(var + 1e-6) * w[i] + b[i];
      EXPECT_NEAR(out[r * dim + i], want, 1e-5 * (1 + std::abs(want)));
    }
  }
}

TEST(DsaReference, TopKTakesTheHighestCausalScoresInAscendingOrder) {
  const std::vector<float> scores = {0.5f, -2.0f, 2.0f, 0.25f, -1.0f, 1.0f, 3.0f};
  std::vector<int32_t> out(4);
  engine::ref::top_k_positions(scores.data(), scores.size(), scores.size(), 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 2, 5, 6}));
  // A row longer than the query's keys (a prefill's earlier query): the rest are masked, never chosen.
  engine::ref::top_k_positions(scores.data(), 5, 40, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 2, 3, 4}));
  engine::ref::top_k_positions(scores.data(), 3, 7, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 2, -1}));  // fewer keys than k: all of them
  engine::ref::top_k_positions(scores.data(), 3, 3, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 2, -1}));
}

// The indexer's keys in slot `heads` of a layer whose other slots hold K/V of the heads, as the
// latent attention block lays them out; pages of 16 tokens over 70 positions.
class DsaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = backend(BackendKind::kCpu);
    ref_ = backend(BackendKind::kReference);
    ASSERT_TRUE(cpu_ && ref_);
    layout_.layers = 2;
    layout_.kv_heads = kHeads + 1;
    layout_.head_dim = kD;
    layout_.page_tokens = 16;
    layout_.dtype = engine::KvDType::kBf16;
    auto pool = engine::KvPool::create(layout_, std::uint64_t(layout_.pages_for(kT)) * layout_.page_bytes());
    ASSERT_TRUE(pool.is_ok());
    pool_ = std::move(pool).value();
    for (int64_t p = 0; p < layout_.pages_for(kT); ++p) {
      pages_.push_back(*pool_->allocate());
      table_.push_back(pages_.back()->data());
    }
    const std::size_t width = std::size_t(layout_.kv_heads) * kD;
    auto k = randn(kT * width, rng_), v = randn(kT * width, rng_);
    for (std::size_t t = 0; t < kT; ++t) std::fill_n(v.data() + t * width + kHeads * kD, kD, 0.0f);
    const engine::AttentionSeq all{0, kT, 0, table_.data()};
    ASSERT_TRUE(cpu_->execute([&] { cpu_->kv_write(layout_, kLayer, k.data(), v.data(), {&all, 1}); }));
  }
  static constexpr std::size_t kHeads = 3, kD = 32, kT = 70, kLayer = 1;
  std::unique_ptr<Backend> cpu_, ref_;
  engine::KvLayout layout_;
  std::shared_ptr<engine::KvPool> pool_;
  std::vector<engine::KvPageRef> pages_;
  std::vector<std::byte*> table_;
  std::mt19937 rng_{99};
};

TEST_F(DsaOps, CpuIndexerChoosesAsTheReferenceAndDecodeAsPrefill) {
  engine::IndexerSpec spec;
  spec.heads = 4;
  spec.head_dim = 24;  // narrower than the slot: its first 24 dims
  spec.scale = 1.0f / std::sqrt(24.0f);
  spec.weight_scale = 0.5f;
  spec.top_k = 10;
  spec.kv_slot = int64_t(kHeads);
  const auto q = randn(kT * spec.heads * spec.head_dim, rng_), w = randn(kT * spec.heads, rng_);
  const engine::AttentionSeq all{0, kT, 0, table_.data()};
  std::vector<int32_t> got(kT * spec.top_k), want(got.size());
  ASSERT_TRUE(cpu_->execute([&] {
    cpu_->index_select(layout_, kLayer, q.data(), w.data(), spec, {&all, 1}, got.data());
  }));
  ASSERT_TRUE(ref_->execute([&] {
    ref_->index_select(layout_, kLayer, q.data(), w.data(), spec, {&all, 1}, want.data());
  }));
  EXPECT_EQ(got, want);
  for (std::size_t i = 0; i < spec.top_k; ++i) EXPECT_EQ(got[3 * spec.top_k + i], i < 4 ? int32_t(i) : -1);
  for (std::size_t t : {std::size_t(0), std::size_t(15), std::size_t(16), kT - 1}) {
    const engine::AttentionSeq one{0, 1, int64_t(t), table_.data()};
    std::vector<int32_t> step(spec.top_k);
    ASSERT_TRUE(cpu_->execute([&] {
      cpu_->index_select(layout_, kLayer, q.data() + t * spec.heads * spec.head_dim, w.data() + t * spec.heads, spec,
                         {&one, 1}, step.data());
    }));
    EXPECT_EQ(0, std::memcmp(step.data(), got.data() + t * spec.top_k, step.size() * sizeof(int32_t))) << t;
  }
}

TEST_F(DsaOps, CpuSparseAttentionMatchesTheReferenceAndEveryPositionIsCausalAttention) {
  const std::size_t K = 12;
  const auto q = randn(kT * kHeads * kD, rng_);
  std::vector<int32_t> selected(kT * K);
  std::mt19937 pick(5);
  for (std::size_t t = 0; t < kT; ++t) {
    std::vector<int32_t> order(t + 1);
    for (std::size_t j = 0; j <= t; ++j) order[j] = int32_t(j);
    std::shuffle(order.begin(), order.end(), pick);
    order.resize(std::min(order.size(), K));
    std::sort(order.begin(), order.end());
    order.resize(K, -1);
    std::copy(order.begin(), order.end(), selected.begin() + std::ptrdiff_t(t * K));
  }
  const engine::AttentionSeq all{0, kT, 0, table_.data()};
  const float scale = 0.2f;
  std::vector<float> got(kT * kHeads * kD), want(got.size());
  ASSERT_TRUE(cpu_->execute([&] {
    cpu_->sparse_attention(layout_, kLayer, q.data(), kHeads, scale, {&all, 1}, selected.data(), K, got.data());
  }));
  ASSERT_TRUE(ref_->execute([&] {
    ref_->sparse_attention(layout_, kLayer, q.data(), kHeads, scale, {&all, 1}, selected.data(), K, want.data());
  }));
  EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-5);
  // The first K rows select every position they have: causal attention of the heads over their
  // own slots (a layout without the index slot reads the same blocks for heads < kHeads).
  std::vector<float> causal(got.size());
  ASSERT_TRUE(ref_->execute([&] {
    std::vector<float> full(kT * (kHeads + 1) * kD);
    std::vector<float> qq(kT * (kHeads + 1) * kD, 0.0f);
    for (std::size_t t = 0; t < kT; ++t)
      std::memcpy(qq.data() + t * (kHeads + 1) * kD, q.data() + t * kHeads * kD, kHeads * kD * sizeof(float));
    ref_->attention(layout_, kLayer, qq.data(), kHeads + 1, scale, {&all, 1}, full.data(), {});
    for (std::size_t t = 0; t < kT; ++t)
      std::memcpy(causal.data() + t * kHeads * kD, full.data() + t * (kHeads + 1) * kD, kHeads * kD * sizeof(float));
  }));
  EXPECT_LT(rel_l2(want.data(), causal.data(), K * kHeads * kD), 1e-6);
}

}  // namespace
}  // namespace ft::test

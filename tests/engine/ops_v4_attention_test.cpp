// DeepSeek-V4's attention and CSA indexer reference ops (ops_v4_attention.h) against
// docs/deepseek-v4.md §2.6 / §2.8 written out again here: a row against the formula in double
// (both key sets and the sink), the sliding-only case against plain windowed attention, the window's
// first key, which entries HCA and CSA rows read, the output's inverse rope, the grouped output
// projection against a dense block-diagonal product, and the indexer's masking, count and order.
#include "ft/engine/ops_v4_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "deepseek_v4_test_util.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_dsa.h"

namespace ft::test {
namespace {

using engine::V4AttentionSpec;
using engine::V4RowKeys;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

// §2.6 for one query row in double: the keys (window rows, then the visible entries) are given as
// row pointers; logits q.k * scale plus the head's sink in one softmax; o = sum p_j k_j (V = K);
// then the tail pair (2i, 2i+1) turned by -pos * inv_freq[i].
std::vector<double> row_in_double(const float* q, const std::vector<const float*>& keys, const float* sinks,
                                  const std::vector<float>& inv_freq, int64_t pos, const V4AttentionSpec& s) {
  const std::size_t H = s.heads, d = s.head_dim, r = s.rope_dims;
  std::vector<double> out(H * d, 0.0);
  for (std::size_t h = 0; h < H; ++h) {
    std::vector<double> l(keys.size());
    double m = sinks ? double(sinks[h]) : -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < keys.size(); ++j) {
      double dot = 0;
      for (std::size_t c = 0; c < d; ++c) dot += double(q[h * d + c]) * keys[j][c];
      l[j] = dot * double(s.scale);
      m = std::max(m, l[j]);
    }
    double z = sinks ? std::exp(double(sinks[h]) - m) : 0.0;
    for (double& x : l) z += (x = std::exp(x - m));
    double* o = out.data() + h * d;
    for (std::size_t j = 0; j < keys.size(); ++j) {
      for (std::size_t c = 0; c < d; ++c) o[c] += l[j] / z * keys[j][c];
    }
    for (std::size_t i = 0; i < r / 2; ++i) {
      const double a = double(inv_freq[i]) * double(pos);
      double& u = o[d - r + 2 * i];
      double& v = o[d - r + 2 * i + 1];
      const double u0 = u, v0 = v;
      u = u0 * std::cos(a) + v0 * std::sin(a);
      v = v0 * std::cos(a) - u0 * std::sin(a);
    }
  }
  return out;
}

class V4Attention : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.heads = 4;
    spec_.head_dim = 32;
    spec_.rope_dims = 8;
    spec_.scale = float(std::pow(32.0, -0.5));
    spec_.window = 8;
    inv_freq_ = compress_inv_freq(spec_.rope_dims);
    q_ = randn(kT * spec_.heads * spec_.head_dim, rng_, 2.0f);  // sharper than uniform softmaxes
    kv_ = randn(kT * spec_.head_dim, rng_);
    entries_ = randn(kEntries * spec_.head_dim, rng_);
    sinks_ = randn(spec_.heads, rng_);
  }
  std::size_t qrow() const { return spec_.heads * spec_.head_dim; }
  const float* q_at(int64_t pos) const { return q_.data() + std::size_t(pos) * qrow(); }
  const float* kv_at(int64_t pos) const { return kv_.data() + std::size_t(pos) * spec_.head_dim; }
  const float* entry(int32_t w) const { return entries_.data() + std::size_t(w) * spec_.head_dim; }

  // One row through the pass-level op: the query at pos, kv rows 0 .. pos.
  std::vector<float> pass_row(int64_t pos, const int32_t* picks = nullptr, std::size_t top_k = 0,
                              const float* sinks = nullptr) const {
    std::vector<float> out(qrow());
    engine::ref::v4_attention(q_at(pos), kv_.data(), 1, pos, entries_.data(), kEntries, picks, top_k, sinks,
                              inv_freq_.data(), spec_, out.data());
    return out;
  }

  static constexpr std::size_t kT = 40, kEntries = 10;
  std::mt19937 rng_{2024};
  V4AttentionSpec spec_;
  std::vector<float> inv_freq_, q_, kv_, entries_, sinks_;
};

TEST_F(V4Attention, RowIsTheSpecInDoubleWithBothKeySetsAndTheSink) {
  const int64_t pos = 37;
  const std::size_t rows = 6;  // a window cut short of W: the row op takes what it is given
  const std::vector<int32_t> visible = {7, -1, 2, 5, 0, -1};
  V4RowKeys keys;
  keys.window = kv_at(pos - int64_t(rows) + 1);
  keys.window_rows = rows;
  keys.entries = entries_.data();
  keys.n_entries = kEntries;
  keys.visible = visible.data();
  keys.n_visible = visible.size();
  std::vector<const float*> ptrs;
  for (std::size_t j = 0; j < rows; ++j) ptrs.push_back(keys.window + j * spec_.head_dim);
  for (const int32_t w : visible)
    if (w >= 0) ptrs.push_back(entry(w));

  for (const float sink_shift : {0.0f, 3.0f}) {  // 3: the sink takes a large share
    std::vector<float> sinks = sinks_;
    for (float& s : sinks) s += sink_shift;
    std::vector<float> got(qrow());
    engine::ref::v4_attention_row(q_at(pos), keys, sinks.data(), inv_freq_.data(), pos, spec_, got.data());
    const auto want = row_in_double(q_at(pos), ptrs, sinks.data(), inv_freq_, pos, spec_);
    const auto no_sink = row_in_double(q_at(pos), ptrs, nullptr, inv_freq_, pos, spec_);
    double sink_effect = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i]))) << i;
      sink_effect = std::max(sink_effect, std::abs(want[i] - no_sink[i]));
    }
    EXPECT_GT(sink_effect, 1e-2);  // the sink is not a no-op on this data
  }
  // Without a sink, too.
  std::vector<float> got(qrow());
  engine::ref::v4_attention_row(q_at(pos), keys, nullptr, inv_freq_.data(), pos, spec_, got.data());
  const auto want = row_in_double(q_at(pos), ptrs, nullptr, inv_freq_, pos, spec_);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i])));
}

TEST_F(V4Attention, SlidingOnlyWithoutSinkIsWindowedSoftmaxAttentionTurnedBack) {
  // A sliding layer (rate 0, no picks) over a pass of T rows against causal_attention with one KV
  // head that is both K and V and the same window, whose output's tail is then turned back.
  const std::size_t T = 12;
  const int64_t pos0 = 20;
  std::vector<float> got(T * qrow()), want(T * qrow());
  engine::ref::v4_attention(q_at(pos0), kv_.data(), T, pos0, entries_.data(), kEntries, nullptr, 0, nullptr,
                            inv_freq_.data(), spec_, got.data());
  engine::AttentionOptions opt;
  opt.window = spec_.window;
  engine::ref::causal_attention(q_at(pos0), kv_.data(), kv_.data(), want.data(), T, std::size_t(pos0), spec_.heads, 1,
                                spec_.head_dim, spec_.scale, opt);
  for (std::size_t t = 0; t < T; ++t)
    engine::ref::rope_tail(want.data() + t * qrow(), spec_.heads, spec_.head_dim, spec_.rope_dims, inv_freq_.data(),
                           pos0 + int64_t(t), /*inverse=*/true);
  EXPECT_LT(max_abs_diff(got, want), 1e-6);
  // The entries were there but unread: no rate and no picks.
  auto changed = entries_;
  for (float& x : changed) x = 100.0f;
  std::vector<float> again(T * qrow());
  engine::ref::v4_attention(q_at(pos0), kv_.data(), T, pos0, changed.data(), kEntries, nullptr, 0, nullptr,
                            inv_freq_.data(), spec_, again.data());
  EXPECT_EQ(again, got);
}

TEST_F(V4Attention, WindowExcludesPMinusWAndIncludesPMinusWPlusOne) {
  const int64_t W = spec_.window;
  for (const int64_t pos : {int64_t(W + 5), int64_t(W)}) {
    const auto base = pass_row(pos, nullptr, 0, sinks_.data());
    auto saved = kv_;
    for (std::size_t c = 0; c < spec_.head_dim; ++c) kv_[std::size_t(pos - W) * spec_.head_dim + c] = 50.0f;
    EXPECT_EQ(pass_row(pos, nullptr, 0, sinks_.data()), base) << "key p - W is outside the window, p = " << pos;
    kv_ = saved;
    for (std::size_t c = 0; c < spec_.head_dim; ++c) kv_[std::size_t(pos - W + 1) * spec_.head_dim + c] += 1.0f;
    EXPECT_GT(max_abs_diff(pass_row(pos, nullptr, 0, sinks_.data()), base), 1e-4) << "key p - W + 1 is inside";
    kv_ = saved;
  }
  // Early rows: the window is cut at position 0, and row 0 reads itself only.
  const int64_t pos = W - 3;
  const auto base = pass_row(pos, nullptr, 0, sinks_.data());
  for (std::size_t c = 0; c < spec_.head_dim; ++c) kv_[c] += 1.0f;
  EXPECT_GT(max_abs_diff(pass_row(pos, nullptr, 0, sinks_.data()), base), 1e-4);
  std::vector<const float*> self = {kv_at(0)};
  const auto want = row_in_double(q_at(0), self, sinks_.data(), inv_freq_, 0, spec_);
  const auto got = pass_row(0, nullptr, 0, sinks_.data());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i])));
}

TEST_F(V4Attention, HcaRowsSeeExactlyTheWindowsClosedAtOrBeforeThem) {
  spec_.rate = 4;
  // A pass of rows 32 .. 39 whose cache holds all 10 entries (the last closes at 39): the row at p
  // sees w < (p + 1) / 4, i.e. 8 entries for p = 32 .. 34, 9 for p = 35 .. 38, 10 for p = 39.
  const std::size_t T = 8;
  const int64_t pos0 = 32;
  const auto run = [&](const std::vector<float>& entries) {
    std::vector<float> out(T * qrow());
    engine::ref::v4_attention(q_at(pos0), kv_.data(), T, pos0, entries.data(), kEntries, nullptr, 0, sinks_.data(),
                              inv_freq_.data(), spec_, out.data());
    return out;
  };
  const auto base = run(entries_);
  for (std::size_t t = 0; t < T; ++t) {
    const int64_t pos = pos0 + int64_t(t);
    const std::size_t visible = std::size_t(pos + 1) / 4;
    EXPECT_EQ(engine::v4_causal_entries(pos, 4), visible);
    std::vector<const float*> ptrs;
    for (int64_t j = pos - spec_.window + 1; j <= pos; ++j) ptrs.push_back(kv_at(j));
    for (std::size_t w = 0; w < visible; ++w) ptrs.push_back(entry(int32_t(w)));
    const auto want = row_in_double(q_at(pos), ptrs, sinks_.data(), inv_freq_, pos, spec_);
    for (std::size_t i = 0; i < qrow(); ++i)
      EXPECT_NEAR(base[t * qrow() + i], want[i], 2e-6 * (1 + std::abs(want[i]))) << "p " << pos << " i " << i;
  }
  // Entry 8 (window 32 .. 35) changed arbitrarily: rows 32 .. 34 are untouched, bit for bit; the
  // rest move. Entry 7 (closed at 31) moves every row.
  for (const std::size_t w : {std::size_t(8), std::size_t(7)}) {
    auto changed = entries_;
    for (std::size_t c = 0; c < spec_.head_dim; ++c) changed[w * spec_.head_dim + c] = 30.0f * float(c % 3) - 20.0f;
    const auto got = run(changed);
    for (std::size_t t = 0; t < T; ++t) {
      const bool sees = w < std::size_t(pos0 + int64_t(t) + 1) / 4;
      const std::vector<float> a(got.begin() + std::ptrdiff_t(t * qrow()),
                                 got.begin() + std::ptrdiff_t((t + 1) * qrow()));
      const std::vector<float> b(base.begin() + std::ptrdiff_t(t * qrow()),
                                 base.begin() + std::ptrdiff_t((t + 1) * qrow()));
      if (sees) {
        EXPECT_GT(max_abs_diff(a, b), 1e-4) << "entry " << w << " row " << pos0 + int64_t(t);
      } else {
        EXPECT_EQ(a, b) << "entry " << w << " row " << pos0 + int64_t(t);
      }
    }
  }
}

TEST_F(V4Attention, CsaRowsReadTheirPicksOnlyAndSkipMinusOne) {
  spec_.rate = 4;
  const int64_t pos = 39;
  const std::vector<int32_t> picks = {1, 4, 6, 9, -1, -1};  // ascending, as the indexer gives them
  std::vector<int32_t> valid;
  for (const int32_t w : picks)
    if (w >= 0) valid.push_back(w);
  ASSERT_TRUE(std::adjacent_find(valid.begin(), valid.end(), std::greater_equal<int32_t>()) == valid.end())
      << "picks must be distinct (torch.topk cannot repeat an index)";

  const auto base = pass_row(pos, picks.data(), picks.size(), sinks_.data());
  EXPECT_EQ(pass_row(pos, valid.data(), valid.size(), sinks_.data()), base);  // -1 is nothing
  std::vector<const float*> ptrs;
  for (int64_t j = pos - spec_.window + 1; j <= pos; ++j) ptrs.push_back(kv_at(j));
  for (const int32_t w : valid) ptrs.push_back(entry(w));
  const auto want = row_in_double(q_at(pos), ptrs, sinks_.data(), inv_freq_, pos, spec_);
  for (std::size_t i = 0; i < qrow(); ++i) EXPECT_NEAR(base[i], want[i], 2e-6 * (1 + std::abs(want[i])));

  // An unpicked entry changed arbitrarily leaves the row's bits alone; a picked one does not.
  for (const int32_t w : {0, 2, 3, 5, 7, 8}) {
    auto saved = entries_;
    for (std::size_t c = 0; c < spec_.head_dim; ++c) entries_[std::size_t(w) * spec_.head_dim + c] = 40.0f;
    EXPECT_EQ(pass_row(pos, picks.data(), picks.size(), sinks_.data()), base) << "unpicked " << w;
    entries_ = saved;
  }
  for (const int32_t w : valid) {
    auto saved = entries_;
    for (std::size_t c = 0; c < spec_.head_dim; ++c) entries_[std::size_t(w) * spec_.head_dim + c] += 1.0f;
    EXPECT_GT(max_abs_diff(pass_row(pos, picks.data(), picks.size(), sinks_.data()), base), 1e-4) << "picked " << w;
    entries_ = saved;
  }
}

TEST_F(V4Attention, OutputTailIsTurnedBackAtTheQueryPositionAndTheRestIsNot) {
  const std::vector<int32_t> visible = {0, 3};
  for (const int64_t pos : {int64_t(0), int64_t(9), int64_t(39)}) {
    V4RowKeys keys;
    const int64_t first = std::max<int64_t>(0, pos - spec_.window + 1);
    keys.window = kv_at(first);
    keys.window_rows = std::size_t(pos - first + 1);
    keys.entries = entries_.data();
    keys.n_entries = kEntries;
    keys.visible = visible.data();
    keys.n_visible = visible.size();
    // Zero frequencies turn nothing: the attention output before the inverse rope.
    const std::vector<float> none(spec_.rope_dims / 2, 0.0f);
    std::vector<float> plain(qrow()), got(qrow());
    engine::ref::v4_attention_row(q_at(pos), keys, sinks_.data(), none.data(), pos, spec_, plain.data());
    engine::ref::v4_attention_row(q_at(pos), keys, sinks_.data(), inv_freq_.data(), pos, spec_, got.data());
    const std::size_t d = spec_.head_dim, r = spec_.rope_dims;
    for (std::size_t h = 0; h < spec_.heads; ++h) {
      for (std::size_t c = 0; c < d - r; ++c) EXPECT_EQ(got[h * d + c], plain[h * d + c]);
      for (std::size_t i = 0; i < r / 2; ++i) {
        // HF's rope with cos, -sin: (u, v) -> (u cos a + v sin a, v cos a - u sin a), a = pos * inv_freq[i].
        const double a = double(float(inv_freq_[i] * float(pos)));
        const double u = plain[h * d + d - r + 2 * i], v = plain[h * d + d - r + 2 * i + 1];
        EXPECT_NEAR(got[h * d + d - r + 2 * i], u * std::cos(a) + v * std::sin(a), 1e-6);
        EXPECT_NEAR(got[h * d + d - r + 2 * i + 1], v * std::cos(a) - u * std::sin(a), 1e-6);
      }
    }
    if (pos > 0) {
      EXPECT_GT(max_abs_diff(got, plain), 1e-3);  // the turn is not a no-op here
    }
  }
}

TEST(V4GroupedOProj, IsTheBlockDiagonalDenseProduct) {
  std::mt19937 rng(8);
  const std::size_t T = 3, H = 4, d = 6, g = 2, R = 5, in = H * d, cols = in / g;
  const auto o = randn(T * in, rng), weight = randn(g * R * cols, rng);
  // The dense [g R, H d] matrix with group i's block at rows i R.., columns i H d / g..; zeros elsewhere.
  std::vector<double> dense(g * R * in, 0.0);
  for (std::size_t i = 0; i < g; ++i)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t c = 0; c < cols; ++c) dense[(i * R + r) * in + i * cols + c] = weight[(i * R + r) * cols + c];
  std::vector<float> got(T * g * R);
  engine::ref::grouped_o_proj(o.data(), weight.data(), T, in, g, R, got.data());
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t row = 0; row < g * R; ++row) {
      double want = 0;
      for (std::size_t c = 0; c < in; ++c) want += dense[row * in + c] * o[t * in + c];
      EXPECT_NEAR(got[t * g * R + row], want, 1e-5 * (1 + std::abs(want))) << "t " << t << " row " << row;
    }
  }
}

// ---- the CSA indexer's choice --------------------------------------------------------------

struct IndexCase {
  engine::IndexerSpec spec;
  std::vector<float> qi, w, keys;
  std::size_t n = 0;

  IndexCase(std::size_t n_entries, std::size_t top_k, unsigned seed) : n(n_entries) {
    std::mt19937 rng(seed);
    spec = engine::v4_indexer_spec(4, 16, top_k);
    qi = randn(spec.heads * spec.head_dim, rng);
    w = randn(spec.heads, rng);
    keys = randn(n * spec.head_dim, rng);
  }
  // §2.8's score of entry j in double.
  double score(std::size_t j) const {
    const std::size_t Hi = spec.heads, Di = spec.head_dim;
    double s = 0;
    for (std::size_t h = 0; h < Hi; ++h) {
      double dot = 0;
      for (std::size_t c = 0; c < Di; ++c) dot += double(qi[h * Di + c]) * keys[j * Di + c];
      s += double(w[h]) / std::sqrt(double(Hi)) * std::max(0.0, dot / std::sqrt(double(Di)));
    }
    return s;
  }
  std::vector<int32_t> select(int64_t pos, std::size_t rate) const {
    std::vector<int32_t> out(spec.top_k, 7777);
    engine::ref::v4_index_select(qi.data(), w.data(), keys.data(), n, pos, rate, spec, out.data());
    return out;
  }
};

TEST(V4IndexSelect, SpecIsTheIndexerConstants) {
  const auto s = engine::v4_indexer_spec(64, 128, 512);
  EXPECT_EQ(s.heads, 64u);
  EXPECT_EQ(s.head_dim, 128u);
  EXPECT_EQ(s.top_k, 512u);
  EXPECT_EQ(s.scale, float(1.0 / std::sqrt(128.0)));
  EXPECT_EQ(s.weight_scale, 0.125f);
}

TEST(V4IndexSelect, TakesTheBestCausalEntriesAscendingAndNeverAFutureOne) {
  IndexCase c(12, 3, 17);
  for (float& x : c.w) x = std::abs(x) + 0.1f;  // positive weights: a bigger key scores higher
  const std::size_t m = 4;
  const int64_t pos = 21;  // (21 + 1) / 4 = 5 causal entries of the 12 the cache holds
  ASSERT_EQ(engine::v4_causal_entries(pos, m), 5u);
  // The future entries: 5x the best causal key, so unmasked they would win every slot.
  std::size_t best = 0;
  for (std::size_t j = 1; j < 5; ++j)
    if (c.score(j) > c.score(best)) best = j;
  ASSERT_GT(c.score(best), 0.0);
  for (std::size_t j = 5; j < c.n; ++j)
    for (std::size_t k = 0; k < c.spec.head_dim; ++k)
      c.keys[j * c.spec.head_dim + k] = 5.0f * c.keys[best * c.spec.head_dim + k];

  std::vector<std::size_t> order = {0, 1, 2, 3, 4};
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return c.score(a) > c.score(b); });
  std::vector<int32_t> want = {int32_t(order[0]), int32_t(order[1]), int32_t(order[2])};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(c.select(pos, m), want);

  // The same as ref::top_k_positions over ref::indexer_scores of the causal entries, in a row of
  // all 12 entries.
  std::vector<float> scores(5);
  engine::ref::indexer_scores(c.qi.data(), c.w.data(), c.keys.data(), c.spec.head_dim, 5, c.spec, scores.data());
  for (std::size_t j = 0; j < 5; ++j) EXPECT_NEAR(scores[j], c.score(j), 1e-5 * (1 + std::abs(c.score(j))));
  std::vector<int32_t> direct(3);
  engine::ref::top_k_positions(scores.data(), 5, 12, 3, direct.data());
  EXPECT_EQ(c.select(pos, m), direct);
}

TEST(V4IndexSelect, TakesMinOfTopKAndWhatTheRowMaySee) {
  IndexCase c(12, 8, 23);
  const std::size_t m = 4;
  // 5 causal entries < top_k 8: all of them, then -1.
  EXPECT_EQ(c.select(21, m), (std::vector<int32_t>{0, 1, 2, 3, 4, -1, -1, -1}));
  // Fewer cached entries than top_k, every one causal: all of them.
  IndexCase few(3, 8, 24);
  EXPECT_EQ(few.select(100, m), (std::vector<int32_t>{0, 1, 2, -1, -1, -1, -1, -1}));
  // A row before the first window closes (pos 2 < m - 1) sees none; nor does an empty cache.
  EXPECT_EQ(c.select(2, m), std::vector<int32_t>(8, -1));
  IndexCase none(0, 8, 25);
  EXPECT_EQ(none.select(50, m), std::vector<int32_t>(8, -1));
  // The boundary: the window 16 .. 19 (entry 4) is visible from p = 19 on, not at 18.
  IndexCase c1(12, 5, 26);
  std::vector<int32_t> at18 = c1.select(18, m), at19 = c1.select(19, m);
  EXPECT_EQ(std::count(at18.begin(), at18.end(), 4), 0);
  EXPECT_EQ(at19, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  // More causal entries than top_k: exactly top_k valid, distinct and ascending.
  const auto many = c.select(47, m);  // 12 causal, top 8
  EXPECT_EQ(std::count(many.begin(), many.end(), -1), 0);
  EXPECT_TRUE(std::adjacent_find(many.begin(), many.end(), std::greater_equal<int32_t>()) == many.end());
}

TEST(V4IndexSelect, BreaksTiesAsTopKOverTheWholeCachedRow) {
  // Every head's query is minus every key's direction: all dot products negative, ReLU makes every
  // score exactly 0, and which of the tied entries win depends on the row torch.topk sorts, i.e.
  // on how many entries the cache holds, not on how many the row may see.
  const std::size_t m = 4, top_k = 3;
  const int64_t pos = 39;  // 10 causal entries
  bool row_length_mattered = false;
  for (std::size_t n = 10; n <= 400; n += 13) {
    IndexCase c(n, top_k, 31);
    for (std::size_t h = 0; h < c.spec.heads; ++h)
      for (std::size_t k = 0; k < c.spec.head_dim; ++k) c.qi[h * c.spec.head_dim + k] = 1.0f;
    for (float& x : c.keys) x = -std::abs(x) - 0.01f;
    const std::vector<float> zeros(10, 0.0f);
    std::vector<int32_t> whole(top_k), causal_only(top_k);
    engine::ref::top_k_positions(zeros.data(), 10, n, top_k, whole.data());
    engine::ref::top_k_positions(zeros.data(), 10, 10, top_k, causal_only.data());
    EXPECT_EQ(c.select(pos, m), whole) << "n " << n;
    row_length_mattered |= whole != causal_only;
  }
  EXPECT_TRUE(row_length_mattered) << "no tie here broke differently by row length; the test proves nothing";
}

// The indexer's picks feed a CSA row: end to end on one query, the picks are distinct and the row
// reads them and only them.
TEST_F(V4Attention, IndexerPicksDriveTheCsaRow) {
  spec_.rate = 4;
  const int64_t pos = 30;  // 7 causal entries of 10
  IndexCase ic(kEntries, 4, 41);
  const auto picks = ic.select(pos, spec_.rate);
  std::vector<int32_t> valid;
  for (const int32_t w : picks)
    if (w >= 0) valid.push_back(w);
  ASSERT_EQ(valid.size(), 4u);
  EXPECT_TRUE(std::adjacent_find(valid.begin(), valid.end(), std::greater_equal<int32_t>()) == valid.end());
  for (const int32_t w : valid) EXPECT_LT(std::size_t(w), engine::v4_causal_entries(pos, spec_.rate));
  const auto got = pass_row(pos, picks.data(), picks.size(), sinks_.data());
  std::vector<const float*> ptrs;
  for (int64_t j = pos - spec_.window + 1; j <= pos; ++j) ptrs.push_back(kv_at(j));
  for (const int32_t w : valid) ptrs.push_back(entry(w));
  const auto want = row_in_double(q_at(pos), ptrs, sinks_.data(), inv_freq_, pos, spec_);
  for (std::size_t i = 0; i < qrow(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i])));
}

}  // namespace
}  // namespace ft::test

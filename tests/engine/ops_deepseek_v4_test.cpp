// DeepSeek-V4's reference ops (ops_hyper.h, ops_compressor.h) against docs/deepseek-v4.md written
// out again here in double: the hyper-connections' Sinkhorn, residual update and head collapse; the
// compressors' entries, their independence of how a sequence is split into passes (also in the
// fixed-size form a sequence state keeps), and CSA's window 0; the rope on the last r dims and its
// inverse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "deepseek_v4_test_util.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_hyper.h"

namespace ft::test {
namespace {

using engine::CompressorSpec;
using engine::CompressorState;
using engine::HyperSpec;

// ---- hyper-connections ------------------------------------------------------------------------

struct HcOut {
  std::vector<double> x, post, comb;
};

// §2.5 in double, step for step.
HcOut hc_pre_double(const float* ht, const std::vector<float>& fn, const std::vector<float>& base,
                    const std::vector<float>& scale, const HyperSpec& s) {
  const std::size_t N = s.streams, D = s.dim, n = N * D;
  const double eps = s.eps;
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) ss += double(ht[i]) * ht[i];
  const double inv = 1.0 / std::sqrt(ss / double(n) + double(s.norm_eps));
  std::vector<double> mix(s.mix_rows());
  for (std::size_t r = 0; r < mix.size(); ++r) {
    for (std::size_t i = 0; i < n; ++i) mix[r] += double(fn[r * n + i]) * ht[i] * inv;
  }
  const auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  HcOut o;
  std::vector<double> pre(N);
  for (std::size_t k = 0; k < N; ++k) {
    pre[k] = sig(mix[k] * scale[0] + base[k]) + eps;
    o.post.push_back(2.0 * sig(mix[N + k] * scale[1] + base[N + k]));
  }
  std::vector<double>& c = o.comb;
  c.resize(N * N);
  for (std::size_t j = 0; j < N; ++j) {
    double mx = -1e300, sum = 0;
    for (std::size_t k = 0; k < N; ++k) {
      c[j * N + k] = mix[2 * N + j * N + k] * scale[2] + base[2 * N + j * N + k];
      mx = std::max(mx, c[j * N + k]);
    }
    for (std::size_t k = 0; k < N; ++k) sum += c[j * N + k] = std::exp(c[j * N + k] - mx);
    for (std::size_t k = 0; k < N; ++k) c[j * N + k] = c[j * N + k] / sum + eps;
  }
  const auto norm_columns = [&] {
    for (std::size_t k = 0; k < N; ++k) {
      double sum = 0;
      for (std::size_t j = 0; j < N; ++j) sum += c[j * N + k];
      for (std::size_t j = 0; j < N; ++j) c[j * N + k] /= sum + eps;
    }
  };
  norm_columns();
  for (std::size_t it = 1; it < s.sinkhorn_iters; ++it) {
    for (std::size_t j = 0; j < N; ++j) {
      double sum = 0;
      for (std::size_t k = 0; k < N; ++k) sum += c[j * N + k];
      for (std::size_t k = 0; k < N; ++k) c[j * N + k] /= sum + eps;
    }
    norm_columns();
  }
  o.x.assign(D, 0.0);
  for (std::size_t d = 0; d < D; ++d)
    for (std::size_t k = 0; k < N; ++k) o.x[d] += pre[k] * ht[k * D + d];
  return o;
}

class HyperReference : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.streams = 4;
    spec_.dim = 32;
    const std::size_t n = spec_.streams * spec_.dim;
    h_ = randn(kT * n, rng_, 2.0f);
    // Logits of order a few units, so the softmax and the Sinkhorn have real work to do.
    fn_ = randn(spec_.mix_rows() * n, rng_, 1.5f / std::sqrt(float(n)));
    base_ = randn(spec_.mix_rows(), rng_, 0.5f);
    scale_ = {0.8f, 1.2f, 1.0f};
  }
  static constexpr std::size_t kT = 6;
  std::mt19937 rng_{7};
  HyperSpec spec_;
  std::vector<float> h_, fn_, base_, scale_;
};

TEST_F(HyperReference, PreMatchesTheSpecInDoubleAndCombIsDoublyStochastic) {
  const std::size_t N = spec_.streams, D = spec_.dim;
  std::vector<float> x(kT * D), post(kT * N), comb(kT * N * N);
  engine::ref::hc_pre(h_.data(), fn_.data(), base_.data(), scale_.data(), kT, spec_, x.data(), post.data(),
                      comb.data());
  double spread = 0;  // how far from uniform the comb logits' softmax started
  for (std::size_t t = 0; t < kT; ++t) {
    const HcOut want = hc_pre_double(h_.data() + t * N * D, fn_, base_, scale_, spec_);
    for (std::size_t d = 0; d < D; ++d) EXPECT_NEAR(x[t * D + d], want.x[d], 1e-5 * (1 + std::abs(want.x[d])));
    for (std::size_t k = 0; k < N; ++k) EXPECT_NEAR(post[t * N + k], want.post[k], 1e-6);
    for (std::size_t i = 0; i < N * N; ++i) {
      EXPECT_NEAR(comb[t * N * N + i], want.comb[i], 1e-5) << "token " << t << " entry " << i;
      spread = std::max(spread, std::abs(want.comb[i] - 1.0 / double(N)));
    }
    // Columns last: they sum to 1 / (1 + eps); rows approach the same after 20 rounds.
    for (std::size_t a = 0; a < N; ++a) {
      double row = 0, col = 0;
      for (std::size_t b = 0; b < N; ++b) {
        row += comb[t * N * N + a * N + b];
        col += comb[t * N * N + b * N + a];
      }
      EXPECT_NEAR(col, 1.0, 1e-5);
      EXPECT_NEAR(row, 1.0, 1e-5);
    }
  }
  EXPECT_GT(spread, 0.05);  // not a trivially uniform matrix
}

TEST_F(HyperReference, OneSinkhornRoundLeavesTheRowsUnbalanced) {
  // The same inputs with iters = 1 (softmax, one column pass): rows are visibly off, so the check
  // above is one the Sinkhorn loop has to earn.
  spec_.sinkhorn_iters = 1;
  const std::size_t N = spec_.streams, D = spec_.dim;
  std::vector<float> x(kT * D), post(kT * N), comb(kT * N * N);
  engine::ref::hc_pre(h_.data(), fn_.data(), base_.data(), scale_.data(), kT, spec_, x.data(), post.data(),
                      comb.data());
  double worst = 0;
  for (std::size_t t = 0; t < kT; ++t) {
    const HcOut want = hc_pre_double(h_.data() + t * N * D, fn_, base_, scale_, spec_);
    for (std::size_t i = 0; i < N * N; ++i) EXPECT_NEAR(comb[t * N * N + i], want.comb[i], 1e-5);
    for (std::size_t j = 0; j < N; ++j) {
      double row = 0;
      for (std::size_t k = 0; k < N; ++k) row += comb[t * N * N + j * N + k];
      worst = std::max(worst, std::abs(row - 1.0));
    }
  }
  EXPECT_GT(worst, 1e-2);
}

TEST_F(HyperReference, EveryEpsIsWhereTheSpecPutsIt) {
  // hc_eps 1e-6 hides in the tolerances; a large one shows each place it enters (pre, the softmax,
  // every Sinkhorn divisor, the head's pre).
  spec_.eps = 0.1f;
  const std::size_t N = spec_.streams, D = spec_.dim;
  std::vector<float> x(kT * D), post(kT * N), comb(kT * N * N), y(kT * D);
  engine::ref::hc_pre(h_.data(), fn_.data(), base_.data(), scale_.data(), kT, spec_, x.data(), post.data(),
                      comb.data());
  engine::ref::hc_head(h_.data(), fn_.data(), base_.data(), scale_.data(), kT, spec_, y.data());
  for (std::size_t t = 0; t < kT; ++t) {
    const HcOut want = hc_pre_double(h_.data() + t * N * D, fn_, base_, scale_, spec_);
    for (std::size_t d = 0; d < D; ++d) {
      EXPECT_NEAR(x[t * D + d], want.x[d], 1e-5 * (1 + std::abs(want.x[d])));
      EXPECT_NEAR(y[t * D + d], want.x[d], 1e-5 * (1 + std::abs(want.x[d])));
    }
    for (std::size_t i = 0; i < N * N; ++i) EXPECT_NEAR(comb[t * N * N + i], want.comb[i], 1e-5);
  }
}

TEST_F(HyperReference, PostWithIdentityCombAndZeroPostIsTheIdentity) {
  const std::size_t N = spec_.streams, D = spec_.dim;
  const auto out = randn(kT * D, rng_);
  std::vector<float> post(kT * N, 0.0f), comb(kT * N * N, 0.0f);
  for (std::size_t t = 0; t < kT; ++t)
    for (std::size_t k = 0; k < N; ++k) comb[t * N * N + k * N + k] = 1.0f;
  std::vector<float> h_new(h_.size());
  engine::ref::hc_post(h_.data(), out.data(), post.data(), comb.data(), kT, spec_, h_new.data());
  EXPECT_EQ(h_new, h_);
  std::vector<float> h = h_;
  engine::ref::hc_post(h.data(), out.data(), post.data(), comb.data(), kT, spec_, h.data());
  EXPECT_EQ(h, h_);
}

TEST_F(HyperReference, PostIsTheTransposedCombInPlaceOrNot) {
  const std::size_t N = spec_.streams, D = spec_.dim;
  const auto out = randn(kT * D, rng_), post = randn(kT * N, rng_), comb = randn(kT * N * N, rng_);
  std::vector<float> h_new(h_.size());
  engine::ref::hc_post(h_.data(), out.data(), post.data(), comb.data(), kT, spec_, h_new.data());
  for (std::size_t t = 0; t < kT; ++t) {
    for (std::size_t k = 0; k < N; ++k) {
      for (std::size_t d = 0; d < D; ++d) {
        double want = double(post[t * N + k]) * out[t * D + d];
        for (std::size_t j = 0; j < N; ++j) want += double(comb[t * N * N + j * N + k]) * h_[(t * N + j) * D + d];
        EXPECT_NEAR(h_new[(t * N + k) * D + d], want, 1e-5 * (1 + std::abs(want)));
      }
    }
  }
  std::vector<float> h = h_;
  engine::ref::hc_post(h.data(), out.data(), post.data(), comb.data(), kT, spec_, h.data());
  EXPECT_EQ(h, h_new);  // in place reads every stream before it writes one
}

TEST_F(HyperReference, HeadIsPresCollapseWithPresRows) {
  const std::size_t N = spec_.streams, D = spec_.dim;
  std::vector<float> x(kT * D), post(kT * N), comb(kT * N * N), y(kT * D);
  engine::ref::hc_pre(h_.data(), fn_.data(), base_.data(), scale_.data(), kT, spec_, x.data(), post.data(),
                      comb.data());
  const std::vector<float> head_fn(fn_.begin(), fn_.begin() + std::ptrdiff_t(N * N * D));
  const std::vector<float> head_base(base_.begin(), base_.begin() + std::ptrdiff_t(N));
  const float head_scale = scale_[0];
  engine::ref::hc_head(h_.data(), head_fn.data(), head_base.data(), &head_scale, kT, spec_, y.data());
  EXPECT_EQ(y, x);
  // And against the spec: a plain weighted sum of the streams by sigmoid + eps.
  for (std::size_t t = 0; t < kT; ++t) {
    const HcOut want = hc_pre_double(h_.data() + t * N * D, fn_, base_, scale_, spec_);
    for (std::size_t d = 0; d < D; ++d) EXPECT_NEAR(y[t * D + d], want.x[d], 1e-5 * (1 + std::abs(want.x[d])));
  }
}

// ---- rope on the last r dims ---------------------------------------------------------------

TEST(DeepseekV4Rope, TailRopeTurnsOnlyTheLastDimsAndItsInverseUndoesIt) {
  std::mt19937 rng(5);
  const std::size_t heads = 3, dim = 24, r = 16;
  const auto inv_freq = compress_inv_freq(r);
  const auto x0 = randn(heads * dim, rng);
  for (const int64_t pos : {int64_t(0), int64_t(1), int64_t(37), int64_t(12345)}) {
    auto x = x0;
    engine::ref::rope_tail(x.data(), heads, dim, r, inv_freq.data(), pos);
    for (std::size_t h = 0; h < heads; ++h) {
      for (std::size_t i = 0; i < dim - r; ++i) EXPECT_EQ(x[h * dim + i], x0[h * dim + i]);
      for (std::size_t i = 0; i < r / 2; ++i) {
        // Pair (2i, 2i+1) of the tail, turned by pos * inv_freq[i] (GPT-J layout).
        const double a = float(inv_freq[i] * float(pos));
        const double u = x0[h * dim + dim - r + 2 * i], v = x0[h * dim + dim - r + 2 * i + 1];
        EXPECT_NEAR(x[h * dim + dim - r + 2 * i], u * std::cos(a) - v * std::sin(a), 1e-5);
        EXPECT_NEAR(x[h * dim + dim - r + 2 * i + 1], v * std::cos(a) + u * std::sin(a), 1e-5);
      }
    }
    engine::ref::rope_tail(x.data(), heads, dim, r, inv_freq.data(), pos, /*inverse=*/true);
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], x0[i], 1e-5);
  }
  // A head that is all rope: the GPT-J apply_rope, bit for bit.
  engine::ref::RopeSpec spec;
  spec.head_dim = r;
  spec.rotary_dim = r;
  spec.layout = engine::ref::RopeLayout::kGptj;
  auto a = randn(heads * r, rng), b = a;
  engine::ref::rope_tail(a.data(), heads, r, r, inv_freq.data(), 99);
  engine::ref::apply_rope(b.data(), 1, heads, spec, inv_freq, 99);
  EXPECT_EQ(a, b);
}

// ---- compressors ---------------------------------------------------------------------------

// One compressor with random weights and a sequence of raw kv / gate rows.
struct CompressorCase {
  CompressorSpec spec;
  std::vector<float> kv, gate, bias, norm_w, inv_freq;
  std::size_t T = 0;

  CompressorCase(bool overlap, std::size_t rate, std::size_t T_, unsigned seed) : T(T_) {
    std::mt19937 rng(seed);
    spec.width = 24;
    spec.rate = rate;
    spec.overlap = overlap;
    spec.rope_dims = 16;
    kv = randn(T * spec.row(), rng);
    gate = randn(T * spec.row(), rng, 1.5f);
    bias = randn(rate * spec.row(), rng, 0.5f);
    norm_w = randn(spec.width, rng, 0.1f);
    for (float& w : norm_w) w += 1.0f;
    inv_freq = compress_inv_freq(spec.rope_dims);
  }

  // The sequence fed in passes of the given lengths (summing to T).
  std::vector<float> run(const std::vector<std::size_t>& passes, CompressorState& st) const {
    std::vector<float> entries;
    std::size_t t0 = 0;
    for (const std::size_t n : passes) {
      EXPECT_EQ(st.position(spec), int64_t(t0));
      const std::size_t got = engine::ref::compress(kv.data() + t0 * spec.row(), gate.data() + t0 * spec.row(), n,
                                                    bias.data(), norm_w.data(), inv_freq.data(), spec, st, entries);
      EXPECT_EQ(got, (t0 + n) / spec.rate - t0 / spec.rate);
      t0 += n;
    }
    EXPECT_EQ(t0, T);
    return entries;
  }

  // Entry w from §2.7's formula, in double: the window's slots (CSA: window w-1's Ca, then window
  // w's Cb; HCA: window w's rows), softmax per channel of gate + bias, the weighted kv sum, kv_norm,
  // then the tail rope at position w * m.
  std::vector<double> entry(std::size_t w) const {
    const std::size_t m = spec.rate, W = spec.width, row = spec.row();
    struct Slot {
      std::size_t token, offset, bias_row;
    };
    std::vector<Slot> slots;
    if (spec.overlap && w > 0)
      for (std::size_t j = 0; j < m; ++j) slots.push_back({(w - 1) * m + j, 0, j});
    for (std::size_t j = 0; j < m; ++j) slots.push_back({w * m + j, spec.overlap ? W : 0, j});
    std::vector<double> e(W);
    for (std::size_t c = 0; c < W; ++c) {
      std::vector<double> z;
      for (const Slot& s : slots)
        z.push_back(double(gate[s.token * row + s.offset + c]) + bias[s.bias_row * row + s.offset + c]);
      const double mx = *std::max_element(z.begin(), z.end());
      double sum = 0;
      for (double& v : z) sum += v = std::exp(v - mx);
      for (std::size_t i = 0; i < slots.size(); ++i)
        e[c] += z[i] / sum * kv[slots[i].token * row + slots[i].offset + c];
    }
    double ss = 0;
    for (const double v : e) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(W) + double(spec.norm_eps));
    for (std::size_t c = 0; c < W; ++c) e[c] *= inv * norm_w[c];
    const std::size_t r = spec.rope_dims;
    for (std::size_t i = 0; i < r / 2; ++i) {
      const double a = float(inv_freq[i] * float(w * m));
      const double u = e[W - r + 2 * i], v = e[W - r + 2 * i + 1];
      e[W - r + 2 * i] = u * std::cos(a) - v * std::sin(a);
      e[W - r + 2 * i + 1] = v * std::cos(a) + u * std::sin(a);
    }
    return e;
  }
};

void expect_split_independent(const CompressorCase& c) {
  CompressorState one, many;
  const auto whole = c.run({c.T}, one);
  const auto split = c.run({5, 1, 1, 13, 17}, many);
  ASSERT_EQ(whole.size(), (c.T / c.spec.rate) * c.spec.width);
  EXPECT_EQ(one.entries, int64_t(c.T / c.spec.rate));
  EXPECT_EQ(whole, split);  // bit for bit
  EXPECT_EQ(one.kv, many.kv);
  EXPECT_EQ(one.gate, many.gate);
  EXPECT_EQ(one.prev_kv, many.prev_kv);
  EXPECT_EQ(one.prev_gate, many.prev_gate);
  EXPECT_EQ(one.open_tokens(c.spec), c.T % c.spec.rate);
  EXPECT_EQ(one.position(c.spec), int64_t(c.T));
  // Every entry against the formula.
  for (std::size_t w = 0; w < c.T / c.spec.rate; ++w) {
    const auto want = c.entry(w);
    for (std::size_t i = 0; i < c.spec.width; ++i)
      EXPECT_NEAR(whole[w * c.spec.width + i], want[i], 2e-5 * (1 + std::abs(want[i])))
          << "entry " << w << " dim " << i;
  }
}

TEST(DeepseekV4Compressor, HcaEntriesDoNotDependOnTheSplitAndFollowTheFormula) {
  expect_split_independent(CompressorCase(false, 4, 37, 11));
  expect_split_independent(CompressorCase(false, 16, 37, 12));
}

TEST(DeepseekV4Compressor, CsaEntriesDoNotDependOnTheSplitAndFollowTheFormula) {
  expect_split_independent(CompressorCase(true, 4, 37, 13));
}

TEST(DeepseekV4Compressor, CsaWindowZeroIgnoresCaAndLaterWindowsReadThePreviousCa) {
  const CompressorCase base(true, 4, 12, 21);
  const std::size_t m = base.spec.rate, W = base.spec.width, row = base.spec.row();
  CompressorState st;
  const auto want = base.run({base.T}, st);
  // Window 0's tokens' Ca (kv and gate) changed: entry 0 is the same bits, entry 1 (whose Ca slots
  // they are) moves, entry 2 does not.
  CompressorCase ca = base;
  for (std::size_t t = 0; t < m; ++t) {
    for (std::size_t c = 0; c < W; ++c) {
      ca.kv[t * row + c] += 1.0f;
      ca.gate[t * row + c] -= 2.0f;
    }
  }
  CompressorState st_ca;
  const auto got = ca.run({3, 9}, st_ca);
  ASSERT_EQ(got.size(), 3 * W);
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + std::ptrdiff_t(W), want.begin()));
  EXPECT_FALSE(std::equal(got.begin() + std::ptrdiff_t(W), got.begin() + std::ptrdiff_t(2 * W),
                          want.begin() + std::ptrdiff_t(W)));
  EXPECT_TRUE(std::equal(got.begin() + std::ptrdiff_t(2 * W), got.end(), want.begin() + std::ptrdiff_t(2 * W)));
  // Window 0's Cb does make entry 0.
  CompressorCase cb = base;
  cb.kv[row - 1] += 1.0f;
  CompressorState st_cb;
  const auto got_cb = cb.run({base.T}, st_cb);
  EXPECT_FALSE(std::equal(got_cb.begin(), got_cb.begin() + std::ptrdiff_t(W), want.begin()));
}

// compress_rows, the fixed-size form a sequence state keeps: fed in any split, with its rings a
// column of wider rows (a CSA layer's two compressors side by side), each pass's closing tokens get
// compress()'s entries bit for bit and every other row zeros.
void expect_rows_match_compress(const CompressorCase& c, const std::vector<std::size_t>& passes) {
  CompressorState st;
  const auto want = c.run({c.T}, st);
  const std::size_t W = c.spec.width, row = c.spec.row(), R = c.spec.ring_tokens(), ld = row + 5, column = 3;
  std::vector<float> ring_kv(R * ld, -7.0f), ring_gate(R * ld, -7.0f);  // garbage before position 0
  std::size_t t0 = 0, next = 0;
  for (const std::size_t n : passes) {
    std::vector<float> entries(n * W, 99.0f);
    engine::ref::compress_rows(c.kv.data() + t0 * row, c.gate.data() + t0 * row, n, int64_t(t0), c.bias.data(),
                               c.norm_w.data(), c.inv_freq.data(), c.spec, ring_kv.data() + column,
                               ring_gate.data() + column, ld, entries.data());
    for (std::size_t t = 0; t < n; ++t) {
      const float* got = entries.data() + t * W;
      if ((t0 + t + 1) % c.spec.rate == 0) {
        ASSERT_LT(next, want.size() / W);
        EXPECT_TRUE(std::equal(got, got + W, want.begin() + std::ptrdiff_t(next * W))) << "entry " << next;
        ++next;
      } else {
        EXPECT_TRUE(std::all_of(got, got + W, [](float v) { return v == 0.0f; })) << "position " << t0 + t;
      }
    }
    t0 += n;
  }
  EXPECT_EQ(next, c.T / c.spec.rate);
  for (std::size_t r = 0; r < R; ++r) {  // the columns beside the compressor's are untouched
    for (std::size_t i = 0; i < column; ++i) EXPECT_EQ(ring_kv[r * ld + i], -7.0f);
    for (std::size_t i = column + row; i < ld; ++i) EXPECT_EQ(ring_gate[r * ld + i], -7.0f);
  }
}

TEST(DeepseekV4Compressor, FixedSizeRowsGiveTheEntriesInAnySplit) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "CSA" : "HCA");
    const CompressorCase c(overlap, 4, 37, 41);
    expect_rows_match_compress(c, {37});
    expect_rows_match_compress(c, {5, 1, 1, 13, 17});
    expect_rows_match_compress(c, std::vector<std::size_t>(37, 1));
    expect_rows_match_compress(c, {3, 20, 14});
  }
  expect_rows_match_compress(CompressorCase(false, 16, 37, 42), {15, 1, 2, 19});
}

TEST(DeepseekV4Compressor, ShortSequencesGiveNoEntryAndKeepTheirRows) {
  const CompressorCase c(false, 16, 15, 31);
  CompressorState st;
  EXPECT_TRUE(c.run({7, 8}, st).empty());
  EXPECT_EQ(st.entries, 0);
  EXPECT_EQ(st.open_tokens(c.spec), 15u);
  EXPECT_EQ(st.position(c.spec), 15);
  EXPECT_TRUE(st.prev_kv.empty());
}

}  // namespace
}  // namespace ft::test

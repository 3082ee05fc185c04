// Each ISA path of the CPU expert kernels against the scalar reference, on random data whose sizes
// are not multiples of any vector width (tails, partial row tiles and partial token tiles all run).
// A path this CPU lacks is skipped with a message; the scalar path always runs.
//
// Tolerances are bounds, not guesses. With u = 2^-24 (fp32 unit roundoff), a dot product of n
// terms summed in any order in fp32 differs from another order by at most about n*u*M, where
// M = sum_i |w_i x_i| is its magnitude sum; both sides round, so we allow 2*n*u*M. The AVX512-BF16
// path first rounds each activation to bf16 (8 significant bits, unit roundoff 2^-9), which moves
// the exact dot product by at most 2^-9 * M, so it gets 2^-9 * M on top. For the full expert those
// per-dot bounds are pushed through silu(g)*u (|silu'| <= 1.1) and down_proj, then doubled for the
// second-order terms the propagation leaves out.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ft/engine/expert_kernels.h"

namespace ft::engine {
namespace {

constexpr double kU = 1.0 / (1 << 24);   // fp32 unit roundoff
constexpr double kBf16U = 1.0 / (1 << 9);  // bf16 unit roundoff (round to nearest even)

// Relative (to the magnitude sum) bound on one path's dot product of n terms.
double dot_bound(CpuIsa isa, std::size_t n) {
  const double order = 2.0 * double(n) * kU;
  return isa == CpuIsa::kAvx512Bf16 ? kBf16U + order : order;
}

std::vector<float> random_floats(std::size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

std::vector<bf16_t> random_bf16(std::size_t n, float scale, std::mt19937& rng) {
  std::vector<bf16_t> v(n);
  std::uniform_real_distribution<float> d(-scale, scale);
  for (bf16_t& b : v) b = f32_to_bf16(d(rng));
  return v;
}

// M[t, r] = sum_c |x[t, c]| * |W[r, c]|, in double.
std::vector<double> magnitude(const float* x, const bf16_t* w, std::size_t tokens, std::size_t rows,
                              std::size_t cols) {
  std::vector<double> m(tokens * rows, 0.0);
  for (std::size_t t = 0; t < tokens; ++t)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        m[t * rows + r] += std::fabs(double(x[t * cols + c])) * std::fabs(double(bf16_to_f32(w[r * cols + c])));
  return m;
}

std::string isa_skip_message(CpuIsa isa) {
  return std::string("this CPU lacks the ") + cpu_isa_name(isa) + " path; skipped";
}

const CpuIsa kAllIsas[] = {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16};

TEST(ExpertKernelBf16, ConvertsWithRoundToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.0f + 1.5f / 256), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
}

TEST(ExpertKernelCpuIsa, ScalarIsAlwaysSupportedAndBestIsSupported) {
  EXPECT_TRUE(cpu_isa_supported(CpuIsa::kScalar));
  EXPECT_TRUE(cpu_isa_supported(best_cpu_isa()));
  for (CpuIsa isa : kAllIsas) {
    CpuIsa parsed;
    ASSERT_TRUE(parse_cpu_isa(cpu_isa_name(isa), &parsed));
    EXPECT_EQ(parsed, isa);
    std::printf("[ info     ] %-10s %s\n", cpu_isa_name(isa), cpu_isa_supported(isa) ? "supported" : "not supported");
  }
  std::printf("[ info     ] best path: %s\n", cpu_isa_name(best_cpu_isa()));
}

using Param = std::tuple<CpuIsa, int>;  // path, tokens

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return std::string(cpu_isa_name(std::get<0>(info.param))) + "_T" + std::to_string(std::get<1>(info.param));
}

class ExpertMatmulBf16Test : public testing::TestWithParam<Param> {};

TEST_P(ExpertMatmulBf16Test, MatchesReference) {
  const auto [isa, tokens_int] = GetParam();
  if (!cpu_isa_supported(isa)) GTEST_SKIP() << isa_skip_message(isa);
  const std::size_t T = std::size_t(tokens_int);
  std::mt19937 rng(1234 + tokens_int);
  // (rows, cols): odd rows leave a partial 4-row tile; cols leave tails for 8/16/32-wide steps.
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{37, 131}, {5, 7}, {1, 33}, {203, 2051}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
    const auto w = random_bf16(rows * cols, 0.1f, rng);
    const auto x = random_floats(T * cols, -1.f, 1.f, rng);
    std::vector<float> want(T * rows), got(T * rows, NAN);
    ref::matmul_bf16(x.data(), w.data(), want.data(), T, rows, cols);
    matmul_bf16(x.data(), w.data(), got.data(), T, rows, cols, isa);
    const auto mag = magnitude(x.data(), w.data(), T, rows, cols);
    const double k = dot_bound(isa, cols);
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], k * mag[i] + 1e-30) << "token " << i / rows << " row " << i % rows;
    }
  }
}

// With activations that are already bf16 values, the BF16 path loses nothing to rounding and must
// agree to summation order (2*n*u*M), like the fp32 paths.
TEST_P(ExpertMatmulBf16Test, ExactOnBf16Activations) {
  const auto [isa, tokens_int] = GetParam();
  if (!cpu_isa_supported(isa)) GTEST_SKIP() << isa_skip_message(isa);
  const std::size_t T = std::size_t(tokens_int), rows = 45, cols = 389;
  std::mt19937 rng(99 + tokens_int);
  const auto w = random_bf16(rows * cols, 0.1f, rng);
  auto x = random_floats(T * cols, -1.f, 1.f, rng);
  for (float& f : x) f = bf16_to_f32(f32_to_bf16(f));
  std::vector<float> want(T * rows), got(T * rows, NAN);
  ref::matmul_bf16(x.data(), w.data(), want.data(), T, rows, cols);
  matmul_bf16(x.data(), w.data(), got.data(), T, rows, cols, isa);
  const auto mag = magnitude(x.data(), w.data(), T, rows, cols);
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2.0 * cols * kU * mag[i] + 1e-30) << "token " << i / rows << " row " << i % rows;
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ExpertMatmulBf16Test,
                         testing::Combine(testing::ValuesIn(kAllIsas), testing::Values(1, 3, 17)), param_name);

class ExpertSwigluTest : public testing::TestWithParam<Param> {};

TEST_P(ExpertSwigluTest, MatchesReference) {
  const auto [isa, tokens_int] = GetParam();
  if (!cpu_isa_supported(isa)) GTEST_SKIP() << isa_skip_message(isa);
  const std::size_t T = std::size_t(tokens_int);
  std::mt19937 rng(777 + tokens_int);
  ExpertScratch scratch;  // reused across sizes, as the decode loop does
  for (auto [H, I] : {std::pair<std::size_t, std::size_t>{83, 45}, {1029, 389}}) {
    SCOPED_TRACE("hidden " + std::to_string(H) + " inter " + std::to_string(I));
    const auto gate = random_bf16(I * H, 0.08f, rng), up = random_bf16(I * H, 0.08f, rng);
    const auto down = random_bf16(H * I, 0.08f, rng);
    const ExpertWeights w{gate.data(), up.data(), down.data(), H, I};
    const auto x = random_floats(T * H, -1.f, 1.f, rng);
    const auto rw = random_floats(T, 0.05f, 1.f, rng);
    const auto out0 = random_floats(T * H, -1.f, 1.f, rng);  // out is accumulated into
    std::vector<float> want = out0, got = out0;
    ref::expert_swiglu(w, x.data(), rw.data(), want.data(), T);
    expert_swiglu(w, x.data(), rw.data(), got.data(), T, isa, &scratch);

    // Propagate the per-dot bounds (see the top of the file).
    std::vector<float> g(T * I), u(T * I);
    ref::matmul_bf16(x.data(), gate.data(), g.data(), T, I, H);
    ref::matmul_bf16(x.data(), up.data(), u.data(), T, I, H);
    const auto G = magnitude(x.data(), gate.data(), T, I, H), U = magnitude(x.data(), up.data(), T, I, H);
    const double k1 = dot_bound(isa, H), k2 = dot_bound(isa, I);
    std::vector<double> h_abs(T * I), h_err(T * I);
    for (std::size_t i = 0; i < T * I; ++i) {
      const double dg = k1 * G[i], du = k1 * U[i];
      const double silu_g = std::fabs(g[i] / (1.0 + std::exp(-double(g[i]))));
      h_abs[i] = silu_g * std::fabs(u[i]);
      h_err[i] = 1.1 * dg * (std::fabs(u[i]) + du) + silu_g * du;
    }
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t r = 0; r < H; ++r) {
        double via_h = 0, mag = 0;
        for (std::size_t j = 0; j < I; ++j) {
          const double d = std::fabs(double(bf16_to_f32(down[r * I + j])));
          via_h += d * h_err[t * I + j];
          mag += d * (h_abs[t * I + j] + h_err[t * I + j]);
        }
        const std::size_t i = t * H + r;
        const double bound = 2.0 * (rw[t] * (via_h + k2 * mag) + 2 * kU * std::fabs(want[i])) + 1e-30;
        ASSERT_NEAR(got[i], want[i], bound) << "token " << t << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ExpertSwigluTest,
                         testing::Combine(testing::ValuesIn(kAllIsas), testing::Values(1, 3, 17)), param_name);

}  // namespace
}  // namespace ft::engine

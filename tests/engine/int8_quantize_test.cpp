// The CPU integer products (ops/cpu/int8_dots.h): the activation planes' vector quantiser writes
// the scalar definition's bits, block by block, whatever the block holds; the 256-bit kernels with
// and without AVX-VNNI give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "ops/cpu/int8_dots.h"

namespace ft::test {
namespace {

using engine::CpuIsa;
using engine::cpu::X8Rows;

// n normal values of spread sigma from a fixed seed.
std::vector<float> normal_values(std::size_t n, unsigned seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// Same bytes, NaN for NaN included (memcmp, not ==).
template <typename T>
bool same_bits(const T* a, const T* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

TEST(Int8Quantize, VectorPlanesAreTheScalarDefinitionsBits) {
  constexpr std::size_t T = 3, cols = 2048;
  std::vector<float> x = normal_values(T * cols, 5, 1.f);
  // Blocks of 256 with what the planes must carry through: all zeros, magnitudes 1e8 apart, exact
  // halves (ties round to even), a NaN, an infinity, subnormals, values that round to +-127.
  float* r = x.data();
  std::fill(r, r + 256, 0.f);
  for (std::size_t i = 256; i < 512; ++i) r[i] *= i % 2 ? 1e4f : 1e-4f;
  for (std::size_t i = 512; i < 768; ++i) r[i] = float(int(i % 64) - 32) * 0.5f;
  r[768 + 7] = std::numeric_limits<float>::quiet_NaN();
  r[1024 + 100] = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 1280; i < 1536; ++i) r[i] = float(int(i % 7) - 3) * std::numeric_limits<float>::denorm_min();
  for (std::size_t i = 1536; i < 1792; ++i) r[i] = i % 2 ? 127.4999f : -126.5f;
  engine::Scratch scratch;
  X8Rows vec, ref;
  ref.quantize(scratch, x.data(), T, cols, cols, CpuIsa::kScalar);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!engine::cpu_isa_supported(isa)) continue;
    vec.quantize(scratch, x.data(), T, cols, cols, isa);
    for (std::size_t t = 0; t < T; ++t) {
      SCOPED_TRACE(std::string(engine::cpu_isa_name(isa)) + " row " + std::to_string(t));
      EXPECT_TRUE(same_bits(vec.hi(t), ref.hi(t), cols));
      EXPECT_TRUE(same_bits(vec.lo(t), ref.lo(t), cols));
      EXPECT_TRUE(same_bits(vec.scales(t), ref.scales(t), 2 * cols / 256));
      EXPECT_TRUE(same_bits(vec.sums16(t), ref.sums16(t), cols / 16));
      EXPECT_TRUE(same_bits(vec.sums32(t), ref.sums32(t), cols / 32));
    }
  }
  // The special blocks came out as the definition says: zero codes for zeros and for a block
  // holding a NaN or an infinity (whose scales are NaN), and codes reaching +-127.
  for (std::size_t i = 0; i < 256; ++i) ASSERT_EQ(ref.hi(0)[i], 0);
  EXPECT_TRUE(std::isnan(ref.scales(0)[2 * 3]) && std::isnan(ref.scales(0)[2 * 4]));
  for (std::size_t i = 768; i < 1280; ++i) ASSERT_EQ(ref.hi(0)[i], 0) << i;
  EXPECT_EQ(ref.hi(0)[1537], 127);
}

// A row quantised alone gives the bits it gets in a batch (the batch path runs rows in parallel).
TEST(Int8Quantize, ARowIsTheSameAloneAndInABatch) {
  constexpr std::size_t T = 20, cols = 512;
  const std::vector<float> x = normal_values(T * cols, 6, 3.f);
  engine::Scratch scratch;
  X8Rows batch, one;
  batch.quantize(scratch, x.data(), T, cols, cols, engine::best_cpu_isa());
  for (std::size_t t : {std::size_t(0), std::size_t(13)}) {
    one.quantize(scratch, x.data() + t * cols, 1, cols, cols, engine::best_cpu_isa());
    EXPECT_TRUE(same_bits(one.hi(0), batch.hi(t), cols));
    EXPECT_TRUE(same_bits(one.lo(0), batch.lo(t), cols));
    EXPECT_TRUE(same_bits(one.sums16(0), batch.sums16(t), cols / 16));
  }
}

// VPDPWSSD forms acc + the int16 pairs' int32 sums as VPMADDWD + VPADDD do, so the AVX-VNNI
// kernels must give the plain AVX2 kernels' bits for every token count (the CPU backend tests run
// whichever of the two the machine picks).
TEST(Int8Dots, AvxVnniKernelsGiveThePlainAvx2Bits) {
  const engine::cpu::Int8DotsFn probe = engine::cpu::int8_dots256_for(engine::DType::kQ4_K, true);
  if (!probe) GTEST_SKIP() << "no AVX-VNNI";
  constexpr std::size_t cols = 1024, T = 5;
  const std::vector<float> x = normal_values(T * cols, 7, 2.f);
  std::mt19937 rng(8);
  engine::Scratch scratch;
  X8Rows x8;
  x8.quantize(scratch, x.data(), T, cols, cols, CpuIsa::kAvx2);
  for (const auto& [dtype, block] : {std::pair{engine::DType::kQ4_K, 144}, std::pair{engine::DType::kQ5_K, 176},
                                     std::pair{engine::DType::kQ6_K, 210}}) {
    // Random bytes make every code and 6-bit scale pattern; the halves (d, dmin for Q4_K and Q5_K,
    // d at 208 for Q6_K) are set to modest finite values.
    std::vector<std::uint8_t> row(cols / 256 * std::size_t(block));
    for (std::uint8_t& b : row) b = std::uint8_t(rng());
    for (std::size_t i = 0; i < cols / 256; ++i) {
      std::uint8_t* b = row.data() + i * std::size_t(block);
      const std::uint16_t h = std::uint16_t(0x2c00 + rng() % 0x400);
      std::memcpy(b + (dtype == engine::DType::kQ6_K ? 208 : 0), &h, 2);
      if (dtype != engine::DType::kQ6_K) std::memcpy(b + 2, &h, 2);
    }
    const auto plain = engine::cpu::int8_dots256_for(dtype, false), vnni = engine::cpu::int8_dots256_for(dtype, true);
    ASSERT_TRUE(plain && vnni);
    for (std::size_t n = 1; n <= engine::cpu::kInt8DotTokens; ++n) {
      std::vector<float> a(n), b(n);
      plain(row.data(), cols, x8, T - n, n, a.data());
      vnni(row.data(), cols, x8, T - n, n, b.data());
      EXPECT_TRUE(same_bits(a.data(), b.data(), n)) << engine::dtype_name(dtype) << " n " << n;
      EXPECT_NE(a[0], 0.f);
    }
  }
}

}  // namespace
}  // namespace ft::test

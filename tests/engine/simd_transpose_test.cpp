// The shared helpers of ops/cpu/simd.h. The AVX-512 transpose: the CPU attention reads values
// through it and the AMX kernel writes its C tiles through it, so a lane moved to the wrong place
// corrupts both. The F16C half conversion: every GGUF block kernel reads its scales through it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ft/engine/bf16.h"
#include "ops/cpu/simd.h"

namespace ft::test {
namespace {

#if FT_X86
FT_SIMD_BEGIN
FT_TARGET_AVX512 std::vector<std::int32_t> transposed(const std::vector<std::int32_t>& m) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(m.data() + 16 * i);
  engine::cpu::transpose16x16(r);
  std::vector<std::int32_t> out(256);
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(out.data() + 16 * i, r[i]);
  return out;
}
FT_TARGET_AVX2 float f16c_of(std::uint16_t h) { return engine::cpu::f16_at_f16c(&h); }
FT_SIMD_END
#endif

// Every half, subnormals and both signed zeros included, gives the portable conversion's bits;
// NaNs stay NaNs (the instruction quiets a signalling one).
TEST(SimdF16c, EveryHalfConvertsAsThePortableDefinition) {
#if FT_X86
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  int nans = 0;
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float want = engine::f16_to_f32(std::uint16_t(h)), got = f16c_of(std::uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      ++nans;
      continue;
    }
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << std::hex << h;
  }
  EXPECT_EQ(nans, 2 * 1023);
#else
  GTEST_SKIP() << "x86 only";
#endif
}

TEST(SimdTranspose, Lane_j_OfRow_i_BecomesLane_i_OfRow_j) {
#if FT_X86
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) GTEST_SKIP() << "no AVX-512";
  std::vector<std::int32_t> m(256);
  for (int i = 0; i < 256; ++i) m[std::size_t(i)] = i * 7919 + 13;  // every element distinct
  const std::vector<std::int32_t> t = transposed(m);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) EXPECT_EQ(t[std::size_t(16 * j + i)], m[std::size_t(16 * i + j)]) << i << ", " << j;
#else
  GTEST_SKIP() << "x86 only";
#endif
}

}  // namespace
}  // namespace ft::test

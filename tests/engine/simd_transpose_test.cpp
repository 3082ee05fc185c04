// The shared AVX-512 transpose (ops/cpu/simd.h): the CPU attention reads values through it and the
// AMX kernel writes its C tiles through it, so a lane moved to the wrong place corrupts both.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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
FT_SIMD_END
#endif

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

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ft/engine/checkpoint.h"

namespace ft::engine {
namespace {

template <typename T>
TensorView view_of(const std::vector<T>& values, DType dtype) {
  TensorView v;
  v.name = "t";
  v.dtype = dtype;
  v.shape = {int64_t(values.size())};
  v.data = reinterpret_cast<const std::byte*>(values.data());
  v.nbytes = values.size() * sizeof(T);
  return v;
}

TEST(DType, NamesSizesAndParsingAgree) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kU8, DType::kF8E4M3,
                  DType::kI8, DType::kF8E8M0}) {
    auto parsed = dtype_from_name(dtype_name(d));
    ASSERT_TRUE(parsed.is_ok()) << dtype_name(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_STREQ(dtype_name(DType::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kI8), 1u);
  EXPECT_EQ(dtype_size(DType::kF8E8M0), 1u);
}

TEST(DType, UnknownNameIsUnsupportedAndNamed) {
  auto r = dtype_from_name("F64");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("F64"), std::string::npos);
  EXPECT_FALSE(dtype_from_name("f32").is_ok());  // safetensors spellings are upper case
}

TEST(DType, TensorViewShapeHelpers) {
  TensorView v;
  v.shape = {128, 2048};
  EXPECT_EQ(v.numel(), 128 * 2048);
  EXPECT_EQ(v.shape_string(), "[128, 2048]");
  v.shape = {};
  EXPECT_EQ(v.numel(), 1);  // a scalar
  EXPECT_EQ(v.shape_string(), "[]");
}

TEST(Bf16, ExactValuesRoundTrip) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
}

TEST(Bf16, RoundsToNearestEven) {
  auto from_bits = [](uint32_t b) { return std::bit_cast<float>(b); };
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, lower is even: down
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, lower is odd: up
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);  // above the tie: up
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);  // below the tie: down
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf, as RNE must
  EXPECT_EQ(f32_to_bf16(from_bits(0x00000001u)), 0x0000);            // smallest subnormal rounds to 0
}

TEST(Bf16, NanStaysNan) {
  // A signalling NaN whose payload sits only in the low 16 bits would become Inf if merely rounded.
  for (uint32_t bits : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t h = f32_to_bf16(std::bit_cast<float>(bits));
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << bits;
    EXPECT_EQ(h >> 15, bits >> 31) << "sign kept for " << std::hex << bits;
  }
}

TEST(Bf16, EveryValueSurvivesARoundTrip) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const float f = bf16_to_f32(uint16_t(i));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
    } else {
      ASSERT_EQ(f32_to_bf16(f), i) << std::hex << i;
    }
  }
}

TEST(DTypeToF32, F32IsCopiedWithOffsetAndCount) {
  const std::vector<float> v = {1.f, 2.f, 3.f, 4.f};
  std::vector<float> out(2);
  ASSERT_TRUE(to_f32(view_of(v, DType::kF32), out.data(), 1, 2).is_ok());
  EXPECT_EQ(out, (std::vector<float>{2.f, 3.f}));
}

TEST(DTypeToF32, Bf16) {
  const std::vector<uint16_t> v = {0x3f80, 0xc000, 0x4049};  // 1, -2, 3.140625
  std::vector<float> out(3);
  ASSERT_TRUE(to_f32(view_of(v, DType::kBF16), out.data(), 0, 3).is_ok());
  EXPECT_EQ(out, (std::vector<float>{1.f, -2.f, 3.140625f}));
}

TEST(DTypeToF32, F16SpecialValues) {
  const std::vector<uint16_t> v = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x8001};
  std::vector<float> out(v.size());
  ASSERT_TRUE(to_f32(view_of(v, DType::kF16), out.data(), 0, v.size()).is_ok());
  EXPECT_EQ(out[0], 1.f);
  EXPECT_EQ(out[1], -2.f);
  EXPECT_EQ(out[2], 65504.f);                            // largest half
  EXPECT_EQ(out[3], std::ldexp(1.f, -24));               // smallest subnormal
  EXPECT_EQ(out[4], std::ldexp(1023.f, -24));            // largest subnormal
  EXPECT_EQ(out[5], std::ldexp(1.f, -14));               // smallest normal
  EXPECT_EQ(out[6], 0.f);
  EXPECT_TRUE(std::signbit(out[6]));                     // -0 keeps its sign
  EXPECT_EQ(out[7], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[8], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out[9]));
  EXPECT_EQ(out[10], -std::ldexp(1.f, -24));
}

TEST(DTypeToF32, F16AllValuesMatchTheDefinition) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t i = 0; i <= 0xffff; ++i) all[i] = uint16_t(i);
  std::vector<float> out(all.size());
  ASSERT_TRUE(to_f32(view_of(all, DType::kF16), out.data(), 0, all.size()).is_ok());
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const int exp = (i >> 10) & 0x1f;
    const int mant = i & 0x3ff;
    const float sign = (i & 0x8000) ? -1.f : 1.f;
    if (exp == 0x1f) {
      EXPECT_EQ(std::isnan(out[i]), mant != 0) << std::hex << i;
      if (mant == 0) {
        EXPECT_EQ(out[i], sign * std::numeric_limits<float>::infinity());
      }
      continue;
    }
    const float want = exp == 0 ? sign * std::ldexp(float(mant), -24) : sign * std::ldexp(float(1024 + mant), exp - 25);
    ASSERT_EQ(out[i], want) << std::hex << i;
  }
}

TEST(DTypeToF32, OtherDtypesAreUnsupportedAndNamed) {
  const std::vector<int32_t> i32 = {1, 2};
  const std::vector<uint8_t> fp8 = {0x38, 0x40};
  std::vector<float> out(2);
  Status s = to_f32(view_of(i32, DType::kI32), out.data(), 0, 2);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("I32"), std::string::npos) << s.message();
  s = to_f32(view_of(fp8, DType::kF8E4M3), out.data(), 0, 2);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("F8_E4M3"), std::string::npos) << s.message();
}

TEST(DTypeToF32, RangePastTheEndIsRejected) {
  const std::vector<float> v = {1.f, 2.f, 3.f};
  std::vector<float> out(4);
  EXPECT_EQ(to_f32(view_of(v, DType::kF32), out.data(), 2, 2).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(to_f32(view_of(v, DType::kF32), out.data(), 4, 0).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(to_f32(view_of(v, DType::kF32), out.data(), 3, 0).is_ok());
}

}  // namespace
}  // namespace ft::engine

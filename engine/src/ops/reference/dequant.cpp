// ggml's C reference dequantisers (ggml-quants.c, dequantize_row_*), statement for statement, on
// unaligned bytes. Keep every expression in ggml's form: int codes become floats, then one product
// (and one subtraction or addition) in ggml's order; reordering can change the last bit.
#include "ft/engine/dequant.h"

#include <bit>
#include <cstdint>
#include <cstring>

#include "ft/engine/bf16.h"
#include "ops/block_fields.h"

namespace ft::engine {

namespace {

constexpr std::size_t kQk = 32;    // values per Q8_0 / Q4_0 / Q4_1 / MXFP4 block
constexpr std::size_t kQkK = 256;  // values per K-quant super-block

const std::uint8_t* bytes(const std::byte* p) { return reinterpret_cast<const std::uint8_t*>(p); }

// kvalues_mxfp4: the E2M1 values doubled, indexed by the 4-bit code.
constexpr std::int8_t kFp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace

void dequantize_q8_0(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kBytes = 2 + kQk;
  for (std::size_t i = 0; i < n / kQk; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    const float d = f16_at(b);
    const std::int8_t* qs = reinterpret_cast<const std::int8_t*>(b + 2);
    for (std::size_t j = 0; j < kQk; ++j) y[i * kQk + j] = qs[j] * d;
  }
}

void dequantize_q4_0(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kBytes = 2 + kQk / 2;
  for (std::size_t i = 0; i < n / kQk; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    const float d = f16_at(b);
    const std::uint8_t* qs = b + 2;
    for (std::size_t j = 0; j < kQk / 2; ++j) {
      const int x0 = (qs[j] & 0x0F) - 8;
      const int x1 = (qs[j] >> 4) - 8;
      y[i * kQk + j] = x0 * d;
      y[i * kQk + j + kQk / 2] = x1 * d;
    }
  }
}

void dequantize_q4_1(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kBytes = 4 + kQk / 2;
  for (std::size_t i = 0; i < n / kQk; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    const float d = f16_at(b);
    const float m = f16_at(b + 2);
    const std::uint8_t* qs = b + 4;
    for (std::size_t j = 0; j < kQk / 2; ++j) {
      const int x0 = qs[j] & 0x0F;
      const int x1 = qs[j] >> 4;
      y[i * kQk + j] = x0 * d + m;
      y[i * kQk + j + kQk / 2] = x1 * d + m;
    }
  }
}

void dequantize_q4_k(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kBytes = 4 + 12 + kQkK / 2;
  for (std::size_t i = 0; i < n / kQkK; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    const float d = f16_at(b);
    const float min = f16_at(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* q = b + 16;
    int is = 0;
    int sc, m;
    for (std::size_t j = 0; j < kQkK; j += 64) {
      scale_min_k4(is + 0, scales, sc, m);
      const float d1 = d * sc;
      const float m1 = min * m;
      scale_min_k4(is + 1, scales, sc, m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void dequantize_q5_k(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kBytes = 4 + 12 + kQkK / 8 + kQkK / 2;
  for (std::size_t i = 0; i < n / kQkK; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    const float d = f16_at(b);
    const float min = f16_at(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qh = b + 16;
    const std::uint8_t* ql = b + 16 + kQkK / 8;
    int is = 0;
    int sc, m;
    std::uint8_t u1 = 1, u2 = 2;
    for (std::size_t j = 0; j < kQkK; j += 64) {
      scale_min_k4(is + 0, scales, sc, m);
      const float d1 = d * sc;
      const float m1 = min * m;
      scale_min_k4(is + 1, scales, sc, m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

void dequantize_q6_k(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kBytes = kQkK / 2 + kQkK / 4 + kQkK / 16 + 2;
  for (std::size_t i = 0; i < n / kQkK; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    const std::uint8_t* ql = b;
    const std::uint8_t* qh = b + kQkK / 2;
    const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(b + kQkK / 2 + kQkK / 4);
    const float d = f16_at(b + kQkK / 2 + kQkK / 4 + kQkK / 16);
    for (std::size_t n128 = 0; n128 < kQkK; n128 += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const std::int8_t q1 = std::int8_t((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const std::int8_t q2 = std::int8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const std::int8_t q3 = std::int8_t((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const std::int8_t q4 = std::int8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void dequantize_mxfp4(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kBytes = 1 + kQk / 2;
  for (std::size_t i = 0; i < n / kQk; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    const float d = std::bit_cast<float>(e8m0_half_bits(b[0]));
    const std::uint8_t* qs = b + 1;
    for (std::size_t j = 0; j < kQk / 2; ++j) {
      const std::int8_t x0 = kFp4Doubled[qs[j] & 0x0F];
      const std::int8_t x1 = kFp4Doubled[qs[j] >> 4];
      y[i * kQk + j] = x0 * d;
      y[i * kQk + j + kQk / 2] = x1 * d;
    }
  }
}

// The formats' own definitions (FP8: value = e4m3 * scale; NVFP4: value = e2m1 * (e4m3 * global)),
// one rounding per product, as PyTorch computes them.
void dequantize_f8_b128(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kValues = 128, kBytes = 4 + kValues;
  for (std::size_t i = 0; i < n / kValues; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    float d;
    std::memcpy(&d, b, 4);
    for (std::size_t j = 0; j < kValues; ++j) y[i * kValues + j] = std::bit_cast<float>(e4m3_bits(b[4 + j])) * d;
  }
}

void dequantize_nvfp4(const std::byte* blocks, float* y, std::size_t n) {
  constexpr std::size_t kValues = 64, kBytes = 40, kGroup = 16;
  for (std::size_t i = 0; i < n / kValues; ++i) {
    const std::uint8_t* b = bytes(blocks) + i * kBytes;
    float global;
    std::memcpy(&global, b, 4);
    for (std::size_t g = 0; g < kValues / kGroup; ++g) {
      const float d = std::bit_cast<float>(e4m3_bits(b[4 + g])) * global;
      const std::uint8_t* q = b + 8 + g * kGroup / 2;
      float* out = y + i * kValues + g * kGroup;
      for (std::size_t k = 0; k < kGroup / 2; ++k) {
        out[2 * k] = e2m1_value(q[k] & 0x0F) * d;
        out[2 * k + 1] = e2m1_value(q[k] >> 4) * d;
      }
    }
  }
}

bool dequantize_row(DType dtype, const std::byte* blocks, float* out, std::size_t n) {
  switch (dtype) {
    case DType::kQ8_0:
      dequantize_q8_0(blocks, out, n);
      return true;
    case DType::kQ4_0:
      dequantize_q4_0(blocks, out, n);
      return true;
    case DType::kQ4_1:
      dequantize_q4_1(blocks, out, n);
      return true;
    case DType::kQ4_K:
      dequantize_q4_k(blocks, out, n);
      return true;
    case DType::kQ5_K:
      dequantize_q5_k(blocks, out, n);
      return true;
    case DType::kQ6_K:
      dequantize_q6_k(blocks, out, n);
      return true;
    case DType::kMXFP4:
      dequantize_mxfp4(blocks, out, n);
      return true;
    case DType::kF8E4M3B128:
      dequantize_f8_b128(blocks, out, n);
      return true;
    case DType::kNVFP4:
      dequantize_nvfp4(blocks, out, n);
      return true;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI64:
    case DType::kI32:
    case DType::kU8:
    case DType::kF8E4M3:
    case DType::kI8:
    case DType::kF8E8M0:
      break;
  }
  return false;
}

}  // namespace ft::engine

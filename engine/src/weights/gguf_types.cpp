// GGUF's value types and ggml's tensor types: names and block layouts.
#include "ft/engine/gguf.h"

namespace ft::engine {

const char* gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
      return "u8";
    case GgufValueType::kI8:
      return "i8";
    case GgufValueType::kU16:
      return "u16";
    case GgufValueType::kI16:
      return "i16";
    case GgufValueType::kU32:
      return "u32";
    case GgufValueType::kI32:
      return "i32";
    case GgufValueType::kF32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kU64:
      return "u64";
    case GgufValueType::kI64:
      return "i64";
    case GgufValueType::kF64:
      return "f64";
  }
  return "?";
}

namespace {

// Every type a GGUF file may hold (ggml.h's enum ggml_type; the removed ids 4, 5 and 31-33, 36-38
// are absent), with ggml's block sizes (ggml.c's type_traits, gguf-py's GGML_QUANT_SIZES), so the
// reader can check the bytes of tensors it cannot compute with.
constexpr std::uint32_t kQkK = 256;
const GgmlType kTypes[] = {
    {0, "f32", 1, 4, DType::kF32},
    {1, "f16", 1, 2, DType::kF16},
    {2, "q4_0", 32, 18, DType::kQ4_0},
    {3, "q4_1", 32, 20, DType::kQ4_1},
    {6, "q5_0", 32, 22, {}},
    {7, "q5_1", 32, 24, {}},
    {8, "q8_0", 32, 34, DType::kQ8_0},
    {9, "q8_1", 32, 36, {}},
    {10, "q2_K", kQkK, 2 + 2 + kQkK / 16 + kQkK / 4, {}},
    {11, "q3_K", kQkK, 2 + kQkK / 4 + kQkK / 8 + 12, {}},
    {12, "q4_K", kQkK, 2 + 2 + kQkK / 2 + 12, DType::kQ4_K},
    {13, "q5_K", kQkK, 2 + 2 + kQkK / 2 + kQkK / 8 + 12, DType::kQ5_K},
    {14, "q6_K", kQkK, 2 + kQkK / 2 + kQkK / 4 + kQkK / 16, DType::kQ6_K},
    {15, "q8_K", kQkK, 4 + kQkK + kQkK / 8, {}},
    {16, "iq2_xxs", kQkK, 2 + kQkK / 4, {}},
    {17, "iq2_xs", kQkK, 2 + kQkK / 4 + kQkK / 32, {}},
    {18, "iq3_xxs", kQkK, 2 + kQkK / 4 + kQkK / 8, {}},
    {19, "iq1_s", kQkK, 2 + kQkK / 8 + kQkK / 16, {}},
    {20, "iq4_nl", 32, 18, {}},
    {21, "iq3_s", kQkK, 2 + kQkK / 4 + kQkK / 8 + kQkK / 32 + 4, {}},
    {22, "iq2_s", kQkK, 2 + kQkK / 4 + kQkK / 16, {}},
    {23, "iq4_xs", kQkK, 2 + 2 + kQkK / 2 + kQkK / 64, {}},
    {24, "i8", 1, 1, {}},
    {25, "i16", 1, 2, {}},
    {26, "i32", 1, 4, DType::kI32},
    {27, "i64", 1, 8, DType::kI64},
    {28, "f64", 1, 8, {}},
    {29, "iq1_m", kQkK, kQkK / 8 + kQkK / 16 + kQkK / 32, {}},
    {30, "bf16", 1, 2, DType::kBF16},
    {34, "tq1_0", kQkK, 2 + 4 * 13, {}},
    {35, "tq2_0", kQkK, 2 + 64, {}},
    {39, "mxfp4", 32, 17, DType::kMXFP4},
    {40, "nvfp4", 64, 4 + 32, {}},
    {41, "q1_0", 128, 2 + 16, {}},
    {42, "q2_0", 64, 2 + 16, {}},
};

}  // namespace

const GgmlType* ggml_type(std::uint32_t id) {
  for (const GgmlType& t : kTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace ft::engine

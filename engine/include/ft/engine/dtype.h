// Storage dtypes of weights read in place: dense element types (safetensors) and GGUF's block
// types, whose values come in fixed-size blocks that carry their own scales.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ft/common/result.h"

namespace ft::engine {

// Add an entry here plus its conversion in dtype.cpp (and, for a block type, its reference
// dequantiser in ops/reference/dequant.cpp); callers go through to_f32() / matrix_row_f32().
enum class DType {
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kU8,
  kF8E4M3,
  // DeepSeek-V4's releases store FP4 codes packed two a byte as I8 and their scales as F8_E8M0: parts
  // of the quantized weights they make (weights/quantized_safetensors.h).
  kI8,
  kF8E8M0,  // UE8M0: 2^(e - 127), e = 255 NaN (OCP MX)
  // GGUF block types, in ggml's layouts (ggml-common.h): the block's bytes in file order.
  kQ8_0,   // 32 values: f16 scale, 32 x int8
  kQ4_0,   // 32 values: f16 scale, 16 bytes of 4-bit values (offset 8)
  kQ4_1,   // 32 values: f16 scale, f16 min, 16 bytes of 4-bit values
  kQ4_K,   // 256 values: f16 scale, f16 min, 12 bytes of 6-bit sub-block scales/mins, 128 bytes of 4-bit values
  kQ5_K,   // 256 values: as Q4_K plus 32 bytes of fifth bits
  kQ6_K,   // 256 values: 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 sub-block scales, f16 scale
  kMXFP4,  // 32 values: E8M0 shared exponent, 16 bytes of E2M1 (FP4) values
  // Safetensors' scaled formats (FP8 checkpoints, NVFP4), repacked at load into row blocks that carry
  // their scales (weights/quantized_safetensors.h), so every block kernel reads them as it reads GGUF's:
  kF8E4M3B128,  // 128 values: f32 scale, 128 x E4M3 (FP8 with 128x128-tile, per-row or per-tensor scales)
  kNVFP4,       // 64 values: f32 tensor scale, 4 x E4M3 scales (16 values each), 32 bytes of E2M1 pairs
};

// A dtype's storage unit: `elems` consecutive values in `bytes` bytes. A dense dtype is
// {1, element size}; Q4_K is {256, 144}. A row of a matrix is a whole number of blocks.
struct DTypeBlock {
  std::size_t elems = 1;
  std::size_t bytes = 0;
};

const char* dtype_name(DType dtype);  // safetensors spelling ("F32", "BF16", ...); ggml's for blocks ("Q4_K")
DTypeBlock dtype_block(DType dtype);
inline bool dtype_is_block(DType dtype) { return dtype_block(dtype).elems > 1; }
// Bytes per element of a dense dtype. A block dtype has none: asking is a bug, so it aborts with the
// dtype's name rather than return a size that would silently miscompute (use dtype_bytes).
std::size_t dtype_size(DType dtype);
// Bytes of `count` values stored as whole blocks; nullopt when `count` is not a multiple of the
// block or the size overflows.
std::optional<std::size_t> dtype_bytes(DType dtype, std::uint64_t count);
// Safetensors spellings only: block dtypes exist in GGUF files, never in a safetensors header.
Result<DType> dtype_from_name(std::string_view name);

}  // namespace ft::engine

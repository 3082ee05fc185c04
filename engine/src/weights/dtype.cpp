#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>

#include "ft/engine/checkpoint.h"
#include "ft/engine/dequant.h"
#include "ops/block_fields.h"

// safetensors stores little-endian data and we read it in place from the mapping.
static_assert(std::endian::native == std::endian::little, "FreeToken assumes a little-endian host");

namespace ft::engine {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kU8: return "U8";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kI8:
      return "I8";
    case DType::kF8E8M0:
      return "F8_E8M0";
    case DType::kQ8_0:
      return "Q8_0";
    case DType::kQ4_0:
      return "Q4_0";
    case DType::kQ4_1:
      return "Q4_1";
    case DType::kQ4_K:
      return "Q4_K";
    case DType::kQ5_K:
      return "Q5_K";
    case DType::kQ6_K:
      return "Q6_K";
    case DType::kMXFP4:
      return "MXFP4";
    case DType::kF8E4M3B128:
      return "F8_E4M3_B128";
    case DType::kNVFP4:
      return "NVFP4";
  }
  return "?";
}

DTypeBlock dtype_block(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {1, 4};
    case DType::kF16:
      return {1, 2};
    case DType::kBF16:
      return {1, 2};
    case DType::kI64:
      return {1, 8};
    case DType::kI32:
      return {1, 4};
    case DType::kU8:
      return {1, 1};
    case DType::kF8E4M3:
    case DType::kI8:
    case DType::kF8E8M0:
      return {1, 1};
    // ggml's block structs (ggml-common.h), whose sizes gguf-py's GGML_QUANT_SIZES repeats.
    case DType::kQ8_0:
      return {32, 2 + 32};
    case DType::kQ4_0:
      return {32, 2 + 16};
    case DType::kQ4_1:
      return {32, 2 + 2 + 16};
    case DType::kQ4_K:
      return {256, 2 + 2 + 12 + 128};
    case DType::kQ5_K:
      return {256, 2 + 2 + 12 + 32 + 128};
    case DType::kQ6_K:
      return {256, 128 + 64 + 16 + 2};
    case DType::kMXFP4:
      return {32, 1 + 16};
    // FreeToken's own row blocks (dtype.h): the scales first, 4-byte aligned, then the codes.
    case DType::kF8E4M3B128:
      return {128, 4 + 128};
    case DType::kNVFP4:
      return {64, 4 + 4 + 32};
  }
  return {1, 0};
}

std::size_t dtype_size(DType dtype) {
  const DTypeBlock b = dtype_block(dtype);
  if (b.elems != 1) {
    std::fprintf(stderr, "dtype_size(%s): a block dtype has no size per element (use dtype_bytes)\n",
                 dtype_name(dtype));
    std::abort();
  }
  return b.bytes;
}

std::optional<std::size_t> dtype_bytes(DType dtype, std::uint64_t count) {
  const DTypeBlock b = dtype_block(dtype);
  if (b.bytes == 0 || count % b.elems != 0) return std::nullopt;
  std::size_t n = 0;
  if (__builtin_mul_overflow(count / b.elems, b.bytes, &n)) return std::nullopt;
  return n;
}

Result<DType> dtype_from_name(std::string_view name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kU8, DType::kF8E4M3,
                  DType::kI8, DType::kF8E8M0}) {
    if (name == dtype_name(d)) return d;
  }
  return unsupported("dtype '" + std::string(name) + "' is not supported");
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}


namespace {

// The mapping gives no alignment guarantee for a tensor's start, so elements are read with memcpy.
template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Values [offset, offset + count) of a block-dtype tensor: whole blocks straight into `out`, the
// partial blocks at either end through a one-block buffer.
Status blocks_to_f32(DType dtype, const std::byte* data, float* out, std::size_t offset, std::size_t count) {
  const DTypeBlock b = dtype_block(dtype);
  float block[256];
  if (b.elems > std::size(block))
    return internal_error(std::string("to_f32: blocks of ") + dtype_name(dtype) + " are too large");
  std::size_t i = offset;
  const std::size_t end = offset + count;
  while (i < end) {
    const std::size_t first = i / b.elems * b.elems, skip = i - first;
    const std::byte* src = data + first / b.elems * b.bytes;
    if (skip == 0 && end - i >= b.elems) {
      const std::size_t whole = (end - i) / b.elems * b.elems;
      dequantize_row(dtype, src, out + (i - offset), whole);
      i += whole;
      continue;
    }
    dequantize_row(dtype, src, block, b.elems);
    const std::size_t n = std::min(b.elems - skip, end - i);
    std::memcpy(out + (i - offset), block + skip, n * sizeof(float));
    i += n;
  }
  return Status::ok();
}

}  // namespace

Status to_f32(const TensorView& view, float* out, std::size_t offset, std::size_t count) {
  const int64_t numel = view.numel();
  if (numel < 0 || offset > std::size_t(numel) || count > std::size_t(numel) - offset) {
    return invalid_argument("to_f32: elements [" + std::to_string(offset) + ", +" + std::to_string(count) +
                            ") out of range for tensor '" + view.name + "' with " + std::to_string(numel) +
                            " elements");
  }
  if (count == 0) return Status::ok();
  const std::optional<std::size_t> need = dtype_bytes(view.dtype, uint64_t(numel));
  if (view.data == nullptr || !need || view.nbytes < *need) {
    return internal_error("to_f32: tensor '" + view.name + "' has no data, too few bytes or a partial " +
                          dtype_name(view.dtype) + " block");
  }
  if (dtype_is_block(view.dtype)) return blocks_to_f32(view.dtype, view.data, out, offset, count);
  switch (view.dtype) {
    case DType::kF32:
      std::memcpy(out, view.data + offset * 4, count * 4);
      return Status::ok();
    case DType::kBF16: {
      const std::byte* p = view.data + offset * 2;
      for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(load<uint16_t>(p + 2 * i));
      return Status::ok();
    }
    case DType::kF16: {
      const std::byte* p = view.data + offset * 2;
      for (std::size_t i = 0; i < count; ++i) out[i] = f16_to_f32(load<uint16_t>(p + 2 * i));
      return Status::ok();
    }
    case DType::kF8E8M0: {
      const auto* p = reinterpret_cast<const std::uint8_t*>(view.data) + offset;
      for (std::size_t i = 0; i < count; ++i) out[i] = std::bit_cast<float>(e8m0_bits(p[i]));
      return Status::ok();
    }
    case DType::kI64:
    case DType::kI32:
    case DType::kU8:
    case DType::kF8E4M3:
    case DType::kI8:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kMXFP4:
    case DType::kF8E4M3B128:
    case DType::kNVFP4:
      break;
  }
  return unsupported("to_f32: tensor '" + view.name + "' has dtype " + dtype_name(view.dtype) +
                     ", which has no f32 conversion yet");
}

}  // namespace ft::engine

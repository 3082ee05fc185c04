#include <bit>
#include <cstring>
#include <limits>

#include "ft/engine/checkpoint.h"

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
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI64: return 8;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
    case DType::kF8E4M3: return 1;
  }
  return 0;
}

Result<DType> dtype_from_name(std::string_view name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kU8,
                  DType::kF8E4M3}) {
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

}  // namespace

Status to_f32(const TensorView& view, float* out, std::size_t offset, std::size_t count) {
  const int64_t numel = view.numel();
  if (numel < 0 || offset > std::size_t(numel) || count > std::size_t(numel) - offset) {
    return invalid_argument("to_f32: elements [" + std::to_string(offset) + ", +" + std::to_string(count) +
                            ") out of range for tensor '" + view.name + "' with " + std::to_string(numel) +
                            " elements");
  }
  if (count == 0) return Status::ok();
  if (view.data == nullptr || view.nbytes < std::size_t(numel) * dtype_size(view.dtype)) {
    return internal_error("to_f32: tensor '" + view.name + "' has no data or too few bytes");
  }
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
    case DType::kI64:
    case DType::kI32:
    case DType::kU8:
    case DType::kF8E4M3:
      break;
  }
  return unsupported("to_f32: tensor '" + view.name + "' has dtype " + dtype_name(view.dtype) +
                     ", which has no f32 conversion yet");
}

}  // namespace ft::engine

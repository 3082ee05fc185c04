// Typed access to GGUF metadata values, decoded from the mapped bytes on demand. The parser has
// already checked that every value, array and string lies inside the file.
#include <cstring>
#include <limits>
#include <utility>

#include "ft/engine/gguf.h"
#include "weights/gguf_parse.h"

namespace ft::engine {

namespace {

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kU16:
    case GgufValueType::kI16:
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kU64:
    case GgufValueType::kI64:
      return true;
    default:
      return false;
  }
}

// One integer of type t at p; false for a u64 above int64's range.
bool load_integer(GgufValueType t, const std::byte* p, std::int64_t& out) {
  switch (t) {
    case GgufValueType::kU8:
      out = load<std::uint8_t>(p);
      return true;
    case GgufValueType::kI8:
      out = load<std::int8_t>(p);
      return true;
    case GgufValueType::kU16:
      out = load<std::uint16_t>(p);
      return true;
    case GgufValueType::kI16:
      out = load<std::int16_t>(p);
      return true;
    case GgufValueType::kU32:
      out = load<std::uint32_t>(p);
      return true;
    case GgufValueType::kI32:
      out = load<std::int32_t>(p);
      return true;
    case GgufValueType::kI64:
      out = load<std::int64_t>(p);
      return true;
    case GgufValueType::kU64: {
      const std::uint64_t v = load<std::uint64_t>(p);
      if (v > std::uint64_t(std::numeric_limits<std::int64_t>::max())) return false;
      out = std::int64_t(v);
      return true;
    }
    default:
      return false;
  }
}

double load_float(GgufValueType t, const std::byte* p) {
  return t == GgufValueType::kF32 ? double(load<float>(p)) : load<double>(p);
}

bool is_float(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }

}  // namespace

GgufMetadata::GgufMetadata(std::vector<GgufKv> kvs, std::string label)
    : kvs_(std::move(kvs)), label_(std::move(label)) {}

const GgufValue* GgufMetadata::find(std::string_view key) const {
  for (const GgufKv& kv : kvs_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

Result<const GgufValue*> GgufMetadata::typed(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(label_ + ": no metadata key '" + std::string(key) + "'");
  return v;
}

Status GgufMetadata::wrong_type(std::string_view key, const GgufValue& v, const char* wanted) const {
  std::string actual = gguf_value_type_name(v.type);
  if (v.type == GgufValueType::kArray) actual += std::string(" of ") + gguf_value_type_name(v.elem_type);
  return invalid_argument(label_ + ": metadata '" + std::string(key) + "' is " + actual + ", not " + wanted);
}

Result<std::string_view> GgufMetadata::get_string(std::string_view key) const {
  FT_ASSIGN_OR_RETURN(const GgufValue* v, typed(key));
  if (v->type != GgufValueType::kString) return wrong_type(key, *v, "a string");
  return std::string_view(reinterpret_cast<const char*>(v->data), v->size);
}

Result<std::int64_t> GgufMetadata::get_int(std::string_view key) const {
  FT_ASSIGN_OR_RETURN(const GgufValue* v, typed(key));
  if (!is_integer(v->type)) return wrong_type(key, *v, "an integer");
  std::int64_t out = 0;
  if (!load_integer(v->type, v->data, out)) {
    return invalid_argument(label_ + ": metadata '" + std::string(key) + "' is beyond int64's range");
  }
  return out;
}

Result<double> GgufMetadata::get_float(std::string_view key) const {
  FT_ASSIGN_OR_RETURN(const GgufValue* v, typed(key));
  if (!is_float(v->type)) return wrong_type(key, *v, "a float");
  return load_float(v->type, v->data);
}

Result<bool> GgufMetadata::get_bool(std::string_view key) const {
  FT_ASSIGN_OR_RETURN(const GgufValue* v, typed(key));
  if (v->type != GgufValueType::kBool) return wrong_type(key, *v, "a bool");
  return load<std::uint8_t>(v->data) != 0;
}

Result<std::vector<std::string_view>> GgufMetadata::get_strings(std::string_view key) const {
  FT_ASSIGN_OR_RETURN(const GgufValue* v, typed(key));
  if (v->type != GgufValueType::kArray || v->elem_type != GgufValueType::kString) {
    return wrong_type(key, *v, "an array of string");
  }
  std::vector<std::string_view> out;
  out.reserve(std::size_t(v->count));  // the parser walked them: count <= size / 8
  const std::byte* p = v->data;
  for (std::uint64_t i = 0; i < v->count; ++i) {
    const std::uint64_t len = load<std::uint64_t>(p);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), std::size_t(len));
    p += 8 + len;
  }
  return out;
}

Result<std::vector<std::int64_t>> GgufMetadata::get_ints(std::string_view key) const {
  FT_ASSIGN_OR_RETURN(const GgufValue* v, typed(key));
  if (v->type != GgufValueType::kArray || !is_integer(v->elem_type)) {
    return wrong_type(key, *v, "an array of integers");
  }
  const std::size_t each = gguf_scalar_bytes(v->elem_type);
  std::vector<std::int64_t> out(std::size_t(v->count));  // count * each <= size, checked by the parser
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!load_integer(v->elem_type, v->data + i * each, out[i])) {
      return invalid_argument(label_ + ": metadata '" + std::string(key) + "' element " + std::to_string(i) +
                              " is beyond int64's range");
    }
  }
  return out;
}

Result<std::vector<double>> GgufMetadata::get_floats(std::string_view key) const {
  FT_ASSIGN_OR_RETURN(const GgufValue* v, typed(key));
  if (v->type != GgufValueType::kArray || !is_float(v->elem_type)) {
    return wrong_type(key, *v, "an array of floats");
  }
  const std::size_t each = v->elem_type == GgufValueType::kF32 ? 4 : 8;
  std::vector<double> out(std::size_t(v->count));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_float(v->elem_type, v->data + i * each);
  return out;
}

}  // namespace ft::engine

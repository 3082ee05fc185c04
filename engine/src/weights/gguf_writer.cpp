#include "weights/gguf_writer.h"

#include <cstring>

namespace ft::engine::gguf_writer {
namespace {

constexpr std::uint64_t kAlignment = 32;  // general.alignment's default

template <typename T>
std::string le(T v) {  // little-endian hosts only, as the reader
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

std::string str(std::string_view s) { return le<std::uint64_t>(s.size()) + std::string(s); }

std::uint64_t aligned(std::uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// GGUF's value type ids.
enum : std::uint32_t { kU32 = 4, kF32 = 6, kBool = 7, kString = 8 };

}  // namespace

std::string kv_string(std::string_view key, std::string_view value) { return str(key) + le(kString) + str(value); }
std::string kv_u32(std::string_view key, std::uint32_t value) { return str(key) + le(kU32) + le(value); }
std::string kv_f32(std::string_view key, float value) { return str(key) + le(kF32) + le(value); }
std::string kv_bool(std::string_view key, bool value) { return str(key) + le(kBool) + le<std::uint8_t>(value); }

Layout layout(const std::vector<std::string>& kvs, const std::vector<TensorEntry>& tensors) {
  Layout out;
  out.prefix = "GGUF" + le<std::uint32_t>(3) + le<std::uint64_t>(tensors.size()) + le<std::uint64_t>(kvs.size());
  for (const std::string& kv : kvs) out.prefix += kv;
  std::uint64_t data = 0;  // from the start of the data section
  std::vector<std::uint64_t> relative;
  for (const TensorEntry& t : tensors) {
    out.prefix += str(t.name) + le<std::uint32_t>(std::uint32_t(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) out.prefix += le<std::uint64_t>(std::uint64_t(*d));
    out.prefix += le(t.ggml_type) + le(data);
    relative.push_back(data);
    data += aligned(t.nbytes);
  }
  out.prefix.resize(aligned(out.prefix.size()), '\0');
  for (std::uint64_t r : relative) out.offsets.push_back(out.prefix.size() + r);
  out.file_size = out.prefix.size() + data;
  return out;
}

}  // namespace ft::engine::gguf_writer

// Hand-made GGUF files, so tests can say exactly what is wrong with one, and the committed
// fixtures made by llama.cpp's own tools (scripts/goldens/make-gguf-fixtures.sh).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ft::engine::gguf_test {

inline std::filesystem::path fixtures() { return std::filesystem::path(FT_FIXTURES_DIR) / "gguf"; }

// Little-endian encoders of GGUF's primitives.
template <typename T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}
inline std::string str(std::string_view s) { return le<uint64_t>(s.size()) + std::string(s); }

// Metadata entries, encoded: key, type, value.
inline std::string kv_u32(std::string_view key, uint32_t v) { return str(key) + le<uint32_t>(4) + le(v); }
inline std::string kv_u16(std::string_view key, uint16_t v) { return str(key) + le<uint32_t>(2) + le(v); }
inline std::string kv_i32(std::string_view key, int32_t v) { return str(key) + le<uint32_t>(5) + le(v); }
inline std::string kv_string(std::string_view key, std::string_view v) { return str(key) + le<uint32_t>(8) + str(v); }
inline std::string kv_f32(std::string_view key, float v) { return str(key) + le<uint32_t>(6) + le(v); }
inline std::string kv_bool(std::string_view key, bool v) { return str(key) + le<uint32_t>(7) + le<uint8_t>(v); }
// An array entry: element type, count (which may lie), then the encoded elements.
inline std::string kv_array(std::string_view key, uint32_t elem_type, uint64_t count, const std::string& elems) {
  return str(key) + le<uint32_t>(9) + le(elem_type) + le(count) + elems;
}

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;        // GGUF order: fastest first
  uint32_t type = 0;               // ggml type id
  std::string data;                // its bytes in the data section
  std::optional<uint64_t> offset;  // default: after the previous tensor, aligned
};

struct FileSpec {
  std::string magic = "GGUF";
  uint32_t version = 3;
  std::vector<std::string> kvs;  // encoded entries
  std::vector<TensorSpec> tensors;
  std::optional<uint64_t> n_tensors, n_kv;  // default: the real counts
  uint64_t alignment = 32;                  // the layout's; say so in kvs too when not 32
};

inline std::string build(const FileSpec& f) {
  std::string out = f.magic + le(f.version) + le<uint64_t>(f.n_tensors.value_or(f.tensors.size())) +
                    le<uint64_t>(f.n_kv.value_or(f.kvs.size()));
  for (const std::string& kv : f.kvs) out += kv;
  auto pad = [&](uint64_t n) { return (f.alignment - n % f.alignment) % f.alignment; };
  std::vector<uint64_t> offsets;
  uint64_t next = 0;
  for (const TensorSpec& t : f.tensors) {
    const uint64_t at = t.offset.value_or(next);
    offsets.push_back(at);
    if (at <= (1u << 20)) next = std::max(next, at + t.data.size());
    next += pad(next);
    out += str(t.name) + le<uint32_t>(uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) out += le(d);
    out += le(t.type) + le(at);
  }
  if (f.tensors.empty()) return out;
  out += std::string(pad(out.size()), '\0');
  const std::size_t data_start = out.size();
  for (std::size_t i = 0; i < f.tensors.size(); ++i) {
    const std::string& d = f.tensors[i].data;
    if (offsets[i] > (1u << 20)) continue;  // an offset far past the end: the test wants it there, not a huge file
    if (out.size() < data_start + offsets[i] + d.size()) out.resize(data_start + offsets[i] + d.size(), '\0');
    out.replace(data_start + offsets[i], d.size(), d);
  }
  return out;
}

inline void write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A valid two-tensor file: an F32 vector and a Q8_0 matrix [2 rows, 32 cols] (68 bytes).
inline FileSpec small_file() {
  FileSpec f;
  f.kvs = {kv_string("general.architecture", "test"), kv_u32("test.n", 7)};
  f.tensors.push_back({"v", {4}, 0, std::string(16, '\1'), std::nullopt});
  f.tensors.push_back({"m", {32, 2}, 8, std::string(68, '\2'), std::nullopt});
  return f;
}

}  // namespace ft::engine::gguf_test

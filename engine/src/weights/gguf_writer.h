// Building GGUF v3 files: metadata entries encoded as the format stores them, and the layout of a
// file (header, metadata, tensor table, each tensor's data at an aligned offset) whose tensor data
// the caller writes afterwards at the offsets given, so a many-GB file never sits in memory.
// Private to the engine (synthetic benchmark models; the tests' GGUF fixtures use it too).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ft::engine::gguf_writer {

// One metadata entry each (key, type, value).
std::string kv_string(std::string_view key, std::string_view value);
std::string kv_u32(std::string_view key, std::uint32_t value);
std::string kv_f32(std::string_view key, float value);
std::string kv_bool(std::string_view key, bool value);

struct TensorEntry {
  std::string name;
  std::vector<int64_t> shape;  // slowest-first (written reversed, as GGUF's ne)
  std::uint32_t ggml_type = 0;
  std::uint64_t nbytes = 0;
};

struct Layout {
  std::string prefix;                  // everything before the first tensor's data, padded
  std::vector<std::uint64_t> offsets;  // each tensor's data, from the start of the file
  std::uint64_t file_size = 0;
};

// The file's layout with GGUF's default alignment (32): data offsets and the file's end aligned.
Layout layout(const std::vector<std::string>& kvs, const std::vector<TensorEntry>& tensors);

}  // namespace ft::engine::gguf_writer

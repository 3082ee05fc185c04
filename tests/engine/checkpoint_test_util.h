// Builders for checkpoint directories and hand-made (possibly broken) safetensors files.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ft/engine/checkpoint.h"

namespace ft::engine::ckpt_test {

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A safetensors file from raw parts, so tests can say exactly what is wrong with it.
inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header,
                                  const std::vector<std::byte>& data, uint64_t declared_len) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  char len[8];
  std::memcpy(len, &declared_len, 8);
  out.write(len, 8);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
}

inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header,
                                  const std::vector<std::byte>& data) {
  write_raw_safetensors(path, header, data, header.size());
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline OwnedTensor f32_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& values) {
  return OwnedTensor{std::move(name), DType::kF32, std::move(shape), bytes_of(values)};
}

}  // namespace ft::engine::ckpt_test

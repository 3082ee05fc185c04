// Read-only memory mapping of a whole file; unmapped when the owner goes away.
#pragma once

#include <cstddef>
#include <filesystem>

#include "ft/common/result.h"

namespace ft::engine {

class MappedFile {
 public:
  // kNotFound when the file does not exist, kIo for any other failure to open or map it.
  static Result<MappedFile> open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Moving a MappedFile keeps the mapping where it is, so pointers into data() survive moves.
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void reset();

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ft::engine

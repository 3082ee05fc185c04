#include "weights/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ft::engine {

namespace {

// Closes the descriptor on every return path; the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("file " + path.string() + " does not exist");
    return io_error("cannot open " + path.string() + ": " + std::strerror(err));
  }
  FdGuard guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error("cannot stat " + path.string() + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return io_error(path.string() + " is not a regular file");

  MappedFile file;
  file.path_ = path;
  file.size_ = std::size_t(st.st_size);
  // mmap rejects length 0; an empty file is left unmapped and its size tells the parser it is short.
  if (file.size_ == 0) return file;
  // Shared, not private: pinning a private mapping for GPU copies (cudaHostRegister) would give
  // every page an anonymous copy of its own, doubling the model's memory. Read-only either way.
  void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return io_error("cannot mmap " + path.string() + ": " + std::strerror(errno));
  file.data_ = static_cast<const std::byte*>(p);
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ft::engine

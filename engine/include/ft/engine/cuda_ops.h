// Device memory for code outside the CUDA backend (`freetoken device --hold`, tests). This header
// needs no CUDA headers, so CPU-only code can include it; in a build without CUDA every call
// returns kUnavailable. The ops themselves are reached through the Backend seam (backend.h).
#pragma once

#include <cstddef>

#include "ft/common/result.h"

namespace ft::engine::cuda {

// Device memory owned by a value (moved, never copied). Freed in the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  static Result<DeviceBuffer> allocate(std::size_t bytes);

  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ft::engine::cuda

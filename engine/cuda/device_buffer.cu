#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "ft/engine/cuda_ops.h"

namespace ft::engine::cuda {

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
  DeviceBuffer buf;
  if (cudaError_t err = cudaMalloc(&buf.ptr_, bytes); err != cudaSuccess) {
    cudaGetLastError();
    return unavailable("cudaMalloc(" + std::to_string(bytes) + " bytes): " + cudaGetErrorString(err));
  }
  buf.bytes_ = bytes;
  return Result<DeviceBuffer>(std::move(buf));
}

}  // namespace ft::engine::cuda

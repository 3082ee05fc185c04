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

Status DeviceBuffer::copy_from_host(const void* src, std::size_t bytes) { return copy_from_host_at(0, src, bytes); }

Status DeviceBuffer::copy_to_host(void* dst, std::size_t bytes) const { return copy_to_host_at(0, dst, bytes); }

Status DeviceBuffer::copy_from_host_at(std::size_t offset, const void* src, std::size_t bytes) {
  if (offset > bytes_ || bytes > bytes_ - offset) return invalid_argument("copy_from_host: past the end of the buffer");
  if (cudaError_t err = cudaMemcpy(static_cast<char*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice);
      err != cudaSuccess)
    return internal_error(std::string("cudaMemcpy H2D: ") + cudaGetErrorString(err));
  return {};
}

Status DeviceBuffer::copy_to_host_at(std::size_t offset, void* dst, std::size_t bytes) const {
  if (offset > bytes_ || bytes > bytes_ - offset) return invalid_argument("copy_to_host: past the end of the buffer");
  if (cudaError_t err = cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost);
      err != cudaSuccess)
    return internal_error(std::string("cudaMemcpy D2H: ") + cudaGetErrorString(err));
  return {};
}

}  // namespace ft::engine::cuda

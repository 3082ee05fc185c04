#include <cuda_runtime.h>

#include <string>

#include "ft/engine/device.h"

namespace ft::engine {

bool built_with_cuda() { return true; }

Result<CudaDeviceInfo> query_cuda_device(int index) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice) {
    cudaGetLastError();  // clear the sticky error
    return unavailable("no CUDA device: no NVIDIA driver/GPU on this machine (" +
                       std::string(cudaGetErrorString(err)) + ")");
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return unavailable(std::string("CUDA is not usable: ") + cudaGetErrorString(err));
  }
  if (index < 0 || index >= count) {
    return unavailable("CUDA device " + std::to_string(index) + " does not exist (" +
                       std::to_string(count) + " found)");
  }
  cudaDeviceProp prop{};
  if ((err = cudaGetDeviceProperties(&prop, index)) != cudaSuccess) {
    return unavailable(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err));
  }
  CudaDeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.total_bytes = prop.totalGlobalMem;
  cudaSetDevice(index);
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) info.free_bytes = free_b;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  return info;
}

}  // namespace ft::engine

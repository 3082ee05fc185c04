// Which accelerator (if any) this process can use. The binary always starts; asking for a GPU on a
// machine without one is an error value with a reason, never a crash.
#pragma once

#include <cstddef>
#include <string>

#include "ft/common/result.h"

namespace ft::engine {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t total_bytes = 0;  // device memory, bytes
  std::size_t free_bytes = 0;   // free at query time, bytes
  int driver_version = 0;       // e.g. 13000 for CUDA 13.0
  int runtime_version = 0;
};

// True when this binary was compiled with CUDA support.
bool built_with_cuda();

// Device 0's properties, or kUnavailable with the reason (built without CUDA, no driver, no device).
Result<CudaDeviceInfo> query_cuda_device(int index = 0);

// The device's memory bandwidth as a device-to-device copy of `bytes` moves it (read + written
// bytes per second, best of a few copies), GB/s: the bound the GPU benchmarks print.
Result<double> measure_device_copy_gbps(std::size_t bytes, int index = 0);
// Page-locked host memory -> VRAM: GB/s of a `bytes` copy, best of 3 after a warm-up.
Result<double> measure_host_to_device_gbps(std::size_t bytes, int index = 0);
// A kernel reading `bytes` of page-locked host memory where it is (mapped, over PCIe): GB/s, best
// of 3 after a warm-up. The most that experts read in place (policy direct) can cross at.
Result<double> measure_mapped_read_gbps(std::size_t bytes, int index = 0);

}  // namespace ft::engine

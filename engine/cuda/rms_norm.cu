// RMSNorm: one block per row, fp32 accumulation, warp-shuffle then shared-memory reduction.
#include <cuda_runtime.h>

#include <string>

#include "ft/engine/cuda_ops.h"

namespace ft::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ out, int dim, float eps, bool zero_centered) {
  const float* xr = x + static_cast<size_t>(blockIdx.x) * dim;
  float* o = out + static_cast<size_t>(blockIdx.x) * dim;
  float sum = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i] * xr[i];
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.f;
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (threadIdx.x == 0) warp_sums[0] = sum;
  }
  __syncthreads();
  const float inv = rsqrtf(warp_sums[0] / dim + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float wi = zero_centered ? 1.f + w[i] : w[i];
    o[i] = xr[i] * inv * wi;
  }
}

}  // namespace

Status rms_norm(const float* x, const float* weight, float* out, int rows, int dim, float eps,
                bool zero_centered) {
  if (rows <= 0 || dim <= 0) return invalid_argument("rms_norm: rows and dim must be positive");
  rms_norm_kernel<<<rows, kThreads>>>(x, weight, out, dim, eps, zero_centered);
  if (cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess)
    return internal_error(std::string("rms_norm kernel: ") + cudaGetErrorString(err));
  return {};
}

}  // namespace ft::engine::cuda

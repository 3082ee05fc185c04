// Elementwise, normalisation, embedding and MoE routing/combine kernels (kernels.h): memory-bound
// one-pass kernels, each with its CPU reference in ops_dense.h / ops_moe.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>

#include "kernels.h"

namespace ft::engine::cuda {
namespace {

constexpr int kBlock = 256;

unsigned blocks_for(std::size_t n) { return unsigned((n + kBlock - 1) / kBlock); }

__device__ float load_weight(const std::byte* row, DType dtype, int64_t c) {
  switch (dtype) {
    case DType::kBF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(row)[c]);
    case DType::kF16: return __half2float(reinterpret_cast<const __half*>(row)[c]);
    default: return reinterpret_cast<const float*>(row)[c];
  }
}

__global__ void embedding_kernel(const std::byte* table, DType dtype, std::size_t row_bytes, int64_t cols,
                                 const int32_t* ids, float* out) {
  const std::byte* row = table + std::size_t(ids[blockIdx.x]) * row_bytes;
  float* o = out + std::size_t(blockIdx.x) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = load_weight(row, dtype, c);
}

__global__ void split_16_kernel(const float* x, std::size_t n, std::size_t group, bool f16, std::uint16_t* out) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const std::size_t at = i / group * 2 * group + i % group;
    if (f16) {
      const __half hi = __float2half_rn(v);
      out[at] = __half_as_ushort(hi);
      out[at + group] = __half_as_ushort(__float2half_rn(v - __half2float(hi)));
    } else {
      const __nv_bfloat16 hi = __float2bfloat16_rn(v);
      out[at] = __bfloat16_as_ushort(hi);
      out[at + group] = __bfloat16_as_ushort(__float2bfloat16_rn(v - __bfloat162float(hi)));
    }
  }
}

// y has groups x half elements, y2 groups x 2 half: each group's two halves added.
__global__ void add_halves_kernel(const float* y2, std::size_t total, std::size_t half, int n, const float* bias,
                                  float* y) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t at = i / half * 2 * half + i % half;
    y[i] = y2[at] + y2[at + half] + (bias ? bias[i % std::size_t(n)] : 0.f);
  }
}

// Block-wide sum: warp shuffles, then one warp over the warps' partials. Every thread gets it.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? partial[lane] : 0.f;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// One block per row. The sum of squares is in a fixed order, so a row's result does not depend on
// how many rows the call has.
__global__ void rms_norm_kernel(const float* x, const float* w, float* out, int dim, float eps, bool zero_centered) {
  const float* xr = x + std::size_t(blockIdx.x) * dim;
  float* o = out + std::size_t(blockIdx.x) * dim;
  float sum = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(sum) / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = xr[i] * inv * (zero_centered ? 1.f + w[i] : w[i]);
}

__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.f + expf(-g)) * up[i];
}

__global__ void mul_sigmoid_kernel(float* x, const float* gate, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= 1.f / (1.f + expf(-gate[i]));
}

__global__ void add_kernel(float* y, const float* x, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void add_bias_kernel(float* y, const float* bias, int n) {
  float* row = y + std::size_t(blockIdx.x) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] += bias[i];
}

__global__ void gather_rows_kernel(const float* src, const int64_t* rows, int width, float* dst) {
  const int64_t r = rows[blockIdx.x];
  float* d = dst + std::size_t(blockIdx.x) * width;
  if (r < 0) {
    for (int i = threadIdx.x; i < width; i += blockDim.x) d[i] = 0.f;
    return;
  }
  const float* s = src + std::size_t(r) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) d[i] = s[i];
}

// One warp per token: softmax (or sigmoid) scores, then top_k rounds of an arg-max over the logits
// (the scores are monotonic in them; ties to the lower index, as torch.topk on the CPU).
__global__ void route_kernel(const float* logits, int T, int E, int top_k, bool sigmoid, bool renormalize,
                             float scaling, int32_t* chosen, float* weights) {
  const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (t >= T) return;
  const float* l = logits + std::size_t(t) * E;
  float mx = -FLT_MAX;
  for (int e = lane; e < E; e += 32) mx = fmaxf(mx, l[e]);
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += expf(l[e] - mx);
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  // Bit j: this lane's expert lane + 32 j is taken (8 words: E <= 8192).
  unsigned taken[8] = {};
  float picked_sum = 0.f;
  for (int k = 0; k < top_k; ++k) {
    float best = -FLT_MAX;
    int best_e = E;
    for (int e = lane, j = 0; e < E; e += 32, ++j) {
      const bool used = (taken[j >> 5] >> (j & 31)) & 1u;
      if (!used && (l[e] > best || (l[e] == best && e < best_e))) {
        best = l[e];
        best_e = e;
      }
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
      if (ob > best || (ob == best && oe < best_e)) {
        best = ob;
        best_e = oe;
      }
    }
    if (best_e % 32 == lane) {
      const int j = best_e / 32;
      taken[j >> 5] |= 1u << (j & 31);
    }
    const float p = sigmoid ? 1.f / (1.f + expf(-best)) : expf(best - mx) / sum;
    picked_sum += p;
    if (lane == 0) {
      chosen[t * top_k + k] = best_e;
      weights[t * top_k + k] = p;
    }
  }
  if (lane == 0) {
    for (int k = 0; k < top_k; ++k)
      weights[t * top_k + k] = (renormalize ? weights[t * top_k + k] / picked_sum : weights[t * top_k + k]) * scaling;
  }
}

__global__ void moe_combine_kernel(const float* y, const int32_t* rows, const float* weights, int top_k, int width,
                                   float* out) {
  const int t = blockIdx.x;
  float* o = out + std::size_t(t) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < top_k; ++k) acc += weights[t * top_k + k] * y[std::size_t(rows[t * top_k + k]) * width + i];
    o[i] = acc;
  }
}

__global__ void add_sigmoid_scaled_kernel(const float* y, const float* gate, int width, float* out) {
  const float g = 1.f / (1.f + expf(-gate[blockIdx.x]));
  const float* yr = y + std::size_t(blockIdx.x) * width;
  float* o = out + std::size_t(blockIdx.x) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) o[i] += g * yr[i];
}

}  // namespace

void embedding(const std::byte* table, DType dtype, std::size_t row_bytes, int64_t cols, const int32_t* ids, int T,
               float* out, cudaStream_t s) {
  if (T > 0) embedding_kernel<<<T, kBlock, 0, s>>>(table, dtype, row_bytes, cols, ids, out);
}

void split_16(const float* x, std::size_t n, std::size_t group, bool f16, std::uint16_t* out, cudaStream_t s) {
  if (n) split_16_kernel<<<std::min(blocks_for(n), 65535u), kBlock, 0, s>>>(x, n, group, f16, out);
}

void add_halves(const float* y2, int groups, int rows, int n, const float* bias, float* y, cudaStream_t s) {
  const std::size_t half = std::size_t(rows) * std::size_t(n), total = half * std::size_t(groups);
  if (total) add_halves_kernel<<<std::min(blocks_for(total), 65535u), kBlock, 0, s>>>(y2, total, half, n, bias, y);
}

void rms_norm(const float* x, const float* w, float* out, int rows, int dim, float eps, bool zero_centered,
              cudaStream_t s) {
  if (rows > 0) rms_norm_kernel<<<rows, kBlock, 0, s>>>(x, w, out, dim, eps, zero_centered);
}

void silu_mul(const float* gate, const float* up, float* out, std::size_t n, cudaStream_t s) {
  if (n) silu_mul_kernel<<<blocks_for(n), kBlock, 0, s>>>(gate, up, out, n);
}

void mul_sigmoid(float* x, const float* gate, std::size_t n, cudaStream_t s) {
  if (n) mul_sigmoid_kernel<<<blocks_for(n), kBlock, 0, s>>>(x, gate, n);
}

void add(float* y, const float* x, std::size_t n, cudaStream_t s) {
  if (n) add_kernel<<<blocks_for(n), kBlock, 0, s>>>(y, x, n);
}

void add_bias(float* y, const float* bias, int T, int n, cudaStream_t s) {
  if (T > 0) add_bias_kernel<<<T, kBlock, 0, s>>>(y, bias, n);
}

void gather_rows(const float* src, const int64_t* rows, int n, int width, float* dst, cudaStream_t s) {
  if (n > 0) gather_rows_kernel<<<n, kBlock, 0, s>>>(src, rows, width, dst);
}

void route_top_k(const float* logits, int T, int E, int top_k, bool sigmoid, bool renormalize, float scaling,
                 int32_t* chosen, float* weights, cudaStream_t s) {
  constexpr int kWarps = 4;
  if (T > 0)
    route_kernel<<<(T + kWarps - 1) / kWarps, 32 * kWarps, 0, s>>>(logits, T, E, top_k, sigmoid, renormalize, scaling,
                                                                  chosen, weights);
}

void moe_combine(const float* y, const int32_t* rows, const float* weights, int T, int top_k, int width, float* out,
                 cudaStream_t s) {
  if (T > 0) moe_combine_kernel<<<T, kBlock, 0, s>>>(y, rows, weights, top_k, width, out);
}

void add_sigmoid_scaled(const float* y, const float* gate, int T, int width, float* out, cudaStream_t s) {
  if (T > 0) add_sigmoid_scaled_kernel<<<T, kBlock, 0, s>>>(y, gate, width, out);
}

}  // namespace ft::engine::cuda

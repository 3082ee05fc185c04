// Elementwise, normalisation, embedding and MoE routing/combine kernels (kernels.h): memory-bound
// one-pass kernels, each with its CPU reference in ops_dense.h / ops_moe.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "glu_device.h"
#include "kernels.h"
#include "launch.h"
#include "ops/pair_hash.h"
#include "reduce_device.h"
#include "route_device.h"
#include "slot_layout.h"

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
  pdl_enter();
  const std::byte* row = table + std::size_t(ids[blockIdx.x]) * row_bytes;
  float* o = out + std::size_t(blockIdx.x) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = load_weight(row, dtype, c);
}

__global__ void split_16_kernel(const float* x, std::size_t n, std::size_t group, bool f16, std::uint16_t* out) {
  pdl_enter();
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
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

// fp16 of v, rounded to nearest even and held at +-65504 where it would overflow (an outlier then
// saturates its products instead of making them inf); NaN stays NaN.
__device__ __forceinline__ std::uint16_t f16_held(float v) {
  return __half_as_ushort(__float2half_rn(v == v ? fminf(fmaxf(v, -65504.f), 65504.f) : v));
}

__global__ void round_f16_kernel(const float* x, std::size_t n, std::uint16_t* out) {
  pdl_enter();
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = f16_held(x[i]);
}

__device__ __forceinline__ void store_halves(std::uint16_t* out, std::size_t hi, std::size_t lo_step, float v) {
  const __nv_bfloat16 h = __float2bfloat16_rn(v);
  out[hi] = __bfloat16_as_ushort(h);
  out[hi + lo_step] = __bfloat16_as_ushort(__float2bfloat16_rn(v - __bfloat162float(h)));
}

// One block per row of the output. kF16: one fp16 row [R, width] instead of the slot layout's halves.
template <bool kF16>
__global__ void gather_split_kernel(const float* src, const int64_t* rows, int width, int slot_rows,
                                    std::uint16_t* out) {
  pdl_enter();
  const int64_t r = blockIdx.x, from = rows[r];
  const SplitPlace at = split_place(r, width, slot_rows);
  const float* s = src + std::size_t(from < 0 ? 0 : from) * std::size_t(width);
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    const float v = from < 0 ? 0.f : s[c];
    if constexpr (kF16) {
      out[std::size_t(r) * std::size_t(width) + std::size_t(c)] = f16_held(v);
    } else {
      store_halves(out, at.hi + c, at.lo_step, v);
    }
  }
}

// gate and up are in the slot layout too (each slot's products of its high halves, then of its
// low ones): a row's value is the sum of its two parts; or, where in_parts is 1, rows [R, width].
// kF16: the output one fp16 row [R, width] instead of the slot layout's halves.
template <bool kF16>
__global__ void glu_split_kernel(const float* gate, const float* up, int width, const ExpertEpilogue act,
                                 const int32_t* experts, int slot_rows, int in_parts, std::uint16_t* out) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const SplitPlace at = split_place(r, width, slot_rows);
  const std::size_t in_at = in_parts == 2 ? at.hi : std::size_t(r) * std::size_t(width);
  const float *g = gate + in_at, *u = up + in_at;
  const float *gb = nullptr, *ub = nullptr;
  if (act.gate_bias || act.up_bias) {
    const std::size_t e = std::size_t(experts[at.slot]) * std::size_t(width);
    if (act.gate_bias) gb = act.gate_bias + e;
    if (act.up_bias) ub = act.up_bias + e;
  }
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    const float gv = in_parts == 2 ? g[c] + g[at.lo_step + c] : g[c];
    const float uv = in_parts == 2 ? u[c] + u[at.lo_step + c] : u[c];
    const float v = expert_glu(act, gv + (gb ? gb[c] : 0.f), uv + (ub ? ub[c] : 0.f));
    if constexpr (kF16) {
      out[std::size_t(r) * std::size_t(width) + std::size_t(c)] = f16_held(v);
    } else {
      store_halves(out, at.hi + c, at.lo_step, v);
    }
  }
}

// y in the slot layout: the bias goes into the high part of the row (once into the sum); or, where
// parts is 1, y is rows [R, width].
__global__ void add_expert_bias_kernel(float* y, int width, const float* bias, const int32_t* experts, int slot_rows,
                                       int parts) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const SplitPlace at = split_place(r, width, slot_rows);
  const float* b = bias + std::size_t(experts[at.slot]) * std::size_t(width);
  float* row = y + (parts == 2 ? at.hi : std::size_t(r) * std::size_t(width));
  for (int c = threadIdx.x; c < width; c += blockDim.x) row[c] += b[c];
}

// y [T, n] = y2 [T, n] + y2 [T + t, n] (+ bias): the halves of a product over 2T columns added.
__global__ void add_halves_kernel(const float* y2, std::size_t total, int n, const float* bias, float* y) {
  pdl_enter();
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x)
    y[i] = y2[i] + y2[total + i] + (bias ? bias[i % std::size_t(n)] : 0.f);
}

// One block per row. The sum of squares is in a fixed order, so a row's result does not depend on
// how many rows the call has.
__global__ void rms_norm_kernel(const float* x, const float* w, float* out, int dim, float eps, bool zero_centered) {
  pdl_enter();
  const float* xr = x + std::size_t(blockIdx.x) * dim;
  float* o = out + std::size_t(blockIdx.x) * dim;
  float sum = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(sum) / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = xr[i] * inv * (zero_centered ? 1.f + w[i] : w[i]);
}

// The same for rows of float4s (dim % 4 == 0, 16-byte aligned) of at most V float4s a thread: the
// row and the weight are read once, all loads issued before the reduction (a row of a few KB is
// latency-bound: one round trip instead of one per strided step). kAdd: x += delta first (the
// residual add before a norm), the sum written back to x.
template <int V, bool kAdd>
__global__ void rms_norm_vec_kernel(float* x, const float* delta, const float* w, float* out, int dim, float eps,
                                    bool zero_centered) {
  const int n4 = dim / 4;
  float4* xr = reinterpret_cast<float4*>(x + std::size_t(blockIdx.x) * dim);
  const float4* dr = reinterpret_cast<const float4*>(delta + (kAdd ? std::size_t(blockIdx.x) * dim : 0));
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* o = reinterpret_cast<float4*>(out + std::size_t(blockIdx.x) * dim);
  float4 v[V], g[V];
  // The weight is a placed weight, no kernel's output: read while the previous kernel runs.
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = int(threadIdx.x) + j * int(blockDim.x);
    if (i < n4) g[j] = w4[i];
  }
  pdl_enter();
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = int(threadIdx.x) + j * int(blockDim.x);
    if (i < n4) {
      v[j] = xr[i];
      if constexpr (kAdd) {
        const float4 d = dr[i];
        v[j] = make_float4(v[j].x + d.x, v[j].y + d.y, v[j].z + d.z, v[j].w + d.w);
        xr[i] = v[j];
      }
      sum += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
  }
  const float inv = rsqrtf(block_sum(sum) / float(dim) + eps);
  const float c = zero_centered ? 1.f : 0.f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = int(threadIdx.x) + j * int(blockDim.x);
    if (i < n4)
      o[i] = make_float4(v[j].x * inv * (c + g[j].x), v[j].y * inv * (c + g[j].y), v[j].z * inv * (c + g[j].z),
                         v[j].w * inv * (c + g[j].w));
  }
}

__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, std::size_t n) {
  pdl_enter();
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.f + expf(-g)) * up[i];
}

__global__ void gelu_tanh_mul_kernel(const float* gate, const float* up, float* out, std::size_t n) {
  pdl_enter();
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = gelu_tanh(gate[i]) * up[i];
}

__global__ void scale_kernel(float* x, std::size_t n, float factor) {
  pdl_enter();
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void softcap_kernel(float* x, std::size_t n, float cap) {
  pdl_enter();
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

__global__ void expert_glu_kernel(const float* gate, const float* up, float* out, std::size_t n,
                                  const ExpertEpilogue act) {
  pdl_enter();
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = expert_glu(act, gate[i], up[i]);
}

__global__ void mul_sigmoid_kernel(float* x, const float* gate, std::size_t n) {
  pdl_enter();
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= 1.f / (1.f + expf(-gate[i]));
}

// One block a row: the row's top logit (a block reduction), then the row scaled by its sigmoid.
__global__ void scale_by_top_sigmoid_kernel(const float* x, const float* logits, int width, int E, float* out) {
  pdl_enter();
  __shared__ float top[32];
  const int t = blockIdx.x;
  float m = -INFINITY;
  for (int e = threadIdx.x; e < E; e += blockDim.x) m = fmaxf(m, logits[std::size_t(t) * E + e]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) top[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? top[threadIdx.x] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) top[0] = m;
  }
  __syncthreads();
  const float s = 1.f / (1.f + expf(-top[0]));
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    out[std::size_t(t) * width + i] = x[std::size_t(t) * width + i] * s;
}

__global__ void attention_temperature_kernel(float* x, int width, const int64_t* positions, float floor_scale,
                                             float attn_scale) {
  pdl_enter();
  const int t = blockIdx.x;
  const float s = log1pf(floorf((float(positions[t]) + 1.f) / floor_scale)) * attn_scale + 1.f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) x[std::size_t(t) * width + i] *= s;
}

// 16 bytes a thread where both ends are 16-byte aligned (the pass arenas' are), the rest a byte a thread.
__global__ void copy_from_host_kernel(std::byte* dst, const std::byte* src, std::size_t bytes) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool wide = (reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) % 16 == 0;
  const std::size_t vectors = wide ? bytes / 16 : 0;
  for (std::size_t i = first; i < vectors; i += stride)
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  for (std::size_t i = 16 * vectors + first; i < bytes; i += stride) dst[i] = src[i];
}

// Counts wrap: `value` is reached once the flag is at most 2^31 past it.
__global__ void wait_host_flag_kernel(const volatile unsigned* flag, unsigned value) {
  while (int(*flag - value) < 0) __nanosleep(256);
  __threadfence_system();  // what the CPU wrote before the flag, seen by the kernels after this one
}

__global__ void wait_host_flag_at_kernel(const volatile unsigned* flag, const unsigned* value) {
  const unsigned v = *value;
  while (int(*flag - v) < 0) __nanosleep(256);
  __threadfence_system();
}

// The CPU's input into host memory by one block: x, each choice that `mine` says is the CPU's (the
// others as -1) and every weight; then the flag, raised after the data have reached host memory.
template <typename Mine>
__device__ void publish_block(const float* x, std::size_t nx, const int32_t* chosen, const float* weights, int n,
                              Mine mine, float* hx, int32_t* hc, float* hw, volatile unsigned* flag,
                              const unsigned* value) {
  for (std::size_t i = threadIdx.x; i < nx; i += blockDim.x) hx[i] = x[i];
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    hc[i] = mine(chosen[i]) ? chosen[i] : -1;
    hw[i] = weights[i];
  }
  __threadfence_system();  // the data reaches host memory before the flag does
  __syncthreads();
  if (threadIdx.x == 0) *flag = *value;
}

__global__ void publish_to_host_kernel(const float* x, std::size_t nx, const int32_t* chosen, const float* weights,
                                       int n, float* hx, int32_t* hc, float* hw, volatile unsigned* flag,
                                       const unsigned* value) {
  const auto every = [](int) { return true; };
  publish_block(x, nx, chosen, weights, n, every, hx, hc, hw, flag, value);
}

struct ZeroExpert {
  const std::byte* m[3];
};

// A fraction in [0, 1) for (step, layer).
__device__ float dither(unsigned step, int layer) { return float(pair_hash(step, unsigned(layer)) >> 40) * 0x1.0p-24f; }

__global__ void split_misses_kernel(const float* x, std::size_t nx, const int32_t* chosen, const float* weights, int n,
                                    const std::byte* const* table, const std::uint8_t* from_host, int E,
                                    const ZeroExpert zero, const float* share, int layer, const std::byte** split,
                                    std::uint8_t* gpu_from_host, float* hx, int32_t* hc, float* hw,
                                    volatile unsigned* flag, const unsigned* value) {
  __shared__ unsigned seen[kSplitMaxExperts / 32], cpu[kSplitMaxExperts / 32];
  const int words = (E + 31) / 32;
  for (int i = threadIdx.x; i < words; i += blockDim.x) seen[i] = cpu[i] = 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    // The misses in choice order (a decode step has a few dozen choices at most).
    int m = 0;
    for (int i = 0; i < n; ++i) {
      const int e = chosen[i];
      if (e < 0 || e >= E || !from_host[e] || (seen[e >> 5] >> (e & 31) & 1u)) continue;
      seen[e >> 5] |= 1u << (e & 31);
      ++m;
    }
    // floor(Q M + u) with u fixed by (step, layer): within one of Q M in every layer, Q M on
    // average (a top-1 model's single miss goes to the CPU in a share Q of its layers and steps).
    const int f = min(m, int(*share * float(m) + dither(*value, layer)));
    for (int i = 0, taken = 0; i < n && taken < f; ++i) {
      const int e = chosen[i];
      if (e < 0 || e >= E || !(seen[e >> 5] >> (e & 31) & 1u) || (cpu[e >> 5] >> (e & 31) & 1u)) continue;
      cpu[e >> 5] |= 1u << (e & 31);
      ++taken;
    }
  }
  __syncthreads();
  const auto on_cpu = [&](int e) { return e >= 0 && e < E && (cpu[e >> 5] >> (e & 31) & 1u); };
  for (int i = threadIdx.x; i < 3 * E; i += blockDim.x) split[i] = on_cpu(i % E) ? zero.m[i / E] : table[i];
  for (int e = threadIdx.x; e < E; e += blockDim.x) gpu_from_host[e] = from_host[e] && !on_cpu(e) ? 1 : 0;
  publish_block(x, nx, chosen, weights, n, on_cpu, hx, hc, hw, flag, value);
}

__global__ void add_kernel(float* y, const float* x, std::size_t n) {
  pdl_enter();
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void add_bias_kernel(float* y, const float* bias, int n) {
  pdl_enter();
  float* row = y + std::size_t(blockIdx.x) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] += bias[i];
}

__global__ void gather_rows_kernel(const float* src, const int64_t* rows, int width, float* dst) {
  pdl_enter();
  const int64_t r = rows[blockIdx.x];
  float* d = dst + std::size_t(blockIdx.x) * width;
  if (r < 0) {
    for (int i = threadIdx.x; i < width; i += blockDim.x) d[i] = 0.f;
    return;
  }
  const float* s = src + std::size_t(r) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) d[i] = s[i];
}

// Element i of the n = rows * width copied: row i / width, column i % width (grid-stride).
__global__ void copy_columns_kernel(const float* __restrict__ src, std::size_t src_ld, std::size_t repeat,
                                    float* __restrict__ dst, std::size_t dst_ld, std::size_t width, std::size_t n) {
  pdl_enter();
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / width, c = i % width;
    dst[r * dst_ld + c] = src[(r / repeat) * src_ld + c];
  }
}

// One warp per token (route_device.h).
template <int NE>
__global__ void route_kernel(const float* logits, int T, const RouteSpec r) {
  pdl_enter();
  const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t < T) route_token<NE>(logits + std::size_t(t) * r.E, t, r, int(threadIdx.x & 31));
}

__global__ void moe_count_kernel(const int32_t* chosen, int n, int32_t* counts) {
  pdl_enter();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&counts[chosen[i]], 1);
}

// One thread per token: its choices sorted by expert id (stable: top_k is small), each given the
// next free row of its expert.
__global__ void moe_scatter_kernel(const int32_t* chosen, const float* weights, int T, int top_k, const int32_t* row0,
                                   int32_t* cursor, int64_t* padded, int32_t* rows, float* sorted_weights) {
  pdl_enter();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  int order[32];
  for (int i = 0; i < top_k; ++i) {
    const int e = chosen[t * top_k + i];
    int j = i - 1;
    while (j >= 0 && chosen[t * top_k + order[j]] > e) {
      order[j + 1] = order[j];
      --j;
    }
    order[j + 1] = i;
  }
  for (int i = 0; i < top_k; ++i) {
    const int k = order[i], e = chosen[t * top_k + k];
    const int row = row0[e] + atomicAdd(&cursor[e], 1);
    padded[row] = t;
    rows[t * top_k + i] = row;
    sorted_weights[t * top_k + i] = weights[t * top_k + k];
  }
}

// slot_rows > 0: y in the slot layout (kernels.h), a row's two parts added before the weight.
__global__ void moe_combine_kernel(const float* y, const int32_t* rows, const float* weights, int top_k, int width,
                                   int slot_rows, float* out) {
  pdl_enter();
  const int t = blockIdx.x;
  float* o = out + std::size_t(t) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < top_k; ++k) {
      const int64_t r = rows[t * top_k + k];
      float v;
      if (slot_rows > 0) {
        const int64_t hi = 2 * slot_rows * (r / slot_rows) + r % slot_rows;
        v = y[std::size_t(hi) * width + i] + y[std::size_t(hi + slot_rows) * width + i];
      } else {
        v = y[std::size_t(r) * width + i];
      }
      acc += weights[t * top_k + k] * v;
    }
    o[i] = acc;
  }
}

__global__ void add_sigmoid_scaled_kernel(const float* y, const float* gate, int width, float* out) {
  pdl_enter();
  const float g = 1.f / (1.f + expf(-gate[blockIdx.x]));
  const float* yr = y + std::size_t(blockIdx.x) * width;
  float* o = out + std::size_t(blockIdx.x) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) o[i] += g * yr[i];
}

}  // namespace

void embedding(const std::byte* table, DType dtype, std::size_t row_bytes, int64_t cols, const int32_t* ids, int T,
               float* out, cudaStream_t s) {
  if (T > 0) launch(embedding_kernel, T, kBlock, 0, s, table, dtype, row_bytes, cols, ids, out);
}

void split_16(const float* x, std::size_t n, std::size_t group, bool f16, std::uint16_t* out, cudaStream_t s) {
  if (n) launch(split_16_kernel, std::min(blocks_for(n), 65535u), kBlock, 0, s, x, n, group, f16, out);
}

void round_f16(const float* x, std::size_t n, std::uint16_t* out, cudaStream_t s) {
  if (n) launch(round_f16_kernel, std::min(blocks_for(n), 65535u), kBlock, 0, s, x, n, out);
}

void gather_split(const float* src, const int64_t* rows, int R, int width, int slot_rows, std::uint16_t* out,
                  cudaStream_t s) {
  if (R > 0) launch(gather_split_kernel<false>, unsigned(R), kBlock, 0, s, src, rows, width, slot_rows, out);
}

void gather_f16(const float* src, const int64_t* rows, int R, int width, std::uint16_t* out, cudaStream_t s) {
  if (R > 0) launch(gather_split_kernel<true>, unsigned(R), kBlock, 0, s, src, rows, width, 1, out);
}

void glu_split(const float* gate, const float* up, int R, int width, const ExpertEpilogue& act, const int32_t* experts,
               int slot_rows, int in_parts, std::uint16_t* out, cudaStream_t s) {
  if (R > 0)
    launch(glu_split_kernel<false>, unsigned(R), kBlock, 0, s, gate, up, width, act, experts, slot_rows, in_parts, out);
}

void glu_f16(const float* gate, const float* up, int R, int width, const ExpertEpilogue& act, const int32_t* experts,
             int slot_rows, int in_parts, std::uint16_t* out, cudaStream_t s) {
  if (R > 0)
    launch(glu_split_kernel<true>, unsigned(R), kBlock, 0, s, gate, up, width, act, experts, slot_rows, in_parts, out);
}

void add_expert_bias(float* y, int R, int width, const float* bias, const int32_t* experts, int slot_rows, int parts,
                     cudaStream_t s) {
  if (R > 0 && bias)
    launch(add_expert_bias_kernel, unsigned(R), kBlock, 0, s, y, width, bias, experts, slot_rows, parts);
}

void add_halves(const float* y2, int T, int n, const float* bias, float* y, cudaStream_t s) {
  const std::size_t total = std::size_t(T) * std::size_t(n);
  if (total) launch(add_halves_kernel, std::min(blocks_for(total), 65535u), kBlock, 0, s, y2, total, n, bias, y);
}

namespace {

// The vector kernel for rows of `dim` when the pointers allow it; false: they do not.
template <bool kAdd>
bool rms_norm_vec(float* x, const float* delta, const float* w, float* out, int rows, int dim, float eps,
                  bool zero_centered, cudaStream_t s) {
  const bool aligned = (reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(delta) |
                        reinterpret_cast<std::uintptr_t>(w) | reinterpret_cast<std::uintptr_t>(out)) % 16 == 0;
  const int n4 = dim / 4;
  if (dim % 4 != 0 || !aligned || n4 > 4 * 1024) return false;
  const int threads = std::min(1024, (n4 + 31) / 32 * 32);
  const int v = (n4 + threads - 1) / threads;
  if (v == 1) {
    launch(rms_norm_vec_kernel<1, kAdd>, rows, threads, 0, s, x, delta, w, out, dim, eps, zero_centered);
  } else if (v == 2) {
    launch(rms_norm_vec_kernel<2, kAdd>, rows, threads, 0, s, x, delta, w, out, dim, eps, zero_centered);
  } else {
    launch(rms_norm_vec_kernel<4, kAdd>, rows, threads, 0, s, x, delta, w, out, dim, eps, zero_centered);
  }
  return true;
}

}  // namespace

void rms_norm(const float* x, const float* w, float* out, int rows, int dim, float eps, bool zero_centered,
              cudaStream_t s) {
  if (rows <= 0) return;
  // The plain kernel never writes x (kAdd is off).
  if (rms_norm_vec<false>(const_cast<float*>(x), nullptr, w, out, rows, dim, eps, zero_centered, s)) return;
  launch(rms_norm_kernel, rows, kBlock, 0, s, x, w, out, dim, eps, zero_centered);
}

void add_rms_norm(float* x, const float* delta, const float* w, float* out, int rows, int dim, float eps,
                  bool zero_centered, cudaStream_t s) {
  if (rows <= 0) return;
  if (rms_norm_vec<true>(x, delta, w, out, rows, dim, eps, zero_centered, s)) return;
  add(x, delta, std::size_t(rows) * std::size_t(dim), s);
  launch(rms_norm_kernel, rows, kBlock, 0, s, x, w, out, dim, eps, zero_centered);
}

void silu_mul(const float* gate, const float* up, float* out, std::size_t n, cudaStream_t s) {
  if (n) launch(silu_mul_kernel, blocks_for(n), kBlock, 0, s, gate, up, out, n);
}

void expert_glu(const float* gate, const float* up, float* out, std::size_t n, const ref::ExpertGlu& glu,
                cudaStream_t s) {
  if (n) launch(expert_glu_kernel, blocks_for(n), kBlock, 0, s, gate, up, out, n, glu_epilogue(glu));
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n, cudaStream_t s) {
  if (n) launch(gelu_tanh_mul_kernel, blocks_for(n), kBlock, 0, s, gate, up, out, n);
}

void scale(float* x, std::size_t n, float factor, cudaStream_t s) {
  if (n) launch(scale_kernel, blocks_for(n), kBlock, 0, s, x, n, factor);
}

void softcap(float* x, std::size_t n, float cap, cudaStream_t s) {
  if (n) launch(softcap_kernel, blocks_for(n), kBlock, 0, s, x, n, cap);
}

void mul_sigmoid(float* x, const float* gate, std::size_t n, cudaStream_t s) {
  if (n) launch(mul_sigmoid_kernel, blocks_for(n), kBlock, 0, s, x, gate, n);
}

void scale_by_top_sigmoid(const float* x, const float* logits, int T, int width, int E, float* out, cudaStream_t s) {
  if (T > 0) launch(scale_by_top_sigmoid_kernel, dim3(unsigned(T)), 256, 0, s, x, logits, width, E, out);
}

void attention_temperature(float* x, int T, int width, const int64_t* positions, float floor_scale, float attn_scale,
                           cudaStream_t s) {
  if (T > 0)
    launch(attention_temperature_kernel, dim3(unsigned(T)), 256, 0, s, x, width, positions, floor_scale, attn_scale);
}

void copy_from_host(void* dst, const void* pinned, std::size_t bytes, cudaStream_t s) {
  if (bytes == 0) return;
  const unsigned blocks = unsigned(std::min<std::size_t>((bytes + 16 * 256 - 1) / (16 * 256), 1024));
  copy_from_host_kernel<<<blocks, 256, 0, s>>>(static_cast<std::byte*>(dst), static_cast<const std::byte*>(pinned),
                                               bytes);
}

void wait_host_flag(const unsigned* flag, unsigned value, cudaStream_t s) {
  wait_host_flag_kernel<<<1, 1, 0, s>>>(flag, value);
}

void wait_host_flag_at(const unsigned* flag, const unsigned* value, cudaStream_t s) {
  wait_host_flag_at_kernel<<<1, 1, 0, s>>>(flag, value);
}

void publish_to_host(const float* x, std::size_t nx, const int32_t* chosen, const float* weights, int n, float* hx,
                     int32_t* hc, float* hw, unsigned* flag, const unsigned* value, cudaStream_t s) {
  publish_to_host_kernel<<<1, 512, 0, s>>>(x, nx, chosen, weights, n, hx, hc, hw, flag, value);
}

void split_misses_to_host(const float* x, std::size_t nx, const int32_t* chosen, const float* weights, int n,
                          const std::byte* const* table, const std::uint8_t* from_host, int E,
                          const std::byte* const (&zero)[3], const float* share, int layer, const std::byte** split,
                          std::uint8_t* gpu_from_host, float* hx, int32_t* hc, float* hw, unsigned* flag,
                          const unsigned* value, cudaStream_t s) {
  const ZeroExpert z{{zero[0], zero[1], zero[2]}};
  split_misses_kernel<<<1, 512, 0, s>>>(x, nx, chosen, weights, n, table, from_host, E, z, share, layer, split,
                                        gpu_from_host, hx, hc, hw, flag, value);
}

void add(float* y, const float* x, std::size_t n, cudaStream_t s) {
  if (n) launch(add_kernel, blocks_for(n), kBlock, 0, s, y, x, n);
}

void add_bias(float* y, const float* bias, int T, int n, cudaStream_t s) {
  if (T > 0) launch(add_bias_kernel, T, kBlock, 0, s, y, bias, n);
}

void gather_rows(const float* src, const int64_t* rows, int n, int width, float* dst, cudaStream_t s) {
  if (n > 0) launch(gather_rows_kernel, n, kBlock, 0, s, src, rows, width, dst);
}

void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                  std::size_t rows, std::size_t width, cudaStream_t s) {
  const std::size_t n = rows * width;
  if (n)
    launch(copy_columns_kernel, std::min(blocks_for(n), 65535u), kBlock, 0, s, src, src_ld, repeat, dst, dst_ld, width,
           n);
}

void route_top_k(const float* logits, int T, const RouteSpec& r, cudaStream_t s) {
  constexpr int kWarps = 4;
  if (T <= 0) return;
  const unsigned blocks = unsigned((T + kWarps - 1) / kWarps);
  if (r.E <= 32 * kRouteRegisters) {
    launch(route_kernel<kRouteRegisters>, blocks, 32 * kWarps, 0, s, logits, T, r);
  } else {
    launch(route_kernel<0>, blocks, 32 * kWarps, 0, s, logits, T, r);
  }
}

void moe_count(const int32_t* chosen, int n, int32_t* counts, cudaStream_t s) {
  if (n > 0) launch(moe_count_kernel, blocks_for(std::size_t(n)), kBlock, 0, s, chosen, n, counts);
}

void moe_scatter(const int32_t* chosen, const float* weights, int T, int top_k, const int32_t* row0, int32_t* cursor,
                 int64_t* padded, int32_t* rows, float* sorted_weights, cudaStream_t s) {
  constexpr int kThreads = 128;
  if (T > 0)
    launch(moe_scatter_kernel, (T + kThreads - 1) / kThreads, kThreads, 0, s, chosen, weights, T, top_k, row0, cursor,
           padded, rows, sorted_weights);
}

void moe_combine(const float* y, const int32_t* rows, const float* weights, int T, int top_k, int width, float* out,
                 cudaStream_t s) {
  if (T > 0) launch(moe_combine_kernel, T, kBlock, 0, s, y, rows, weights, top_k, width, 0, out);
}

void moe_combine_split(const float* y, const int32_t* rows, const float* weights, int T, int top_k, int width,
                       int slot_rows, float* out, cudaStream_t s) {
  if (T > 0) launch(moe_combine_kernel, T, kBlock, 0, s, y, rows, weights, top_k, width, slot_rows, out);
}

void add_sigmoid_scaled(const float* y, const float* gate, int T, int width, float* out, cudaStream_t s) {
  if (T > 0) launch(add_sigmoid_scaled_kernel, T, kBlock, 0, s, y, gate, width, out);
}

}  // namespace ft::engine::cuda

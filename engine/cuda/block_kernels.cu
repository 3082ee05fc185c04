// Products and lookups over weights in GGUF block dtypes (kernels.h), read as stored: each kernel
// decodes 32 values at a time in registers (block_dequant.h, ggml's arithmetic exactly) and never
// writes a dequantised copy of a matrix, except the bf16 tiles a prefill-sized product feeds to
// cuBLAS (dequant_split_rows), which are a workspace of a few MB reused tile after tile. Decode
// products on the types with lanes (Q4_K, Q6_K, Q4_0, Q8_0) go to block_unit_kernels.cu instead.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "block_dequant.h"
#include "glu_device.h"
#include "kernels.h"
#include "launch.h"
#include "reduce_device.h"

namespace ft::engine::cuda {
namespace {

constexpr int kWarps = 8;  // rows per gemv block

// 32 decoded weights . 32 activations (x 16-byte aligned), in the one order every product here sums them.
__device__ __forceinline__ float dot32(const float (&v)[32], const float* x) {
  const float4* xv = reinterpret_cast<const float4*>(x);
  float s = 0.f;
  for (int j = 0; j < 8; ++j) {
    const float4 a = xv[j];
    s += v[4 * j] * a.x + v[4 * j + 1] * a.y + v[4 * j + 2] * a.z + v[4 * j + 3] * a.w;
  }
  return s;
}

template <DType T>
__global__ void embedding_blocks_kernel(const std::byte* table, std::size_t row_bytes, int chunks, const int32_t* ids,
                                        float* out) {
  pdl_enter();
  const std::byte* row = table + std::size_t(ids[blockIdx.x]) * row_bytes;
  float* o = out + std::size_t(blockIdx.x) * chunks * 32;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[32];
    dequant_chunk<T>(row, c, v);
    for (int j = 0; j < 32; ++j) o[c * 32 + j] = v[j];
  }
}

// One warp per weight row: each lane decodes every 32nd chunk of the row and dots it with the T
// activation rows; the lanes' sums are added in a fixed tree, so a row's result never depends on
// the launch.
template <DType T>
__global__ void gemv_blocks_kernel(const std::byte* w, std::size_t row_bytes, int rows, int chunks, const float* x,
                                   int n_tokens, const float* bias, float* y) {
  pdl_enter();
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int r = int(blockIdx.x) * kWarps + warp;
  if (r >= rows) return;
  const std::byte* row = w + std::size_t(r) * row_bytes;
  const std::size_t cols = std::size_t(chunks) * 32;
  float acc[kGemvMaxRows] = {};
  for (int c = lane; c < chunks; c += 32) {
    float v[32];
    dequant_chunk<T>(row, c, v);
    for (int t = 0; t < n_tokens; ++t) acc[t] += dot32(v, x + t * cols + std::size_t(c) * 32);
  }
  for (int t = 0; t < n_tokens; ++t) {
    const float s = warp_sum(acc[t]);
    if (lane == 0) y[std::size_t(t) * rows + r] = s + (bias ? bias[r] : 0.f);
  }
}

// Rows [0, rows) of w as bf16 hi + lo planes [rows, cols] (w ~= hi + lo to ~2^-17): one thread per
// 32-value chunk. kF16: one fp16 plane into `hi` instead (w to ~2^-11; lo unused).
// Matrix blockIdx.y: ws[blockIdx.y] (or w when ws is null) into planes at hi / lo + y * plane.
template <DType T, bool kF16>
__global__ void dequant_split_kernel(const std::byte* w, const std::byte* const* ws, std::size_t row_bytes, int rows,
                                     int chunks, __nv_bfloat16* hi, __nv_bfloat16* lo, std::size_t plane) {
  pdl_enter();
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::size_t(rows) * chunks) return;
  if (ws) w = ws[blockIdx.y];
  hi += blockIdx.y * plane;
  lo += blockIdx.y * plane;
  const int r = int(i / chunks), c = int(i % chunks);
  float v[32];
  dequant_chunk<T>(w + std::size_t(r) * row_bytes, c, v);
  // The chunk's 64 bytes of each plane go out as four 16-byte stores: adjacent threads write
  // adjacent chunks, so a warp's stores cover whole lines (one 2-byte store per value made every
  // store instruction touch 32 lines).
  const std::size_t at = std::size_t(r) * chunks * 32 + std::size_t(c) * 32;
  uint4* hv = reinterpret_cast<uint4*>(hi + at);
  uint4* lv = reinterpret_cast<uint4*>(lo + at);
  for (int q = 0; q < 4; ++q) {
    std::uint32_t hw[4], lw[4];
    for (int p = 0; p < 4; ++p) {
      const float a = v[8 * q + 2 * p], b = v[8 * q + 2 * p + 1];
      if constexpr (kF16) {
        // A weight is its block's scale times a small code: far inside fp16's range for the
        // scales models have (one past 65504 would become inf here).
        const __half2 h = __floats2half2_rn(a, b);
        hw[p] = *reinterpret_cast<const std::uint32_t*>(&h);
      } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        const __nv_bfloat162 l = __floats2bfloat162_rn(a - __low2float(h), b - __high2float(h));
        hw[p] = *reinterpret_cast<const std::uint32_t*>(&h);
        lw[p] = *reinterpret_cast<const std::uint32_t*>(&l);
      }
    }
    hv[q] = make_uint4(hw[0], hw[1], hw[2], hw[3]);
    if constexpr (!kF16) lv[q] = make_uint4(lw[0], lw[1], lw[2], lw[3]);
  }
}

// row . x over chunks [lane, lane + 32, ...) of a row of `chunks` chunks: this lane's share.
template <DType T>
__device__ __forceinline__ float dot_chunks(const std::byte* row, int chunks, const float* x, int lane) {
  float s = 0.f;
  for (int c = lane; c < chunks; c += 32) {
    float v[32];
    dequant_chunk<T>(row, c, v);
    s += dot32(v, x + std::size_t(c) * 32);
  }
  return s;
}

// moe_gate_up_kernel (gemv_kernels.cu) on block-dtype experts: one (token, choice) pair per
// blockIdx.y, a warp per intermediate row, the gate and up rows decoded side by side.
template <DType G>
__global__ void moe_gate_up_blocks_kernel(const ExpertTable e, const float* x, int top_k, const int32_t* chosen,
                                          float* h) {
  pdl_enter();
  const int pair = int(blockIdx.y), row = int(blockIdx.x) * kWarps + int(threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (row >= e.inter) return;
  const int expert = chosen[pair];
  const float* xt = x + std::size_t(pair / top_k) * e.hidden;
  const std::size_t off = std::size_t(row) * e.gate_up_row_bytes;
  const int chunks = e.hidden / 32;
  const float g = warp_sum(dot_chunks<G>(e.gate[expert] + off, chunks, xt, lane));
  const float u = warp_sum(dot_chunks<G>(e.up[expert] + off, chunks, xt, lane));
  if (lane == 0) h[std::size_t(pair) * e.inter + row] = expert_h(e.act, e.gate[expert], expert, e.inter, row, g, u);
}

// moe_down_kernel on block-dtype experts: one token per blockIdx.y, a warp per output row, the
// weighted down products of the token's choices added in ascending expert order.
template <DType D>
__global__ void moe_down_blocks_kernel(const ExpertTable e, const float* h, int top_k, const ChoicesByExpert by_expert,
                                       float* out) {
  pdl_enter();
  const int t = int(blockIdx.y), row = int(blockIdx.x) * kWarps + int(threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (row >= e.hidden) return;
  float acc = 0.f;
  for (int i = 0; i < top_k; ++i) {
    const int at = t * top_k + i, expert = by_expert.expert[at];
    const std::byte* w = e.down[expert] + std::size_t(row) * e.down_row_bytes;
    const float* hr = h + std::size_t(by_expert.pair[at]) * e.inter;
    acc += by_expert.weight[at] * (warp_sum(dot_chunks<D>(w, e.inter / 32, hr, lane)) +
                                   expert_down_bias(e.act, e.down[expert], expert, e.hidden, row));
  }
  if (lane == 0) out[std::size_t(t) * e.hidden + row] = acc;
}

}  // namespace

void moe_gate_up_blocks(const ExpertTable& experts, const float* x, int T, int top_k, const int32_t* chosen, float* h,
                        cudaStream_t s, const X8* xq) {
  if (T <= 0) return;
  if (experts.gate_up_units) return moe_gate_up_units(experts, x, T, top_k, chosen, h, s, xq);
  with_block_dtype(experts.gate_up_dtype, [&](auto d) {
    launch(moe_gate_up_blocks_kernel<decltype(d)::value>,
           dim3(unsigned((experts.inter + kWarps - 1) / kWarps), unsigned(T * top_k)), 32 * kWarps, 0, s, experts, x,
           top_k, chosen, h);
  });
}

void moe_down_combine_blocks(const ExpertTable& experts, const float* h, int T, int top_k,
                             const ChoicesByExpert& by_expert, float* out, cudaStream_t s, const X8* hq) {
  if (T <= 0) return;
  if (experts.down_units) return moe_down_combine_units(experts, h, T, top_k, by_expert, out, s, hq);
  with_block_dtype(experts.down_dtype, [&](auto d) {
    launch(moe_down_blocks_kernel<decltype(d)::value>, dim3(unsigned((experts.hidden + kWarps - 1) / kWarps), unsigned(T)),
           32 * kWarps, 0, s, experts, h, top_k, by_expert, out);
  });
}

bool is_block_dtype(DType dtype) {
  return with_block_dtype(dtype, [](auto) {});
}

namespace {
// Every plane decode: one matrix w (ws null) or `count` of them; bf16 hi + lo planes, or one fp16
// plane into hi where lo is null.
void decode_planes(const std::byte* w, const std::byte* const* ws, int count, DType dtype, std::size_t row_bytes,
                   int rows, int cols, std::uint16_t* hi, std::uint16_t* lo, cudaStream_t s) {
  const std::size_t n = std::size_t(rows) * std::size_t(cols / 32);
  if (n == 0 || count == 0) return;
  const dim3 grid(unsigned((n + 127) / 128), unsigned(count));
  const std::size_t plane = std::size_t(rows) * std::size_t(cols);
  auto* h = reinterpret_cast<__nv_bfloat16*>(hi);
  with_block_dtype(dtype, [&](auto t) {
    if (lo) {
      launch(dequant_split_kernel<decltype(t)::value, false>, grid, 128, 0, s, w, ws, row_bytes, rows, cols / 32, h,
             reinterpret_cast<__nv_bfloat16*>(lo), plane);
    } else {
      launch(dequant_split_kernel<decltype(t)::value, true>, grid, 128, 0, s, w, ws, row_bytes, rows, cols / 32, h, h,
             plane);
    }
  });
}
}  // namespace

void embedding_blocks(const std::byte* table, DType dtype, std::size_t row_bytes, int64_t cols, const int32_t* ids,
                      int T, float* out, cudaStream_t s) {
  if (T <= 0) return;
  with_block_dtype(dtype, [&](auto t) {
    launch(embedding_blocks_kernel<decltype(t)::value>, T, 128, 0, s, table, row_bytes, int(cols / 32), ids, out);
  });
}

void gemv_blocks(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, const float* x, int T,
                 const float* bias, float* y, cudaStream_t s) {
  if (T <= 0 || rows <= 0) return;
  if (units_fit(dtype, w, row_bytes, cols)) return gemv_units(w, dtype, row_bytes, rows, cols, x, T, bias, y, s);
  with_block_dtype(dtype, [&](auto t) {
    launch(gemv_blocks_kernel<decltype(t)::value>, unsigned((rows + kWarps - 1) / kWarps), 32 * kWarps, 0, s, w,
           row_bytes, rows, cols / 32, x, T, bias, y);
  });
}

void dequant_split_rows(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, std::uint16_t* hi,
                        std::uint16_t* lo, cudaStream_t s) {
  decode_planes(w, nullptr, 1, dtype, row_bytes, rows, cols, hi, lo, s);
}

void dequant_split_matrices(const std::byte* const* ws, int count, DType dtype, std::size_t row_bytes, int rows,
                            int cols, std::uint16_t* hi, std::uint16_t* lo, cudaStream_t s) {
  decode_planes(nullptr, ws, count, dtype, row_bytes, rows, cols, hi, lo, s);
}

bool f16_block_products(BlockProducts kind) {
  const char* env = std::getenv("FT_CUDA_BLOCK_GEMM");
  if (env && std::strcmp(env, "f16") == 0) return true;
  if (env && std::strcmp(env, "planes") == 0) return false;
  return kind == BlockProducts::kExperts;
}

void dequant_f16_rows(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, std::uint16_t* out,
                      cudaStream_t s) {
  decode_planes(w, nullptr, 1, dtype, row_bytes, rows, cols, out, nullptr, s);
}

void dequant_f16_matrices(const std::byte* const* ws, int count, DType dtype, std::size_t row_bytes, int rows, int cols,
                          std::uint16_t* out, cudaStream_t s) {
  decode_planes(nullptr, ws, count, dtype, row_bytes, rows, cols, out, nullptr, s);
}

}  // namespace ft::engine::cuda

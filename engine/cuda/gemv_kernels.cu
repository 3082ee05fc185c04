// Small-batch products for decode (kernels.h): one warp per output row streams the row's bf16
// weights once, 16 bytes per lane per step, against every row of x (fp32, from L1/L2), and keeps
// one fp32 accumulator per row of x. Summation order is fixed by the row length alone, so a
// token's result does not depend on how many tokens share the call.
#include <cuda_bf16.h>

#include <cstdint>

#include "glu_device.h"
#include "kernels.h"
#include "launch.h"
#include "reduce_device.h"
#include "route_device.h"

namespace ft::engine::cuda {
namespace {

constexpr int kWarps = 8;  // output rows per block

__device__ __forceinline__ void unpack8(const uint4 raw, float (&w)[8]) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(p[i]);
    w[2 * i] = f.x;
    w[2 * i + 1] = f.y;
  }
}

// 8 weights . 8 activations (two float4s), in the order every product here sums them.
__device__ __forceinline__ float dot8(const float (&w)[8], const float4 a, const float4 b) {
  return w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
}

// Weight loads are issued kBatch steps at a time with no branch between them (an index past the
// row's end is clamped to its last 16 bytes, loaded and not used): a row is a few steps long
// (2048 columns: 8 per lane), and a load behind a bounds check would wait out the previous one's
// latency before it could issue.
constexpr int kBatch = 4;

// acc[t] += this lane's batch of a row's weights (raw[b]: the 16 bytes of step base + 32 b) . x_t,
// steps ascending; steps past the row's end (n8 steps of 8 columns) are not counted. x_t starts
// ldx floats after x_{t-1}.
template <int NT>
__device__ __forceinline__ void multiply_batch(const uint4 (&raw)[kBatch], int base, int n8, int ldx, const float* x,
                                               int T, float (&acc)[NT]) {
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    const int c8 = base + 32 * b;
    if (c8 >= n8) break;
    float w[8];
    unpack8(raw[b], w);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= T) break;
      const float4* xv = reinterpret_cast<const float4*>(x + std::size_t(t) * ldx) + 2 * c8;
      acc[t] += dot8(w, xv[0], xv[1]);
    }
  }
}

// Asks L2 for the lines of a row's bytes [from, bytes) (128-byte lines, from a multiple of 128), a
// line a lane: a kernel names the weights it will read after its wait before it.
__device__ __forceinline__ void prefetch_row_l2(const std::byte* row, std::size_t from, std::size_t bytes) {
  for (std::size_t at = from + 128 * (threadIdx.x & 31); at < bytes; at += 128 * 32) prefetch_l2(row + at);
}

// acc[t] += w_row . x_t over `cols` columns (cols % 8 == 0; x_t at x + t ldx), this lane's share,
// steps ascending. Before pdl_enter (weights are no kernel's output) the first batch of the row's weights is loaded
// and the rest of the row asked of L2, so the whole row streams while the previous kernel finishes;
// each later batch is loaded while the one before it is multiplied.
template <int NT>
__device__ __forceinline__ void dot_rows_after_wait(const std::byte* row, int cols, const float* x, int ldx, int T,
                                                    float (&acc)[NT]) {
  const uint4* w4 = reinterpret_cast<const uint4*>(row);
  const int n8 = cols / 8, lane = int(threadIdx.x & 31);
  uint4 next[kBatch];
#pragma unroll
  for (int b = 0; b < kBatch; ++b) next[b] = __ldg(w4 + min(lane + 32 * b, n8 - 1));
  prefetch_row_l2(row, 32 * kBatch * sizeof(uint4), std::size_t(cols) * 2);
  pdl_enter();
  for (int base = lane; base < n8; base += 32 * kBatch) {
    uint4 raw[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) raw[b] = next[b];
    if (base + 32 * kBatch < n8) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) next[b] = __ldg(w4 + min(base + 32 * (kBatch + b), n8 - 1));
    }
    multiply_batch<NT>(raw, base, n8, ldx, x, T, acc);
  }
}

// The same, for calls from kernels that have already passed pdl_enter.
template <int NT>
__device__ __forceinline__ void dot_rows(const std::byte* row, int cols, const float* x, int T, float (&acc)[NT]) {
  const uint4* w4 = reinterpret_cast<const uint4*>(row);
  const int n8 = cols / 8;
  for (int base = threadIdx.x & 31; base < n8; base += 32 * kBatch) {
    uint4 raw[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) raw[b] = __ldg(w4 + min(base + 32 * b, n8 - 1));
    multiply_batch<NT>(raw, base, n8, cols, x, T, acc);
  }
}

// Writes a row whose sums are split over kParts consecutive warps of the block (acc: this warp's):
// the warps' sums added in warp order, then the row's bias, by the row's first warp. Every warp of
// the block calls it (a block barrier); a row past out.rows writes nothing.
template <int NT, int kParts>
__device__ __forceinline__ void write_split_row(const GemvOut& out, int row, const float (&acc)[NT], int T) {
  __shared__ float partial[kWarps][NT];
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0) partial[warp][t] = v;
  }
  __syncthreads();
  if (warp % kParts != 0 || lane != 0 || row >= out.rows) return;
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= T) break;
    float v = partial[warp][t];
    for (int p = 1; p < kParts; ++p) v += partial[warp + p][t];
    out.y[std::size_t(t) * out.rows + row] = v + (out.bias ? out.bias[row] : 0.f);
  }
}

// An fp32 product (a GGUF router: E rows of hidden fp32, too few rows to keep the GPU's loads in
// flight a warp a row) with kF32Split warps a row: warp p of a row takes float4 steps p*32 + lane,
// + 32 kF32Split, ...; the warps' sums are added in warp order. The order depends on the row length
// alone, so a token's logits do not depend on how many tokens share the call.
constexpr int kF32Split = 4, kF32RowsPerBlock = kWarps / kF32Split;

template <int NT>
__device__ __forceinline__ void gemv_rows_f32(const GemvOut& out, int first_row, int cols, const float* x, int T) {
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int row = first_row + warp / kF32Split, part = warp % kF32Split;
  float acc[NT] = {};
  // (a warp past the last row reads nothing; its pointer stays in the matrix)
  const float4* w4 = reinterpret_cast<const float4*>(out.w + std::size_t(min(row, out.rows - 1)) * out.row_bytes);
  const int n4 = cols / 4;
  if (row < out.rows) {  // the weights' lines asked for while the previous kernel runs
    for (int c = part * 32 + lane; c < n4; c += 32 * kF32Split) prefetch_l2(w4 + c);
  }
  pdl_enter();
  if (row < out.rows) {
#pragma unroll 4
    for (int c = part * 32 + lane; c < n4; c += 32 * kF32Split) {
      const float4 w = __ldg(w4 + c);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= T) break;
        const float4 a = reinterpret_cast<const float4*>(x + std::size_t(t) * cols)[c];
        acc[t] += w.x * a.x + w.y * a.y + w.z * a.z + w.w * a.w;
      }
    }
  }
  write_split_row<NT, kF32Split>(out, row, acc, T);
}

// Rows of kHalvesCols columns or more go to a pair of warps, a half each: a warp a row would leave
// too few warps on each SM to keep a short product's reads in flight (an attention output
// projection's 2,048 rows of 4,096: 15 warps an SM, against 39 for q|k|v's 5,120 rows of 2,048).
constexpr int kHalvesCols = 4096;

// Rows first_row + w / 2 (a block's kWarps / 2) of a bf16 product, warp w taking half w % 2 of its
// row; the halves' sums are added in that order. The order depends on the row length alone.
template <int NT>
__device__ __forceinline__ void gemv_rows_halves(const GemvOut& out, int first_row, int cols, const float* x, int T) {
  const int warp = int(threadIdx.x >> 5);
  const int row = first_row + warp / 2, half = warp % 2, half_cols = cols / 2;
  float acc[NT] = {};
  if (row < out.rows) {
    const std::byte* w = out.w + std::size_t(row) * out.row_bytes + std::size_t(half) * half_cols * 2;
    dot_rows_after_wait<NT>(w, half_cols, x + half * half_cols, cols, T, acc);
  } else {
    pdl_enter();
  }
  write_split_row<NT, 2>(out, row, acc, T);
}

// The products of one launch; block b works on product `out` where first_block[out] <= b.
struct GemvBatch {
  GemvOut outs[kGemvMaxOuts];
  unsigned first_block[kGemvMaxOuts + 1];
  int n_outs;
  bool halves;  // the bf16 rows go to pairs of warps (gemv_rows_halves)
};

// Block b's rows of the launch's products (a warp per row; warps past a product's rows idle). Passes
// pdl_enter on every path.
template <int NT>
__device__ __forceinline__ void gemv_rows(const GemvBatch& batch, int cols, const float* x, int T) {
  int o = 0;
  while (o + 1 < batch.n_outs && blockIdx.x >= batch.first_block[o + 1]) ++o;
  const GemvOut& out = batch.outs[o];
  if (out.f32) return gemv_rows_f32<NT>(out, int(blockIdx.x - batch.first_block[o]) * kF32RowsPerBlock, cols, x, T);
  if (batch.halves) return gemv_rows_halves<NT>(out, int(blockIdx.x - batch.first_block[o]) * (kWarps / 2), cols, x, T);
  const int row = int(blockIdx.x - batch.first_block[o]) * kWarps + (threadIdx.x >> 5);
  if (row >= out.rows) {
    pdl_enter();
    return;
  }
  float acc[NT] = {};
  dot_rows_after_wait<NT>(out.w + std::size_t(row) * out.row_bytes, cols, x, cols, T, acc);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= T) break;
    const float v = warp_sum(acc[t]);
    if ((threadIdx.x & 31) == 0) out.y[std::size_t(t) * out.rows + row] = v + (out.bias ? out.bias[row] : 0.f);
  }
}

template <int NT>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const GemvBatch batch, int cols, const float* x, int T) {
  gemv_rows<NT>(batch, cols, x, T);  // waits for the previous kernel inside
}

// The router's logits, then routing by the block that finishes last: every block counts itself
// done after its rows are visible (fence, then the counter), so the last one reads all the logits.
template <int NT>
__global__ void __launch_bounds__(kWarps * 32) gemv_route_kernel(const GemvBatch batch, int cols, const float* x,
                                                                 int T, const RouteSpec r, unsigned* done) {
  gemv_rows<NT>(batch, cols, x, T);
  if (!last_to_finish(done, int(gridDim.x))) return;  // then every block's logits are visible here
  const float* logits = batch.outs[0].y;
  if (T == 1 && !r.grouped && r.E <= kWarps * 32) {  // batch 1: the whole block ranks the logits
    route_token_block<kWarps * 32>(logits, 0, r);
    return;
  }
  for (int t = int(threadIdx.x >> 5); t < T; t += kWarps) {
    if (r.E <= 32 * kRouteRegisters) {
      route_token<kRouteRegisters>(logits + std::size_t(t) * r.E, t, r, int(threadIdx.x & 31));
    } else {
      route_token<0>(logits + std::size_t(t) * r.E, t, r, int(threadIdx.x & 31));
    }
  }
}

// One (token, choice) pair per blockIdx.y; a warp per intermediate row computes the gate and up
// dots together (x read once for both, both rows' loads in flight at once).
__global__ void __launch_bounds__(kWarps * 32) moe_gate_up_kernel(const ExpertTable e, const float* x, int top_k,
                                                                  const int32_t* chosen, float* h) {
  pdl_enter();
  const int pair = blockIdx.y, row = blockIdx.x * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= e.inter) return;
  const int expert = chosen[pair];
  const float* xt = x + std::size_t(pair / top_k) * e.hidden;
  const uint4* g4 = reinterpret_cast<const uint4*>(e.gate[expert] + std::size_t(row) * e.gate_up_row_bytes);
  const uint4* u4 = reinterpret_cast<const uint4*>(e.up[expert] + std::size_t(row) * e.gate_up_row_bytes);
  float g = 0.f, u = 0.f;
  const int n8 = e.hidden / 8;
  for (int base = lane; base < n8; base += 32 * kBatch) {
    uint4 rg[kBatch], ru[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int c8 = min(base + 32 * b, n8 - 1);
      rg[b] = __ldg(g4 + c8);
      ru[b] = __ldg(u4 + c8);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int c8 = base + 32 * b;
      if (c8 >= n8) break;
      float wg[8], wu[8];
      unpack8(rg[b], wg);
      unpack8(ru[b], wu);
      const float4* xv = reinterpret_cast<const float4*>(xt) + 2 * c8;
      const float4 a = xv[0], bv = xv[1];
      g += dot8(wg, a, bv);
      u += dot8(wu, a, bv);
    }
  }
  const float gs = warp_sum(g), us = warp_sum(u);
  if (lane == 0) h[std::size_t(pair) * e.inter + row] = expert_h(e.act, e.gate[expert], expert, e.inter, row, gs, us);
}

// One token per blockIdx.y, kParts warps per output row: the weighted down products of the token's
// choices added in ascending expert order (by_expert, as the router wrote it). Lane i holds choice
// i's matrix, row of h and weight, and the warp passes them round by shuffles: no block barrier
// before the weight loads. Up to 8 choices (kMaxK) go to the row's warps kMaxK / kParts each; a
// warp keeps a dot a choice and reads all its choices' next 16 bytes in one step, each dot summing
// in the order of dot_rows. With kParts 2 the weighted dots meet in shared memory and are added in
// the same order as one warp adds them, so the two layouts give the same bits; two warps a row keep
// twice the reads in flight (2,048 rows: 15 warps an SM with one). More than kMaxK choices: one warp
// a row, a choice at a time.
//
// Only h is the previous kernel's (gate/up's) output: the choices are the router's, two or more
// launches back, and the table and biases are no kernel's. So the choices are read, and the chosen
// rows asked of L2, before pdl_enter: the down rows stream while gate/up still runs.
constexpr int kMaxK = 8;
template <int kParts>
__global__ void __launch_bounds__(kWarps * 32)
    moe_down_kernel(const ExpertTable e, const float* h, int top_k, const ChoicesByExpert by_expert, float* out) {
  constexpr int kRows = kWarps / kParts, kPer = kMaxK / kParts;
  __shared__ float terms[kRows][kMaxK];
  const int t = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row = blockIdx.x * kRows + warp / kParts, part = warp % kParts;
  const bool active = row < e.hidden;
  unsigned long long my_down = 0;
  int my_pair = 0;
  float my_weight = 0.f, my_bias = 0.f;
  if (active && lane < top_k) {
    const int i = t * top_k + lane, expert = by_expert.expert[i];
    my_down = reinterpret_cast<unsigned long long>(e.down[expert]);
    my_pair = by_expert.pair[i];
    my_weight = by_expert.weight[i];
    my_bias = expert_down_bias(e.act, e.down[expert], expert, e.hidden, row);
  }
  const std::size_t row_off = std::size_t(row) * e.down_row_bytes;
  const auto down_of = [&](int i) {
    return reinterpret_cast<const std::byte*>(__shfl_sync(0xffffffffu, my_down, i)) + row_off;
  };
  const bool fused = top_k <= kMaxK;
  // This warp's choices: [first, end).
  const int first = fused ? part * kPer : 0, end = fused ? min(first + kPer, top_k) : top_k;
  if (active) {
    for (int i = first; i < end; ++i) prefetch_row_l2(down_of(i), 0, std::size_t(e.inter) * 2);
  }
  pdl_enter();
  float acc = 0.f;
  const auto add = [&](int i, float term) {
    if constexpr (kParts == 1) {
      acc += term;
    } else if (lane == 0) {
      terms[warp / kParts][i] = term;
    }
  };
  if (active && fused && first < end) {
    // Every choice's next 16 bytes in one step, no branch between the loads (choices past `end`
    // load the first one's again, unused).
    const uint4* down[kPer];
    const float* hrow[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int src = first + j < end ? first + j : first;
      down[j] = reinterpret_cast<const uint4*>(down_of(src));
      hrow[j] = h + std::size_t(__shfl_sync(0xffffffffu, my_pair, src)) * e.inter;
    }
    float d[kPer] = {};
    for (int c8 = lane; c8 < e.inter / 8; c8 += 32) {
      uint4 raw[kPer];
#pragma unroll
      for (int j = 0; j < kPer; ++j) raw[j] = __ldg(down[j] + c8);
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (first + j >= end) break;
        float w[8];
        unpack8(raw[j], w);
        const float4* xv = reinterpret_cast<const float4*>(hrow[j]) + 2 * c8;
        d[j] += dot8(w, xv[0], xv[1]);
      }
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = first + j;
      if (i >= end) break;
      add(i, __shfl_sync(0xffffffffu, my_weight, i) * (warp_sum(d[j]) + __shfl_sync(0xffffffffu, my_bias, i)));
    }
  } else if (active && !fused) {
    for (int i = 0; i < top_k; ++i) {
      float d[1] = {};
      const int pair = __shfl_sync(0xffffffffu, my_pair, i);
      dot_rows<1>(down_of(i), e.inter, h + std::size_t(pair) * e.inter, 1, d);
      const int at = t * top_k + i, expert = by_expert.expert[at];
      const float bias = expert_down_bias(e.act, e.down[expert], expert, e.hidden, row);
      acc += by_expert.weight[at] * (warp_sum(d[0]) + bias);
    }
  }
  if constexpr (kParts > 1) {
    __syncthreads();
    if (active && part == 0 && lane == 0) {
      for (int i = 0; i < top_k; ++i) acc += terms[warp / kParts][i];
    }
  }
  if (active && part == 0 && lane == 0) out[std::size_t(t) * e.hidden + row] = acc;
}

unsigned row_blocks(int rows, int per_block = kWarps) { return unsigned((rows + per_block - 1) / per_block); }

}  // namespace

bool gemv_fits(const std::byte* w, std::size_t row_bytes, int64_t cols) {
  return cols % 8 == 0 && row_bytes % 16 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
}

namespace {

GemvBatch make_batch(const GemvOut* outs, int n_outs, int cols) {
  GemvBatch batch{};
  batch.n_outs = n_outs;
  batch.halves = cols >= kHalvesCols && cols % 16 == 0;
  for (int o = 0; o < n_outs; ++o) {
    batch.outs[o] = outs[o];
    const int per_block = outs[o].f32 ? kF32RowsPerBlock : batch.halves ? kWarps / 2 : kWarps;
    batch.first_block[o + 1] = batch.first_block[o] + row_blocks(outs[o].rows, per_block);
  }
  return batch;
}

}  // namespace

void gemv_bf16(const GemvOut* outs, int n_outs, int cols, const float* x, int T, cudaStream_t s) {
  const GemvBatch batch = make_batch(outs, n_outs, cols);
  const dim3 grid(batch.first_block[n_outs]), block(kWarps * 32);
  if (T <= 1) launch(gemv_kernel<1>, grid, block, 0, s, batch, cols, x, T);
  else if (T <= 2) launch(gemv_kernel<2>, grid, block, 0, s, batch, cols, x, T);
  else if (T <= 4) launch(gemv_kernel<4>, grid, block, 0, s, batch, cols, x, T);
  else launch(gemv_kernel<8>, grid, block, 0, s, batch, cols, x, T);
}

void gemv_route(const GemvOut& router, int cols, const float* x, int T, const RouteSpec& r, unsigned* done,
                cudaStream_t s) {
  const GemvBatch batch = make_batch(&router, 1, cols);
  const dim3 grid(batch.first_block[1]), block(kWarps * 32);
  if (T <= 1) launch(gemv_route_kernel<1>, grid, block, 0, s, batch, cols, x, T, r, done);
  else if (T <= 2) launch(gemv_route_kernel<2>, grid, block, 0, s, batch, cols, x, T, r, done);
  else if (T <= 4) launch(gemv_route_kernel<4>, grid, block, 0, s, batch, cols, x, T, r, done);
  else launch(gemv_route_kernel<8>, grid, block, 0, s, batch, cols, x, T, r, done);
}

void moe_gate_up(const ExpertTable& experts, const float* x, int T, int top_k, const int32_t* chosen, float* h,
                 cudaStream_t s, const X8* xq) {
  if (T <= 0) return;
  if (experts.gate_up_dtype != DType::kBF16) return moe_gate_up_blocks(experts, x, T, top_k, chosen, h, s, xq);
  launch(moe_gate_up_kernel, dim3(row_blocks(experts.inter), unsigned(T * top_k)), kWarps * 32, 0, s, experts, x,
         top_k, chosen, h);
}

void moe_down_combine(const ExpertTable& experts, const float* h, int T, int top_k, const ChoicesByExpert& by_expert,
                      float* out, cudaStream_t s, const X8* hq) {
  if (T <= 0) return;
  if (experts.down_dtype != DType::kBF16) return moe_down_combine_blocks(experts, h, T, top_k, by_expert, out, s, hq);
  if (top_k > kMaxK / 2 && top_k <= kMaxK) {  // (fewer: one warp a row keeps all the choices' reads)
    launch(moe_down_kernel<2>, dim3(row_blocks(experts.hidden, kWarps / 2), unsigned(T)), kWarps * 32, 0, s, experts, h,
           top_k, by_expert, out);
  } else {
    launch(moe_down_kernel<1>, dim3(row_blocks(experts.hidden), unsigned(T)), kWarps * 32, 0, s, experts, h, top_k,
           by_expert, out);
  }
}

}  // namespace ft::engine::cuda

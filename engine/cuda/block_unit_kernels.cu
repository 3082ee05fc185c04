// Decode-sized products on the GGUF block types with lanes (block_units.h: Q4_K, Q6_K, Q4_0,
// Q8_0): the linear gemv and the two MoE expert kernels. A warp takes a row 256 values a step,
// every lane 8 of them; the lanes' sums are added in a fixed tree, so a row's result depends on
// its length alone, never on the launch or the token count.
#include "block_units.h"
#include "glu_device.h"
#include "kernels.h"
#include "launch.h"

namespace ft::engine::cuda {
namespace {

using units::kStep;
using units::Lane;
using units::Piece;
using units::piece_dot;

constexpr int kWarps = 8;
constexpr int kDownRows = 4;     // output rows of a moe_down block (its warps split the choices)
constexpr int kMoeMaxTopK = 32;  // the router's limit (kernels.h)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// acc[t] += row . x_t (x_t = x + t * ldx) over the row's `steps` steps, this lane's share.
template <DType T, int NT>
__device__ __forceinline__ void row_dot(const std::byte* row, int steps, const float* x, std::size_t ldx, int n_tokens,
                                        float (&acc)[NT]) {
  const auto* r = reinterpret_cast<const std::uint8_t*>(row);
  const int lane = int(threadIdx.x % 32);
#pragma unroll 4
  for (int s = 0; s < steps; ++s) {
    Piece p;
    Lane<T>::decode(r + std::size_t(s) * Lane<T>::kStepBytes, lane, p);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= n_tokens) break;
      acc[t] += piece_dot<T>(p, x + std::size_t(t) * ldx + std::size_t(s) * kStep);
    }
  }
}

template <DType T, int NT>
__global__ void gemv_units_kernel(const std::byte* w, std::size_t row_bytes, int rows, int cols, const float* x,
                                  int n_tokens, const float* bias, float* y) {
  pdl_enter();
  const int row = int(blockIdx.x) * kWarps + int(threadIdx.x / 32);
  if (row >= rows) return;
  float acc[NT] = {};
  row_dot<T, NT>(w + std::size_t(row) * row_bytes, cols / kStep, x, std::size_t(cols), n_tokens, acc);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= n_tokens) break;
    const float s = warp_sum(acc[t]);
    if (threadIdx.x % 32 == 0) y[std::size_t(t) * rows + row] = s + (bias ? bias[row] : 0.f);
  }
}

// h[pair, row] = glu(gate_e . x_t, up_e . x_t) for pair = t * top_k + k (e = chosen[pair]): a warp
// a row, both matrices' loads in flight together.
template <DType G>
__global__ void moe_gate_up_units_kernel(const ExpertTable e, const float* x, int top_k, const int32_t* chosen,
                                         float* h) {
  pdl_enter();
  const int pair = int(blockIdx.y), row = int(blockIdx.x) * kWarps + int(threadIdx.x / 32);
  if (row >= e.inter) return;
  const int expert = chosen[pair];
  const float* xt = x + std::size_t(pair / top_k) * e.hidden;
  const std::size_t off = std::size_t(row) * e.gate_up_row_bytes;
  const auto* g = reinterpret_cast<const std::uint8_t*>(e.gate[expert] + off);
  const auto* u = reinterpret_cast<const std::uint8_t*>(e.up[expert] + off);
  const int lane = int(threadIdx.x % 32);
  float gs = 0.f, us = 0.f;
#pragma unroll 2
  for (int s = 0; s < e.hidden / kStep; ++s) {
    Piece pg, pu;
    Lane<G>::decode(g + std::size_t(s) * Lane<G>::kStepBytes, lane, pg);
    Lane<G>::decode(u + std::size_t(s) * Lane<G>::kStepBytes, lane, pu);
    gs += piece_dot<G>(pg, xt + std::size_t(s) * kStep);
    us += piece_dot<G>(pu, xt + std::size_t(s) * kStep);
  }
  gs = warp_sum(gs);
  us = warp_sum(us);
  if (lane == 0) h[std::size_t(pair) * e.inter + row] = glu(gs, us, e.gelu);
}

// out[t, row] = sum over token t's choices, in ascending expert order, of weight * down_e . h[pair].
// A block takes kDownRows rows of one token; its warps split the choices (warp w: w, w + 8, ..),
// each weighted product lands in shared memory, and the block adds them in choice order.
template <DType D>
__global__ void moe_down_units_kernel(const ExpertTable e, const float* h, int top_k, const ChoicesByExpert by_expert,
                                      float* out) {
  pdl_enter();
  __shared__ float part[kMoeMaxTopK][kDownRows];
  const int t = int(blockIdx.y), row0 = int(blockIdx.x) * kDownRows, warp = int(threadIdx.x / 32);
  const int rows = min(kDownRows, e.hidden - row0);
  for (int i = warp; i < top_k; i += kWarps) {
    const int at = t * top_k + i;
    const std::byte* w = e.down[by_expert.expert[at]];
    const float* hr = h + std::size_t(by_expert.pair[at]) * e.inter;
    for (int r = 0; r < rows; ++r) {
      float s[1] = {};
      row_dot<D, 1>(w + std::size_t(row0 + r) * e.down_row_bytes, e.inter / kStep, hr, 0, 1, s);
      const float v = warp_sum(s[0]);
      if (threadIdx.x % 32 == 0) part[i][r] = by_expert.weight[at] * v;
    }
  }
  __syncthreads();
  if (int(threadIdx.x) < rows) {
    float acc = 0.f;
    for (int i = 0; i < top_k; ++i) acc += part[i][threadIdx.x];
    out[std::size_t(t) * e.hidden + row0 + int(threadIdx.x)] = acc;
  }
}

template <typename F>
bool with_unit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kQ4_K:
      f(std::integral_constant<DType, DType::kQ4_K>{});
      return true;
    case DType::kQ6_K:
      f(std::integral_constant<DType, DType::kQ6_K>{});
      return true;
    case DType::kQ4_0:
      f(std::integral_constant<DType, DType::kQ4_0>{});
      return true;
    case DType::kQ8_0:
      f(std::integral_constant<DType, DType::kQ8_0>{});
      return true;
    default:
      return false;
  }
}

}  // namespace

bool units_fit(DType dtype, const std::byte* w, std::size_t row_bytes, int cols) {
  if (!units::has_units(dtype) || cols % kStep != 0) return false;
  // Q4_K's lanes load 16-byte headers and aligned words: its rows must start on 16 bytes.
  if (dtype == DType::kQ4_K) return reinterpret_cast<std::uintptr_t>(w) % 16 == 0 && row_bytes % 16 == 0;
  return reinterpret_cast<std::uintptr_t>(w) % 2 == 0 && row_bytes % 2 == 0;
}

void gemv_units(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, const float* x, int T,
                const float* bias, float* y, cudaStream_t s) {
  const unsigned blocks = unsigned((rows + kWarps - 1) / kWarps);
  with_unit_dtype(dtype, [&](auto d) {
    constexpr DType D = decltype(d)::value;
    if (T == 1) {
      launch(gemv_units_kernel<D, 1>, blocks, 32 * kWarps, 0, s, w, row_bytes, rows, cols, x, T, bias, y);
    } else {
      launch(gemv_units_kernel<D, kGemvMaxRows>, blocks, 32 * kWarps, 0, s, w, row_bytes, rows, cols, x, T, bias, y);
    }
  });
}

void moe_gate_up_units(const ExpertTable& experts, const float* x, int T, int top_k, const int32_t* chosen, float* h,
                       cudaStream_t s) {
  with_unit_dtype(experts.gate_up_dtype, [&](auto d) {
    launch(moe_gate_up_units_kernel<decltype(d)::value>,
           dim3(unsigned((experts.inter + kWarps - 1) / kWarps), unsigned(T * top_k)), 32 * kWarps, 0, s, experts, x,
           top_k, chosen, h);
  });
}

void moe_down_combine_units(const ExpertTable& experts, const float* h, int T, int top_k,
                            const ChoicesByExpert& by_expert, float* out, cudaStream_t s) {
  with_unit_dtype(experts.down_dtype, [&](auto d) {
    launch(moe_down_units_kernel<decltype(d)::value>,
           dim3(unsigned((experts.hidden + kDownRows - 1) / kDownRows), unsigned(T)), 32 * kWarps, 0, s, experts, h,
           top_k, by_expert, out);
  });
}

}  // namespace ft::engine::cuda

// Decode-sized products on the block types with lanes (block_units.h: Q4_K, Q5_K, Q6_K, Q4_0, Q8_0,
// FP8, NVFP4): the linear gemv and the two MoE expert kernels. A warp takes a row a step at a time (four
// K-quant super-blocks, or eight 32-value blocks), and long rows are split over up to 8 warps so that each has only a
// few steps (their loads all in flight at once); the lanes' and the warps' sums are added in a fixed order, so a row's
// result depends on its length alone, never on the launch or the token count.
#include <cstdlib>
#include <cstring>

#include "block_dequant.h"
#include "block_units.h"
#include "glu_device.h"
#include "kernels.h"
#include "launch.h"
#include "reduce_device.h"
#include "x8_device.h"

namespace ft::engine::cuda {
namespace {

using units::kUnitValues;
using units::Lane;
using units::Piece;
using units::piece_dot;

constexpr int kWarps = 8;
// A moe_down block takes kDownBlockRows output rows of one token, kDownRows at a time (their loads
// in flight together); 2,048 rows make 256 blocks, one wave at the kernel's 96-123 registers (two
// blocks an SM).
// Fewer, longer blocks than a block per two rows (1,024 blocks, four waves each paying the choice ->
// matrix -> row chain): measured +2.7% on a 48-layer Q4_K_M decode (docs/perf-notes.md).
constexpr int kDownRows = 2;
constexpr int kDownBlockRows = 8;
// A moe_gate_up block takes kGateUpRounds groups of rows one after another (768 blocks -> 384 for
// Qwen3-30B-A3B's 768-row experts of 8 choices: under one wave at 64 registers).
constexpr int kGateUpRounds = 2;
constexpr int kMoeMaxTopK = 32;  // the router's limit (kernels.h)

// A warp-step of a row: 32 / Lane<T>::kLanes units side by side, each lane in one of them.
template <DType T>
__host__ __device__ constexpr int units_per_step() {
  return 32 / Lane<T>::kLanes;
}
template <DType T>
__host__ __device__ constexpr int steps_of(int cols) {
  return (cols / kUnitValues + units_per_step<T>() - 1) / units_per_step<T>();
}

// Token t's int8 activations from value `at` of its row (row stride ld values).
__device__ __forceinline__ units::X8Row x8_at(const X8& q, std::size_t at) {
  return {q.hi + at, q.lo + at, reinterpret_cast<const float4*>(q.meta) + at / 32};
}

// acc[t] += row . x_t (x_t = x + t * ldx, or xq's row t with Q) over steps [s0, s1) of a row of
// `units` units, this lane's share (a lane whose unit is past the row's end adds nothing).
template <DType T, int NT, bool Q>
__device__ __forceinline__ void row_dot(const std::byte* row, int units, int s0, int s1, const float* x, const X8& xq,
                                        std::size_t ldx, int n_tokens, float (&acc)[NT]) {
  const auto* r = reinterpret_cast<const std::uint8_t*>(row);
  const int lane = int(threadIdx.x % 32), j = lane % Lane<T>::kLanes;
#pragma unroll 2
  for (int s = s0; s < s1; ++s) {
    const int u = s * units_per_step<T>() + lane / Lane<T>::kLanes;
    if (u >= units) break;
    const std::uint8_t* unit = r + std::size_t(u) * Lane<T>::kUnitBytes;
    if constexpr (Q) {
      units::CodePiece<Lane<T>::kGroup> p;
      Lane<T>::codes(unit, j, p);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= n_tokens) break;
        acc[t] += units::codes_dot<T>(p, x8_at(xq, std::size_t(t) * ldx + std::size_t(u) * kUnitValues));
      }
    } else {
      Piece<Lane<T>::kGroup> p;
      Lane<T>::decode(unit, j, p);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= n_tokens) break;
        acc[t] += piece_dot<T>(p, x + std::size_t(t) * ldx + std::size_t(u) * kUnitValues);
      }
    }
  }
}

// The lines of this lane's units over steps [s0, s1) of a row, asked for ahead (row_dot's loads).
template <DType T>
__device__ __forceinline__ void prefetch_steps(const std::byte* row, int units, int s0, int s1) {
  const int lane = int(threadIdx.x % 32), j = lane % Lane<T>::kLanes;
  for (int s = s0; s < s1; ++s) {
    const int u = s * units_per_step<T>() + lane / Lane<T>::kLanes;
    if (u >= units) break;
    constexpr std::size_t kLaneBytes = Lane<T>::kUnitBytes / Lane<T>::kLanes;
    prefetch_l2(row + std::size_t(u) * Lane<T>::kUnitBytes + std::size_t(j) * kLaneBytes);
  }
}

// How a block's warps share rows: `split` warps a row (each a contiguous quarter, say, of its
// steps), 8 / split rows a block. A warp's steps are few enough that their loads are in flight
// together; the split's partial sums are added in warp order, so a row's result depends on its
// length alone.
struct Split {
  int split, row, part, s0, s1;
};
__device__ __forceinline__ Split split_of(int split, int steps, int block = int(blockIdx.x)) {
  const int warp = int(threadIdx.x / 32);
  const int part = warp % split, per = (steps + split - 1) / split;
  return {split, block * (kWarps / split) + warp / split, part, min(steps, part * per), min(steps, (part + 1) * per)};
}

// Warps per row: about two steps each.
int split_for(int steps) { return steps >= 16 ? 8 : steps >= 8 ? 4 : steps >= 4 ? 2 : 1; }

// The products of one launch (same dtype and columns, one x); block b works on product `o` where
// first_block[o] <= b.
struct UnitsBatch {
  GemvOut outs[kGemvMaxOuts];
  unsigned first_block[kGemvMaxOuts + 1];
  int n_outs;
};

template <DType T, int NT, bool Q>
__global__ void gemv_units_kernel(const UnitsBatch batch, int cols, int split, const float* x, const X8 xq,
                                  int n_tokens) {
  int o = 0;
  while (o + 1 < batch.n_outs && blockIdx.x >= batch.first_block[o + 1]) ++o;
  const GemvOut& out = batch.outs[o];
  const int block = int(blockIdx.x - batch.first_block[o]), rows = out.rows;
  __shared__ float part[kWarps][NT];
  const Split sp = split_of(split, steps_of<T>(cols), block);
  const int row = min(sp.row, rows - 1);  // a row past the end computes the last one and writes nothing
  const std::byte* w = out.w + std::size_t(row) * out.row_bytes;
  prefetch_steps<T>(w, cols / kUnitValues, sp.s0, sp.s1);
  pdl_enter();  // x is the previous kernel's
  float acc[NT] = {};
  row_dot<T, NT, Q>(w, cols / kUnitValues, sp.s0, sp.s1, x, xq, std::size_t(cols), n_tokens, acc);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= n_tokens) break;
    const float v = warp_sum(acc[t]);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32][t] = v;
  }
  __syncthreads();
  // Thread i < rows of the block x tokens adds row i's parts in order.
  const int rows_here = kWarps / split, i = int(threadIdx.x);
  if (i < rows_here * n_tokens) {
    const int r = i % rows_here, t = i / rows_here, out_row = block * rows_here + r;
    if (out_row < rows) {
      float v = 0.f;
      for (int k = 0; k < split; ++k) v += part[r * split + k][t];
      out.y[std::size_t(t) * rows + out_row] = v + (out.bias ? out.bias[out_row] : 0.f);
    }
  }
}

// h[pair, row] = glu(gate_e . x_t, up_e . x_t) for pair = t * top_k + k (e = chosen[pair]): both
// matrices' loads in flight together, a row's steps split over warps as in the gemv. A block takes
// kGateUpRounds groups of 8 / split rows one after another (fewer blocks than rows: the launch fits the
// GPU in about one wave). With `settled` the choices were written two or more launches back, so they
// are read and every row of the block asked of L2 before the wait.
template <DType G, bool Q>
__global__ void moe_gate_up_units_kernel(const ExpertTable e, const float* x, const X8 xq, int top_k,
                                         const int32_t* chosen, int split, bool settled, float* h) {
  constexpr int rounds = kGateUpRounds;
  __shared__ float part[kWarps][2];
  const int pair = int(blockIdx.y), steps = steps_of<G>(e.hidden);
  const int lane = int(threadIdx.x % 32), j = lane % Lane<G>::kLanes, units = e.hidden / kUnitValues;
  const auto row_of = [&](const Split& sp) { return min(sp.row, e.inter - 1); };
  if (settled) {
    const int expert = chosen[pair];
    for (int round = 0; round < rounds; ++round) {
      const Split sp = split_of(split, steps, int(blockIdx.x) * rounds + round);
      const std::size_t off = std::size_t(row_of(sp)) * e.gate_up_row_bytes;
      prefetch_steps<G>(e.gate[expert] + off, units, sp.s0, sp.s1);
      prefetch_steps<G>(e.up[expert] + off, units, sp.s0, sp.s1);
    }
  }
  pdl_enter();
  const int expert = chosen[pair];
  const std::size_t xt = std::size_t(pair / top_k) * std::size_t(e.hidden);  // the token's row
  for (int round = 0; round < rounds; ++round) {
    const int vblock = int(blockIdx.x) * rounds + round;
    const Split sp = split_of(split, steps, vblock);
    const std::size_t off = std::size_t(row_of(sp)) * e.gate_up_row_bytes;
    const auto* g = reinterpret_cast<const std::uint8_t*>(e.gate[expert] + off);
    const auto* u = reinterpret_cast<const std::uint8_t*>(e.up[expert] + off);
    float gs = 0.f, us = 0.f;
    for (int s = sp.s0; s < sp.s1; ++s) {
      const int k = s * units_per_step<G>() + lane / Lane<G>::kLanes;
      if (k >= units) break;
      const std::size_t at = xt + std::size_t(k) * kUnitValues;
      if constexpr (Q) {
        units::CodePiece<Lane<G>::kGroup> pg, pu;
        Lane<G>::codes(g + std::size_t(k) * Lane<G>::kUnitBytes, j, pg);
        Lane<G>::codes(u + std::size_t(k) * Lane<G>::kUnitBytes, j, pu);
        const auto xp = units::x_piece<G>(pg.at, x8_at(xq, at));  // gate's and up's alike
        gs += units::codes_dot<G>(pg, xp);
        us += units::codes_dot<G>(pu, xp);
      } else {
        Piece<Lane<G>::kGroup> pg, pu;
        Lane<G>::decode(g + std::size_t(k) * Lane<G>::kUnitBytes, j, pg);
        Lane<G>::decode(u + std::size_t(k) * Lane<G>::kUnitBytes, j, pu);
        gs += piece_dot<G>(pg, x + at);
        us += piece_dot<G>(pu, x + at);
      }
    }
    gs = warp_sum(gs);
    us = warp_sum(us);
    if (round > 0) __syncthreads();  // the previous round's parts are read
    if (lane == 0) {
      part[threadIdx.x / 32][0] = gs;
      part[threadIdx.x / 32][1] = us;
    }
    __syncthreads();
    const int rows_here = kWarps / split, r = int(threadIdx.x);
    if (r < rows_here) {
      const int out_row = vblock * rows_here + r;
      if (out_row < e.inter) {
        float gv = 0.f, uv = 0.f;
        for (int k = 0; k < split; ++k) {
          gv += part[r * split + k][0];
          uv += part[r * split + k][1];
        }
        h[std::size_t(pair) * e.inter + out_row] = expert_h(e.act, e.gate[expert], expert, e.inter, out_row, gv, uv);
      }
    }
  }
}

// out[t, row] = sum over token t's choices, in ascending expert order, of weight * down_e . h[pair].
// A block takes kDownBlockRows rows of one token, kDownRows at a time; its warps split the choices
// (warp w: w, w + 8, ..), each weighted product lands in shared memory, and the block adds them in
// choice order. The choices are the router's, two or more launches back (gate/up runs between), so
// they are read and the block's rows asked of L2 before the wait.
template <DType D, bool Q>
__global__ void moe_down_units_kernel(const ExpertTable e, const float* h, const X8 hq, int top_k,
                                      const ChoicesByExpert by_expert, float* out) {
  __shared__ float part[kMoeMaxTopK][kDownBlockRows];
  const int t = int(blockIdx.y), first = int(blockIdx.x) * kDownBlockRows, warp = int(threadIdx.x / 32);
  const int all_rows = min(kDownBlockRows, e.hidden - first);
  const int units = e.inter / kUnitValues, lane = int(threadIdx.x % 32), j = lane % Lane<D>::kLanes;
  const int steps = steps_of<D>(e.inter);
  for (int i = warp; i < top_k; i += kWarps) {
    const std::byte* w = e.down[by_expert.expert[t * top_k + i]];
    for (int r = 0; r < all_rows; ++r)
      prefetch_steps<D>(w + std::size_t(first + r) * e.down_row_bytes, units, 0, steps);
  }
  pdl_enter();
  static_assert(kDownBlockRows == 8 && kDownBlockRows % kDownRows == 0, "warp_sum8 adds a block's 8 rows");
  for (int i = warp; i < top_k; i += kWarps) {
    const int at = t * top_k + i, expert = by_expert.expert[at];
    const auto* w = reinterpret_cast<const std::uint8_t*>(e.down[expert]);
    const std::size_t hr = std::size_t(by_expert.pair[at]) * std::size_t(e.inter);  // the pair's row of h
    // The block's rows kDownRows at a time (their loads in flight together), each row's lane sums
    // kept until all are done, then added over the warp at once.
    float s[kDownBlockRows] = {};
#pragma unroll
    for (int r0 = 0; r0 < kDownBlockRows; r0 += kDownRows) {
      if (r0 >= all_rows) break;
      for (int st = 0; st < steps; ++st) {
        const int k = st * units_per_step<D>() + lane / Lane<D>::kLanes;
        if (k >= units) break;
        [[maybe_unused]] units::XPiece<Lane<D>::kGroup> xp;  // the rows' h alike: loaded with the first row's
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) {
          const int row = first + min(r0 + r, all_rows - 1);
          const std::uint8_t* unit = w + std::size_t(row) * e.down_row_bytes + std::size_t(k) * Lane<D>::kUnitBytes;
          if constexpr (Q) {
            units::CodePiece<Lane<D>::kGroup> p;
            Lane<D>::codes(unit, j, p);
            if (r == 0) xp = units::x_piece<D>(p.at, x8_at(hq, hr + std::size_t(k) * kUnitValues));
            s[r0 + r] += units::codes_dot<D>(p, xp);
          } else {
            Piece<Lane<D>::kGroup> p;
            Lane<D>::decode(unit, j, p);
            s[r0 + r] += piece_dot<D>(p, h + hr + std::size_t(k) * kUnitValues);
          }
        }
      }
    }
    const float v = warp_sum8(s);
    const int r = lane / 4;  // the row this lane's sum is
    if (lane % 4 == 0 && r < all_rows)
      part[i][r] = by_expert.weight[at] * (v + expert_down_bias(e.act, e.down[expert], expert, e.hidden, first + r));
  }
  __syncthreads();
  if (int(threadIdx.x) < all_rows) {
    float acc = 0.f;
    for (int i = 0; i < top_k; ++i) acc += part[i][threadIdx.x];
    out[std::size_t(t) * e.hidden + first + int(threadIdx.x)] = acc;
  }
}

// Calls f(std::integral_constant<DType, T>{}) for a type with lanes; false for any other.
template <typename F>
bool with_unit_dtype(DType t, F&& f) {
  bool done = false;
  with_block_dtype(t, [&](auto d) {
    if constexpr (units::has_units(decltype(d)::value)) {
      f(d);
      done = true;
    }
  });
  return done;
}

}  // namespace

bool units_fit(DType dtype, const std::byte* w, std::size_t row_bytes, int cols) {
  if (!units::has_units(dtype) || cols % kUnitValues != 0) return false;
  // Q4_K's and Q5_K's lanes load 16-byte headers and aligned words: their rows must start on 16 bytes.
  if (dtype == DType::kQ4_K || dtype == DType::kQ5_K)
    return reinterpret_cast<std::uintptr_t>(w) % 16 == 0 && row_bytes % 16 == 0;
  // FP8's and NVFP4's lanes load their fp32 scales and code words aligned.
  if (dtype == DType::kF8E4M3B128 || dtype == DType::kNVFP4)
    return reinterpret_cast<std::uintptr_t>(w) % 4 == 0 && row_bytes % 4 == 0;
  return reinterpret_cast<std::uintptr_t>(w) % 2 == 0 && row_bytes % 2 == 0;
}

void gemv_units(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, const float* x, int T,
                const float* bias, float* y, cudaStream_t s) {
  const GemvOut one{w, row_bytes, rows, bias, y};
  gemv_units_batch(&one, 1, dtype, cols, x, T, s);
}

void gemv_units_batch(const GemvOut* outs, int n_outs, DType dtype, int cols, const float* x, int T, cudaStream_t s,
                      const X8* xq) {
  if (T <= 0 || n_outs <= 0) return;
  if (n_outs > kGemvMaxOuts) {
    gemv_units_batch(outs, kGemvMaxOuts, dtype, cols, x, T, s, xq);
    return gemv_units_batch(outs + kGemvMaxOuts, n_outs - kGemvMaxOuts, dtype, cols, x, T, s, xq);
  }
  with_unit_dtype(dtype, [&](auto d) {
    constexpr DType D = decltype(d)::value;
    const int split = split_for(steps_of<D>(cols)), per_block = kWarps / split;
    UnitsBatch batch{};
    batch.n_outs = n_outs;
    for (int o = 0; o < n_outs; ++o) {
      batch.outs[o] = outs[o];
      batch.first_block[o + 1] = batch.first_block[o] + unsigned((outs[o].rows + per_block - 1) / per_block);
    }
    const unsigned blocks = batch.first_block[n_outs];
    const X8 q = xq ? *xq : X8{};
    if constexpr (units::has_codes(D)) {
      if (xq) {
        if (T == 1)
          return launch(gemv_units_kernel<D, 1, true>, blocks, 32 * kWarps, 0, s, batch, cols, split, x, q, T);
        return launch(gemv_units_kernel<D, kGemvMaxRows, true>, blocks, 32 * kWarps, 0, s, batch, cols, split, x, q, T);
      }
    }
    if (T == 1) return launch(gemv_units_kernel<D, 1, false>, blocks, 32 * kWarps, 0, s, batch, cols, split, x, q, T);
    launch(gemv_units_kernel<D, kGemvMaxRows, false>, blocks, 32 * kWarps, 0, s, batch, cols, split, x, q, T);
  });
}

void moe_gate_up_units(const ExpertTable& experts, const float* x, int T, int top_k, const int32_t* chosen, float* h,
                       cudaStream_t s, const X8* xq) {
  with_unit_dtype(experts.gate_up_dtype, [&](auto d) {
    constexpr DType D = decltype(d)::value;
    const int split = split_for(steps_of<D>(experts.hidden));
    const int per_block = kWarps / split * kGateUpRounds;
    const dim3 grid(unsigned((experts.inter + per_block - 1) / per_block), unsigned(T * top_k));
    const X8 q = xq ? *xq : X8{};
    // With int8 activations their quantisation runs between the router and this kernel.
    const bool settled = xq != nullptr;
    if constexpr (units::has_codes(D)) {
      if (xq)
        return launch(moe_gate_up_units_kernel<D, true>, grid, 32 * kWarps, 0, s, experts, x, q, top_k, chosen, split,
                      settled, h);
    }
    launch(moe_gate_up_units_kernel<D, false>, grid, 32 * kWarps, 0, s, experts, x, q, top_k, chosen, split, settled,
           h);
  });
}

void moe_down_combine_units(const ExpertTable& experts, const float* h, int T, int top_k,
                            const ChoicesByExpert& by_expert, float* out, cudaStream_t s, const X8* hq) {
  with_unit_dtype(experts.down_dtype, [&](auto d) {
    constexpr DType D = decltype(d)::value;
    const dim3 grid(unsigned((experts.hidden + kDownBlockRows - 1) / kDownBlockRows), unsigned(T));
    const X8 q = hq ? *hq : X8{};
    if constexpr (units::has_codes(D)) {
      if (hq)
        return launch(moe_down_units_kernel<D, true>, grid, 32 * kWarps, 0, s, experts, h, q, top_k, by_expert, out);
    }
    launch(moe_down_units_kernel<D, false>, grid, 32 * kWarps, 0, s, experts, h, q, top_k, by_expert, out);
  });
}

// ---- int8 activations ----------------------------------------------------------------------------

namespace {

// One warp per 32-value block (x8_device.h).
__global__ void quantize_x8_kernel(const float* x, int n_blocks, std::int8_t* hi, std::int8_t* lo, float4* meta) {
  pdl_enter();
  const int b = int(blockIdx.x) * kWarps + int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  if (b >= n_blocks) return;
  const std::size_t at = std::size_t(b) * 32;
  quantize_block_x8(x[at + std::size_t(lane)], lane, at, std::size_t(b), hi, lo, meta);
}

std::size_t align16(std::size_t n) { return (n + 15) & ~std::size_t(15); }

}  // namespace

std::size_t x8_bytes(int T, int cols) {
  const std::size_t n = std::size_t(T) * std::size_t(cols);
  return 2 * align16(n) + align16(n / 32 * sizeof(float4));
}

X8Out x8_planes(std::byte* buf, int T, int cols) {
  const std::size_t n = std::size_t(T) * std::size_t(cols);
  return {reinterpret_cast<std::int8_t*>(buf), reinterpret_cast<std::int8_t*>(buf + align16(n)),
          reinterpret_cast<float4*>(buf + 2 * align16(n))};
}

X8 x8_rows(const X8Out& p, int row0, int cols) {
  const std::size_t at = std::size_t(row0) * std::size_t(cols);
  return {p.hi + at, p.lo + at, reinterpret_cast<const float*>(p.meta + at / 32)};
}

void quantize_x8_into(const float* x, int T, int cols, const X8Out& out, cudaStream_t s) {
  const int n_blocks = int(std::size_t(T) * std::size_t(cols) / 32);
  if (n_blocks > 0)
    launch(quantize_x8_kernel, unsigned((n_blocks + kWarps - 1) / kWarps), 32 * kWarps, 0, s, x, n_blocks, out.hi,
           out.lo, out.meta);
}

X8 quantize_x8(const float* x, int T, int cols, std::byte* buf, cudaStream_t s) {
  const X8Out planes = x8_planes(buf, T, cols);
  quantize_x8_into(x, T, cols, planes, s);
  return x8_rows(planes, 0, cols);
}

bool int8_products(DType dtype) {
  static const bool on = [] {
    const char* env = std::getenv("FT_CUDA_INT8");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  bool codes = false;
  with_block_dtype(dtype, [&](auto d) { codes = units::has_codes(decltype(d)::value); });
  return on && codes;
}

}  // namespace ft::engine::cuda

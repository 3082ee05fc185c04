// Prefill-sized products on GGUF blocks with integer codes (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0) on the
// int8 tensor cores, reading the blocks as stored. The other way (block_kernels.cu) decodes every
// weight into two bf16 planes in memory (4 bytes a weight written and read back) and runs three
// bf16 GEMMs on them; here a block of the kernel decodes a tile of rows into shared memory as int8
// codes with one scale and one offset per 16 or 32 values (block_units.h's lanes, ggml's exact
// numbers), x comes as the int8 planes of the decode products (x ~= d1 hi + d2 lo per 32 values,
// kernels.h's X8), and each group of 32 values (16 for Q6_K, whose scales change every 16) is two
// mma.sync products, codes times hi and times lo, exact in int32, then scaled in fp32:
//   y += a (d1 sum(q hi) + d2 sum(q lo)) + b sum(x),
// where a value of the weight is a q + b. The arithmetic is the decode products' (codes_dot), so a
// product here and the same row at decode agree to fp32 rounding.
#include <cstdlib>
#include <cstring>

#include "block_dequant.h"
#include "block_units.h"
#include "glu_device.h"
#include "kernels.h"
#include "launch.h"
#include "slot_layout.h"
#include "x8_device.h"

namespace ft::engine::cuda {
namespace {

using units::CodePiece;
using units::Lane;

constexpr int kTileRows = 64;       // weight rows a block takes
constexpr int kTileTokens = 64;     // rows of x a block takes: one slot of the MoE's layout
constexpr int kStep = 128;          // values of a row a block step decodes: half a 256-value unit
constexpr int kPitch = kStep + 16;  // bytes a tile row takes in shared memory (rows 4 banks apart)
constexpr int kThreads = 256;       // 8 warps: 2 (32 rows each) x 4 (16 tokens each)
constexpr int kGroupsPerStep = kStep / 16;

// FT_CUDA_MMA: 1 turns the MMA path on (two blocks an SM), 3 on with three blocks an SM, 0 (the
// default until it outruns the bf16 planes, docs/perf-notes.md) off. Read at every call, so that a
// test can switch it.
int mma_mode() {
  const char* env = std::getenv("FT_CUDA_MMA");
  return env && *env ? std::atoi(env) : 0;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// d += a b on one m16n8k32 tile of int8 (fragments: g = lane / 4, t = lane % 4; a[0] = A[g][4t..+3],
// a[1] = A[g+8][4t..], a[2] = A[g][16+4t..], a[3] = A[g+8][16+4t..]; b0 = B[4t..+3][g], b1 =
// B[16+4t..][g]; d[0], d[1] = D[g][2t, 2t+1], d[2], d[3] = D[g+8][2t, 2t+1]).
__device__ __forceinline__ void mma_k32(int (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The same on m16n8k16 (a[0] = A[g][4t..+3], a[1] = A[g+8][4t..]; b0 = B[4t..+3][g]).
__device__ __forceinline__ void mma_k16(int (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}
#endif

__device__ __forceinline__ std::uint32_t word_at(const std::uint8_t* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

// The block's tiles in shared memory for one step: the weight rows' codes, a scale and an offset a
// value per 16 values, and x's two planes with their blocks' {d1, d2, half sums}.
struct Tiles {
  std::uint8_t w[kTileRows][kPitch];
  std::uint8_t hi[kTileTokens][kPitch];
  std::uint8_t lo[kTileTokens][kPitch];
  float4 meta[kTileTokens][kStep / 32];
  float a[kTileRows][kGroupsPerStep];
  float b[kTileRows][kGroupsPerStep];
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// 16 bytes global -> shared without a register, in flight until cp_async_wait.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned to = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
#endif

// Block (blockIdx.x, blockIdx.y): weight rows [64 blockIdx.x, +64) of slot blockIdx.y's matrix ws[slot]
// times x's rows [64 slot, +64); y[slot * slot_stride + token * rows + row] for tokens 64 slot +
// token < valid. kGroup: the values one scale covers, 32 or 16 (Q6_K). Two sets of tiles in dynamic
// shared memory: while the warps multiply one step's, x's next step flies in by cp.async and, after
// the products, each thread decodes its part of the next step's weights into the other.
template <DType D, int kGroup, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    block_mma_kernel(const std::byte* const* ws, std::size_t row_bytes, int rows, int cols, X8 x, int valid, float* y,
                     std::size_t slot_stride) {
  pdl_enter();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using L = Lane<D>;
  constexpr int G = L::kGroup, kHalfLanes = L::kLanes / 2;
  extern __shared__ __align__(16) std::uint8_t smem[];
  Tiles* tiles = reinterpret_cast<Tiles*>(smem);
  const int slot = int(blockIdx.y), row0 = int(blockIdx.x) * kTileRows, tid = int(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wr = (warp % 2) * 32, wt = (warp / 2) * 16;  // the warp's rows and tokens in the tile
  const auto* w = reinterpret_cast<const std::uint8_t*>(ws[slot]) + std::size_t(row0) * row_bytes;
  const std::size_t x_row0 = std::size_t(slot) * kTileTokens, blocks_a_row = std::size_t(cols) / 32;
  const int steps = cols / kStep;

  // x: 64 rows x 128 bytes of each plane and their blocks' meta, 16 bytes a copy.
  const auto load_x = [&](int step, Tiles& tile) {
    for (int i = tid; i < 2 * kTileTokens * (kStep / 16); i += kThreads) {
      const int plane = i / (kTileTokens * (kStep / 16)), r = (i / (kStep / 16)) % kTileTokens, c = i % (kStep / 16);
      const std::int8_t* src = (plane ? x.lo : x.hi) + (x_row0 + std::size_t(r)) * std::size_t(cols) +
                               std::size_t(step) * kStep + 16 * std::size_t(c);
      cp_async16((plane ? tile.lo[r] : tile.hi[r]) + 16 * c, src);
    }
    const int r = tid / (kStep / 32), q = tid % (kStep / 32);  // 256 threads: 64 rows x 4 blocks
    cp_async16(&tile.meta[r][q], reinterpret_cast<const float4*>(x.meta) + (x_row0 + std::size_t(r)) * blocks_a_row +
                                     std::size_t(step) * (kStep / 32) + std::size_t(q));
    cp_async_commit();
  };
  // The weights: each (row, lane of this half of the unit) decodes its lane's two groups.
  const auto decode_w = [&](int step, Tiles& tile) {
    const int unit = step / 2, half = step % 2;
    for (int i = tid; i < kTileRows * kHalfLanes; i += kThreads) {
      const int r = i / kHalfLanes, j = half * kHalfLanes + i % kHalfLanes;
      CodePiece<G> c;
      L::codes(w + std::size_t(r) * row_bytes + std::size_t(unit) * L::kUnitBytes, j, c);
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int at = c.at[p] - half * kStep;
        if constexpr (G == 16) {
          *reinterpret_cast<uint4*>(tile.w[r] + at) = make_uint4(c.w[p][0], c.w[p][1], c.w[p][2], c.w[p][3]);
        } else {
          *reinterpret_cast<std::uint32_t*>(tile.w[r] + at) = c.w[p][0];
        }
        // Lanes that share a group write the same scale.
        tile.a[r][at / 16] = c.a[p];
        tile.b[r][at / 16] = c.b[p];
      }
    }
  };

  float acc[2][2][4] = {};
  load_x(0, tiles[0]);
  decode_w(0, tiles[0]);
  cp_async_wait();
  __syncthreads();
  for (int step = 0; step < steps; ++step) {
    const Tiles& tile = tiles[step % 2];
    Tiles& next = tiles[(step + 1) % 2];  // last read in step - 1, which every warp has finished
    if (step + 1 < steps) load_x(step + 1, next);
#pragma unroll
    for (int q = 0; q < kStep / kGroup; ++q) {
      const int k0 = q * kGroup;
      int hi_acc[2][2][4] = {}, lo_acc[2][2][4] = {};
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = wr + 16 * i + g;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int n = wt + 8 * j + g;
          if constexpr (kGroup == 32) {
            const std::uint32_t a[4] = {word_at(tile.w[r] + k0 + 4 * t), word_at(tile.w[r + 8] + k0 + 4 * t),
                                        word_at(tile.w[r] + k0 + 16 + 4 * t), word_at(tile.w[r + 8] + k0 + 16 + 4 * t)};
            mma_k32(hi_acc[i][j], a, word_at(tile.hi[n] + k0 + 4 * t), word_at(tile.hi[n] + k0 + 16 + 4 * t));
            mma_k32(lo_acc[i][j], a, word_at(tile.lo[n] + k0 + 4 * t), word_at(tile.lo[n] + k0 + 16 + 4 * t));
          } else {
            const std::uint32_t a0 = word_at(tile.w[r] + k0 + 4 * t), a1 = word_at(tile.w[r + 8] + k0 + 4 * t);
            mma_k16(hi_acc[i][j], a0, a1, word_at(tile.hi[n] + k0 + 4 * t));
            mma_k16(lo_acc[i][j], a0, a1, word_at(tile.lo[n] + k0 + 4 * t));
          }
        }
      }
      // The group's scales: a and b of the thread's four rows, x's of its four tokens.
      const int grp = k0 / 16;
      float ra[2][2], rb[2][2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = wr + 16 * i + g + 8 * h;
          ra[i][h] = tile.a[r][grp];
          rb[i][h] = tile.b[r][grp];
        }
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float4 m = tile.meta[wt + 8 * j + 2 * t + e][k0 / 32];
          const float sum = kGroup == 32 ? m.z + m.w : ((k0 & 16) ? m.w : m.z);
#pragma unroll
          for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int c = 2 * h + e;
              const float dot = fmaf(m.x, units::small_int_to_float(hi_acc[i][j][c]),
                                     m.y * units::small_int_to_float(lo_acc[i][j][c]));
              acc[i][j][c] = fmaf(rb[i][h], sum, fmaf(ra[i][h], dot, acc[i][j][c]));
            }
        }
    }
    if (step + 1 < steps) decode_w(step + 1, next);
    cp_async_wait();
    __syncthreads();
  }
  float* out = y + std::size_t(slot) * slot_stride;
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = wt + 8 * j + 2 * t + e;
      if (int(x_row0) + n >= valid) continue;
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          out[std::size_t(n) * std::size_t(rows) + std::size_t(row0 + wr + 16 * i + g + 8 * h)] = acc[i][j][2 * h + e];
    }
#endif
}

// One warp per 32-value block of the gathered rows: row r is src[rows[r]] (zeros where rows[r] < 0).
__global__ void quantize_x8_gather_kernel(const float* src, const int64_t* rows, int cols, int n_blocks,
                                          std::int8_t* hi, std::int8_t* lo, float4* meta) {
  pdl_enter();
  const int b = int(blockIdx.x) * (kThreads / 32) + int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  if (b >= n_blocks) return;
  const int per_row = cols / 32, r = b / per_row, c = (b % per_row) * 32 + lane;
  const int64_t from = rows[r];
  const float v = from < 0 ? 0.f : src[std::size_t(from) * std::size_t(cols) + std::size_t(c)];
  quantize_block_x8(v, lane, std::size_t(b) * 32, std::size_t(b), hi, lo, meta);
}

// One warp per 32-value block of the experts' GLU (glu_split's values, quantised instead of split).
__global__ void glu_x8_kernel(const float* gate, const float* up, int width, const ExpertEpilogue act,
                              const int32_t* experts, int slot_rows, int parts, int n_blocks, std::int8_t* hi,
                              std::int8_t* lo, float4* meta) {
  pdl_enter();
  const int b = int(blockIdx.x) * (kThreads / 32) + int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  if (b >= n_blocks) return;
  const int per_row = width / 32;
  const int64_t r = b / per_row;
  const int c = (b % per_row) * 32 + lane;
  const SplitPlace at = split_place(r, width, slot_rows);
  float gv, uv;
  if (parts == 2) {
    gv = gate[at.hi + c] + gate[at.hi + at.lo_step + c];
    uv = up[at.hi + c] + up[at.hi + at.lo_step + c];
  } else {
    const std::size_t row = std::size_t(r) * std::size_t(width) + std::size_t(c);
    gv = gate[row];
    uv = up[row];
  }
  if (act.gate_bias || act.up_bias) {
    const std::size_t e = std::size_t(experts[at.slot]) * std::size_t(width) + std::size_t(c);
    if (act.gate_bias) gv += act.gate_bias[e];
    if (act.up_bias) uv += act.up_bias[e];
  }
  quantize_block_x8(expert_glu(act, gv, uv), lane, std::size_t(b) * 32, std::size_t(b), hi, lo, meta);
}

// A launch of a block_mma_kernel with its two sets of tiles: more shared memory than a block gets
// unasked, so each kernel asks for it once (sm_86 / sm_89 / sm_120 give up to 99 KB, sm_90 227).
template <auto Kernel, typename... Args>
void launch_tiles(dim3 grid, cudaStream_t s, Args... args) {
  constexpr std::size_t kSmem = 2 * sizeof(Tiles);
  static const cudaError_t sized =
      cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem));
  (void)sized;  // a refusal shows as the launch's own error
  launch(Kernel, grid, kThreads, kSmem, s, args...);
}

}  // namespace

bool block_mma_fits(DType dtype, int rows, int cols) {
  return mma_mode() != 0 && units::has_codes(dtype) && rows > 0 && rows % kTileRows == 0 && cols > 0 &&
         cols % units::kUnitValues == 0;
}

void block_mma_products(const std::byte* const* ws, int slots, DType dtype, std::size_t row_bytes, int rows, int cols,
                        const X8& x, int valid, float* y, std::size_t slot_stride, cudaStream_t s) {
  if (slots <= 0) return;
  const dim3 grid(unsigned(rows / kTileRows), unsigned(slots));
  with_block_dtype(dtype, [&](auto d) {
    constexpr DType D = decltype(d)::value;
    if constexpr (units::has_codes(D)) {
      constexpr int kGroup = D == DType::kQ6_K ? 16 : 32;
      if (mma_mode() == 3) {
        launch_tiles<block_mma_kernel<D, kGroup, 3>>(grid, s, ws, row_bytes, rows, cols, x, valid, y, slot_stride);
      } else {
        launch_tiles<block_mma_kernel<D, kGroup, 2>>(grid, s, ws, row_bytes, rows, cols, x, valid, y, slot_stride);
      }
    }
  });
}

void quantize_x8_gather(const float* src, const int64_t* rows, int R, int cols, const X8Out& out, cudaStream_t s) {
  const int n_blocks = R * (cols / 32);
  if (n_blocks > 0)
    launch(quantize_x8_gather_kernel, unsigned((n_blocks + kThreads / 32 - 1) / (kThreads / 32)), kThreads, 0, s, src,
           rows, cols, n_blocks, out.hi, out.lo, out.meta);
}

void glu_x8(const float* gate, const float* up, int R, int width, const ExpertEpilogue& act, const int32_t* experts,
            int slot_rows, int parts, const X8Out& out, cudaStream_t s) {
  const int n_blocks = R * (width / 32);
  if (n_blocks > 0)
    launch(glu_x8_kernel, unsigned((n_blocks + kThreads / 32 - 1) / (kThreads / 32)), kThreads, 0, s, gate, up, width,
           act, experts, slot_rows, parts, n_blocks, out.hi, out.lo, out.meta);
}

}  // namespace ft::engine::cuda

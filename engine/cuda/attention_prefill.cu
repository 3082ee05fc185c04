// Prefill attention: a tiled flash attention on the tensor cores for calls of many rows (kernels.h
// paged_attention dispatches here first; attention_kernels.cu holds the per-row kernel).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "attention_common.h"
#include "attention_plan.h"
#include "launch.h"
#include "mma_bf16.h"

namespace ft::engine::cuda {
namespace {

// ---- Prefill: tiled flash attention on the tensor cores -------------------------------------------
//
// A block owns a tile of consecutive query rows of one sequence and one kv head. Its 16 * warps
// query vectors are (row, head) pairs, row-major over the tile's rows and the heads of the GQA group
// (or of a slice of it), 16 to a warp: one mma row each. The sequence's keys stream through shared
// memory once per block, kKeyTile at a time (two buffers, cp.async), and every warp takes q.k and p.v of
// each key tile on the tensor cores: mma m16n8k16, bf16 operands, fp32 accumulation, fragments
// loaded by ldmatrix. K and V are bf16 already, so exact operands; q and p are fp32, so each enters
// as two bf16 halves x = hi + lo whose two products are added: ~16 significant bits instead of 8,
// which keeps the per-row kernel's fp32-grade precision. The page layout is what the B operands
// want: a K block is [token][dim] (q.k's B, k = dim contiguous per key) and a V block [dim][token]
// (p.v's B, k = key contiguous per dim), so both load as ldmatrix's plain (untransposed) 8x8 tiles.
// The softmax runs in base 2 (the scale folded with log2 e: one ex2 an element), only the key
// tiles that cross a warp's causal or window edge pay for the mask, and o is rescaled only when a
// row's max moved. The head dim is a template argument: with it known, every shared address is a
// base plus constants (profiled with it a runtime value, integer work kept the ALU pipe the
// busiest and the tensor cores waiting).

constexpr int kTiledMaxWarps = 8;
// Keys a shared-memory tile. 64 was measured slower (fewer blocks fit an SM: 2.0 against 1.6 ms
// a 4,096-token layer).
constexpr int kKeyTile = 32;
// Shared rows are padded by 16 bytes: the eight 16-byte rows an ldmatrix phase reads then hit
// eight different bank groups for any row length that is a multiple of 32 bf16.
constexpr int kPad = 8;
constexpr float kLog2e = 1.4426950408889634f;

struct TiledParams {
  const float* q;  // [T, heads, head_dim]
  float* out;      // [T, heads, head_dim]
  const int32_t* row_seq;
  const AttnSeqDev* seqs;
  std::byte* const* pages;
  PageOffsets off;
  int rows;  // T
  int heads;
  int kv_heads;
  int group;  // query heads per kv head
  int head_dim;
  int page_tokens;
  int slices;     // blocks per (row tile, kv head): the group's heads in slices of per_slice
  int per_slice;
  int tile_rows;  // query rows per block: 16 * warps / per_slice
  int tiles;      // row tiles: ceil(rows / tile_rows)
  float scale;
  int window;          // > 0: sliding window (AttentionOptions)
  int chunk;           // > 0: chunked attention (AttentionOptions)
  const float* sinks;  // [heads] or null
};

// q hi and lo [16 * warps][head_dim + kPad], then two buffers each of K [kKeyTile][head_dim + kPad]
// and V [head_dim][kKeyTile + kPad], all bf16.
std::size_t tiled_smem_bytes(int warps, int head_dim) {
  const std::size_t m = 16 * std::size_t(warps), ld = std::size_t(head_dim + kPad), kt = std::size_t(kKeyTile);
  return sizeof(std::uint16_t) * (2 * m * ld + 2 * kt * ld + 2 * std::size_t(head_dim) * (kt + kPad));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// Four 8x8 bf16 tiles of shared memory, one a register: lanes 8i .. 8i + 7 give the addresses of
// tile i's rows (16 bytes each, 16-byte aligned), and lane l receives row l / 4, elements 2 (l % 4)
// and 2 (l % 4) + 1 of each tile (the lower in the low half): an mma fragment's layout. Volatile:
// it reads what other threads wrote before a barrier.
__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const std::uint16_t* p) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// d0 += a b0 and d1 += a b1 for a = hi + lo (an A fragment's two halves), b0 / b1 the two n-tiles of
// one ldmatrix.x4 of B (b[0], b[1] and b[2], b[3]): four products, the high halves' first.
__device__ __forceinline__ void mma_hilo_x2(float (&d0)[4], float (&d1)[4], const std::uint32_t (&hi)[4],
                                            const std::uint32_t (&lo)[4], const std::uint32_t (&b)[4]) {
  mma_bf16(d0, hi, b[0], b[1]);
  mma_bf16(d1, hi, b[2], b[3]);
  mma_bf16(d0, lo, b[0], b[1]);
  mma_bf16(d1, lo, b[2], b[3]);
}

// 16 bytes global -> shared without a register round trip; bytes past src_bytes are zero-filled
// (and not read).
__device__ __forceinline__ void cp_async16(std::uint16_t* dst, const std::byte* src, int src_bytes) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits for all of this thread's copy groups but the newest one.
__device__ __forceinline__ void cp_async_wait_all_but_newest() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

// Keys j0 .. j0 + kKeyTile - 1 of one kv head into a buffer pair: K as rows [key][dim] (stride
// D + kPad), V as rows [dim][key] (stride kKeyTile + kPad), in 16-byte copies. In the page, key j
// sits in page j / P at slot j % P: its K at element slot * D + d of the K block, its V at d * P +
// slot of the V block. When P is a multiple of kKeyTile (the default pages) the tile lies in one
// page, looked up once. Keys from nkeys on become zeros, and their pages are not touched (past the
// context they need not exist); zeroed V keeps stale page bytes out of p.v (0 * NaN).
template <int D>
__device__ __forceinline__ void load_key_tile(std::uint16_t* ks, std::uint16_t* vs, std::byte* const* table,
                                              std::size_t k_head, std::size_t v_head, int P, int j0, int nkeys) {
  const bool one_page = P % kKeyTile == 0;
  const std::byte* page = one_page ? table[j0 / P] : nullptr;
  const int slot0 = one_page ? j0 % P : 0;
  constexpr int per_key = D / 8;  // 16-byte pieces of a key's K row
  for (int u = int(threadIdx.x); u < kKeyTile * per_key; u += int(blockDim.x)) {
    const int key = u / per_key, c = u % per_key, j = j0 + key;
    std::uint16_t* dst = ks + key * (D + kPad) + 8 * c;
    if (j < nkeys) {
      const std::byte* pg = one_page ? page : table[j / P];
      const int slot = one_page ? slot0 + key : j % P;
      cp_async16(dst, pg + k_head + (std::size_t(slot) * D + std::size_t(8 * c)) * 2, 16);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  constexpr int per_dim = kKeyTile / 8;  // 16-byte pieces (8 keys) of a dim's V row
  for (int u = int(threadIdx.x); u < D * per_dim; u += int(blockDim.x)) {
    const int d = u / per_dim, c = u % per_dim, j = j0 + 8 * c;
    std::uint16_t* dst = vs + d * (kKeyTile + kPad) + 8 * c;
    // The 8 keys j .. j + 7 share a page (j and P are multiples of 8).
    const int valid = min(nkeys - j, 8);
    if (valid > 0) {
      const std::byte* pg = one_page ? page : table[j / P];
      const int slot = one_page ? slot0 + 8 * c : j % P;
      cp_async16(dst, pg + v_head + (std::size_t(d) * std::size_t(P) + std::size_t(slot)) * 2, 2 * valid);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// One warp, one key tile (keys j0 ..): scores of its 16 vectors against the tile's keys, the online
// softmax step, and o += p . V. Lane state: its vectors are fragment rows g (index 0) and g + 8
// (index 1); lim[i] is the last key position vector i sees (-1: an unused vector); o[n] holds dims
// 8n + 2t, 8n + 2t + 1 of both vectors (elements 0, 1 and 2, 3); m is the running max (base 2,
// scaled), l the lane's share of the running sum (its keys only, summed over the quad at the
// end). qa / ka / va: this lane's ldmatrix row addresses in the q halves, K and V for k = 0, n = 0.
template <int D>
__device__ __forceinline__ void attend_key_tile(float (&o)[D / 8][4], float (&m)[2], float (&l)[2],
                                                const std::uint16_t* qa_hi, const std::uint16_t* qa_lo,
                                                const std::uint16_t* ka, const std::uint16_t* va, int j0, bool mask,
                                                const int (&lim)[2], const int (&lo)[2], float scale2, int t) {
  constexpr int ld = D + kPad, ldv = kKeyTile + kPad, kNT = kKeyTile / 8;

  // s[n][e]: vector e / 2 against key j0 + 8n + 2t + e % 2. B = K^T: B[k = dim][n = key] is K row
  // key at dim; one ldmatrix.x4 gives b0, b1 of key n-tiles 2np and 2np + 1.
  float s[kNT][4] = {};
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    std::uint32_t ah[4], al[4];
    ldsm_x4(ah, qa_hi + 16 * kc);
    ldsm_x4(al, qa_lo + 16 * kc);
#pragma unroll
    for (int np = 0; np < kNT / 2; ++np) {
      std::uint32_t b[4];
      ldsm_x4(b, ka + 16 * np * ld + 16 * kc);
      mma_hilo_x2(s[2 * np], s[2 * np + 1], ah, al, b);
    }
  }

  // Scale (base 2), then the causal (and window) mask where the tile crosses an edge, and the
  // online softmax. A row's max and sum span the quad (t = 0..3) holding its keys.
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kNT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] *= scale2;
      if (mask) {
        const int j = j0 + 8 * n + 2 * t + (e & 1);
        if (j > lim[e >> 1] || j < lo[e >> 1]) s[n][e] = -INFINITY;
      }
      mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
    }
  float ref[2], alpha[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    const float m_new = fmaxf(m[i], mx[i]);
    // A vector that has seen no key yet (all masked so far) keeps its zeros: 2^(-inf - 0) = 0.
    ref[i] = m_new == -INFINITY ? 0.f : m_new;
    alpha[i] = exp2f(m[i] - ref[i]);
    m[i] = m_new;
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int n = 0; n < kNT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(s[n][e] - ref[e >> 1]);
      sum[e >> 1] += s[n][e];
    }
#pragma unroll
  for (int i = 0; i < 2; ++i) l[i] = l[i] * alpha[i] + sum[i];
  // Deep in the keys a row's max rarely moves: then alpha is exactly 1 and o stays as it is.
  if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
  }

  // o += p V, 16 keys a step. A = p: its fragment is the score fragments of key n-tiles 2kc and
  // 2kc + 1 as they are. B = V: B[k = key][n = dim] is V row dim at key; one ldmatrix.x4 gives
  // b0, b1 of dim n-tiles 2np and 2np + 1.
#pragma unroll
  for (int kc = 0; kc < kKeyTile / 16; ++kc) {
    std::uint32_t ph[4], pl[4];
    split_bf16x2(s[2 * kc][0], s[2 * kc][1], ph[0], pl[0]);
    split_bf16x2(s[2 * kc][2], s[2 * kc][3], ph[1], pl[1]);
    split_bf16x2(s[2 * kc + 1][0], s[2 * kc + 1][1], ph[2], pl[2]);
    split_bf16x2(s[2 * kc + 1][2], s[2 * kc + 1][3], ph[3], pl[3]);
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      std::uint32_t b[4];
      ldsm_x4(b, va + 16 * np * ldv + 16 * kc);
      mma_hilo_x2(o[2 * np], o[2 * np + 1], ph, pl, b);
    }
  }
}

#endif  // __CUDA_ARCH__ >= 800

// Grid: one block per (row tile, kv head, slice), the last row tiles (the most keys) first.
// Block: warps of 32, 16 query vectors each. D: the head dim, a multiple of 32 up to 256 (from 160
// on, the shared memory of eight warps fits one block an SM: then all the registers are its).
template <int D>
__global__ void __launch_bounds__(kTiledMaxWarps * 32, D >= 160 ? 1 : 2) tiled_attention_kernel(const TiledParams p) {
  pdl_enter();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ uint4 tiled_smem[];
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  const int head_slices = p.kv_heads * p.slices;
  const int tile = p.tiles - 1 - int(blockIdx.x) / head_slices, hs = int(blockIdx.x) % head_slices;
  // A tile spanning sequences is the per-row kernel's.
  if (!tile_in_one_sequence(tile, p.tile_rows, p.rows, p.row_seq)) return;
  const int kvh = hs / p.slices, slice = hs % p.slices;
  const int h0 = kvh * p.group + slice * p.per_slice;
  const int count = min(p.per_slice, p.group - slice * p.per_slice);
  if (count <= 0) return;

  // Row r0 + i of the tile sits at position pos0 + i and sees keys 0 .. pos0 + i (pos0 + i - window
  // + 1 .. with a sliding window); the block reads keys key0 .. nkeys - 1, from its first row's
  // first to its last row's last, in key tiles from the one holding key0.
  const int r0 = tile * p.tile_rows, nrows = min(p.tile_rows, p.rows - r0);
  const AttnSeqDev seq = p.seqs[p.row_seq[r0]];
  const int pos0 = seq.pos0 + (r0 - seq.row0);
  const int nkeys = pos0 + nrows;
  const int key0 = attn_first_key(pos0, p.window, p.chunk), kt0 = key0 / kKeyTile;
  std::byte* const* table = p.pages + seq.page0;
  const std::size_t k_head = p.off.k_base + std::size_t(kvh) * p.off.block_bytes;
  const std::size_t v_head = p.off.v_base + std::size_t(kvh) * p.off.block_bytes;

  constexpr int ld = D + kPad;
  const int P = p.page_tokens, m = 16 * int(blockDim.x / 32);
  auto* qhi = reinterpret_cast<std::uint16_t*>(tiled_smem);
  std::uint16_t* qlo = qhi + m * ld;
  std::uint16_t* kbuf = qlo + m * ld;              // [2][kKeyTile][ld]
  std::uint16_t* vbuf = kbuf + 2 * kKeyTile * ld;  // [2][D][kKeyTile + kPad]
  constexpr int kbuf_elems = kKeyTile * ld, vbuf_elems = D * (kKeyTile + kPad);

  // The first key tile is on its way while the queries are read and split.
  const int ntiles = (nkeys + kKeyTile - 1) / kKeyTile;
  load_key_tile<D>(kbuf + (kt0 & 1) * kbuf_elems, vbuf + (kt0 & 1) * vbuf_elems, table, k_head, v_head, P,
                   kt0 * kKeyTile, nkeys);
  cp_async_commit();

  // Vector v: row v / per_slice of the tile, head h0 + v % per_slice. Unused vectors are zeros.
  for (int i = int(threadIdx.x); i < m * (D / 2); i += int(blockDim.x)) {
    const int v = i / (D / 2), d = 2 * (i % (D / 2));
    const int ri = v / p.per_slice, hi = v % p.per_slice;
    float a = 0.f, b = 0.f;
    if (ri < nrows && hi < count) {
      const float* src =
          p.q + (std::size_t(r0 + ri) * std::size_t(p.heads) + std::size_t(h0 + hi)) * std::size_t(D) + std::size_t(d);
      a = src[0];
      b = src[1];
    }
    std::uint32_t wh, wl;
    split_bf16x2(a, b, wh, wl);
    *reinterpret_cast<std::uint32_t*>(qhi + v * ld + d) = wh;
    *reinterpret_cast<std::uint32_t*>(qlo + v * ld + d) = wl;
  }

  int lim[2], lo[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int v = 16 * warp + g + 8 * i, ri = v / p.per_slice, hi = v % p.per_slice;
    lim[i] = ri < nrows && hi < count ? pos0 + ri : -1;
    lo[i] = attn_first_key(lim[i], p.window, p.chunk);
  }
  // Key tiles past the warp's last row are skipped; tiles between the warp's latest first key and
  // its earliest last key need no mask (warp-uniform; unused vectors do not count).
  const int warp_lim = __reduce_max_sync(0xffffffffu, max(lim[0], lim[1]));
  const int warp_min_lim =
      __reduce_min_sync(0xffffffffu, min(lim[0] < 0 ? INT_MAX : lim[0], lim[1] < 0 ? INT_MAX : lim[1]));
  const int warp_max_lo = __reduce_max_sync(0xffffffffu, max(lo[0], lo[1]));

  // This lane's ldmatrix rows: tile i = lane / 8 of an x4 load, row lane % 8 of it. For A (q) the
  // tiles are rows 0-7 / 8-15 by k 0-7 / 8-15 (i % 2 picks the rows); for B (K, V) n 0-7 / 8-15
  // (i / 2) by k 0-7 / 8-15 (i % 2).
  const int lr = lane % 8, li = lane / 8;
  const int qoff = (16 * warp + lr + 8 * (li & 1)) * ld + 8 * (li >> 1);
  const int koff = (lr + 8 * (li >> 1)) * ld + 8 * (li & 1);
  const int voff = (lr + 8 * (li >> 1)) * (kKeyTile + kPad) + 8 * (li & 1);
  const float scale2 = p.scale * kLog2e;

  float o[D / 8][4] = {};
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  for (int kt = kt0; kt < ntiles; ++kt) {
    // Tile kt + 1 goes to the buffer that tile kt - 1 used: everyone left it at the last barrier.
    const int nb = (kt + 1) & 1;
    if (kt + 1 < ntiles)
      load_key_tile<D>(kbuf + nb * kbuf_elems, vbuf + nb * vbuf_elems, table, k_head, v_head, P, (kt + 1) * kKeyTile,
                       nkeys);
    cp_async_commit();  // possibly empty: the wait below then still means "tile kt has landed"
    cp_async_wait_all_but_newest();
    __syncthreads();  // every thread's copies (and zero stores, and the queries) are visible
    const int j0 = kt * kKeyTile, cb = kt & 1;
    if (j0 <= warp_lim) {
      const bool mask = j0 + kKeyTile - 1 > warp_min_lim || j0 < warp_max_lo;
      attend_key_tile<D>(o, mrow, lrow, qhi + qoff, qlo + qoff, kbuf + cb * kbuf_elems + koff,
                         vbuf + cb * vbuf_elems + voff, j0, mask, lim, lo, scale2, t);
    }
    __syncthreads();  // buffer cb is free for tile kt + 2
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    lrow[i] += __shfl_xor_sync(0xffffffffu, lrow[i], 1);
    lrow[i] += __shfl_xor_sync(0xffffffffu, lrow[i], 2);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (lim[i] < 0) continue;  // every used vector sees its own key at least, so lrow >= 1
    const int v = 16 * warp + g + 8 * i, ri = v / p.per_slice, hi = v % p.per_slice;
    float* dst = p.out + (std::size_t(r0 + ri) * std::size_t(p.heads) + std::size_t(h0 + hi)) * std::size_t(D);
    // A sink takes its share of the softmax: e^(sink - m) in the sum (o and l are relative to m,
    // which is base 2 and scaled).
    const float l = lrow[i] + (p.sinks ? exp2f(p.sinks[h0 + hi] * kLog2e - mrow[i]) : 0.f);
    const float inv = 1.f / l;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<float2*>(dst + 8 * n + 2 * t) = make_float2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
  }
#else
  (void)p;  // never launched below sm_80 (mma.sync bf16, cp.async, ldmatrix)
#endif
}

// The tiled launch shape for `warps` warps a block.
struct TiledShape {
  int warps = 0;
  int slices = 0;
  int per_slice = 0;
  int tile_rows = 0;
  int tiles = 0;
  long blocks = 0;
  std::size_t smem = 0;
};

TiledShape tiled_shape(int warps, int T, int group, int kv_heads, int head_dim) {
  TiledShape sh;
  const int m = 16 * warps;
  sh.warps = warps;
  sh.slices = (group + m - 1) / m;
  sh.per_slice = (group + sh.slices - 1) / sh.slices;
  sh.tile_rows = m / sh.per_slice;
  sh.tiles = (T + sh.tile_rows - 1) / sh.tile_rows;
  sh.blocks = long(sh.tiles) * kv_heads * sh.slices;
  sh.smem = tiled_smem_bytes(warps, head_dim);
  return sh;
}

// The tiled shape for a call; warps == 0 where the tiled kernel does not apply. The most warps a
// block (each K/V tile read serves more query vectors) whose grid still has a block for every SM,
// within the device's shared memory; else the fewest warps that fit.
TiledShape pick_tiled_shape(int T, int group, int kv_heads, int head_dim, int page_tokens, int dev, int sms) {
  int major = 0, optin = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  TiledShape pick;
  if (major < 8 || head_dim % 32 != 0 || head_dim > 256 || page_tokens % 8 != 0) return pick;
  for (const int warps : {kTiledMaxWarps, 4, 2}) {
    const TiledShape sh = tiled_shape(warps, T, group, kv_heads, head_dim);
    if (sh.smem > std::size_t(optin)) continue;
    pick = sh;
    if (sh.blocks >= sms) break;
  }
  return pick;
}

template <int D>
void launch_tiled(const TiledParams& p, const TiledShape& sh, cudaStream_t s) {
  const auto kernel = tiled_attention_kernel<D>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sh.smem));
  launch(kernel, unsigned(sh.blocks), unsigned(sh.warps * 32), sh.smem, s, p);
}

}  // namespace

int tiled_prefill_attention(const PagedAttentionCall& a, int dev, int sms, cudaStream_t s) {
  if (a.T < kAttnTiledMinRows) return 0;
  const TiledShape sh = pick_tiled_shape(a.T, a.group, a.kv_heads, a.head_dim, a.page_tokens, dev, sms);
  if (sh.warps == 0) return 0;
  const TiledParams tp{.q = a.q,
                       .out = a.out,
                       .row_seq = a.row_seq,
                       .seqs = a.seqs,
                       .pages = a.pages,
                       .off = a.off,
                       .rows = a.T,
                       .heads = a.heads,
                       .kv_heads = a.kv_heads,
                       .group = a.group,
                       .head_dim = a.head_dim,
                       .page_tokens = a.page_tokens,
                       .slices = sh.slices,
                       .per_slice = sh.per_slice,
                       .tile_rows = sh.tile_rows,
                       .tiles = sh.tiles,
                       .scale = a.scale,
                       .window = a.window,
                       .chunk = a.chunk,
                       .sinks = a.sinks};
  // pick_tiled_shape took multiples of 32 up to 256.
  using Launch = void (*)(const TiledParams&, const TiledShape&, cudaStream_t);
  static constexpr Launch kByHeadDim[] = {launch_tiled<32>,  launch_tiled<64>,  launch_tiled<96>,  launch_tiled<128>,
                                          launch_tiled<160>, launch_tiled<192>, launch_tiled<224>, launch_tiled<256>};
  kByHeadDim[a.head_dim / 32 - 1](tp, sh, s);
  return sh.tile_rows;
}

}  // namespace ft::engine::cuda

// Attention kernels: RoPE, the gated-query split, the KV page write and causal GQA attention over
// the bf16 KV pages of kv_pool.h. Each is the device twin of its CPU reference in ops_attention.h.
//
// paged_attention is one pass over the keys with no workspace. A block owns one query row and up to
// eight query heads of one GQA group, so each K/V element it reads serves all of those heads. Its
// warps split the row's keys in tiles of 32: q.k with a key per lane, p.v with output dims per
// lane, K and V read straight from the pages through L1 (staging the tiles in shared memory with
// cp.async measured slower). Each warp keeps its own online softmax state and the warps merge in a
// fixed order, so results do not depend on scheduling. A grid too small for the GPU (decode of a
// few sequences) spreads each row over more blocks (attention_plan.h chooses): over long contexts
// its keys go to splits that write their partial states to a workspace, merged in split order by
// the split that finishes last; otherwise a GQA group goes to more blocks, then, where the device
// has thread block clusters, a row's keys to a cluster that merges through distributed shared
// memory. Decode rows of small groups take the tensor-core kernel of attention_decode.cu instead.
//
// Prefill-sized calls (64 rows or more) first go through the tiled flash attention of
// attention_prefill.cu; the per-row kernel then takes only the rows of tiles that span sequences.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "attention_common.h"
#include "attention_plan.h"
#include "attention_splits.h"
#include "kernels.h"
#include "launch.h"
#include "reduce_device.h"

// Thread block clusters (sm_90 and later): the merge across the blocks of a cluster.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FT_ATTN_CLUSTERS 1
#else
#define FT_ATTN_CLUSTERS 0
#endif

namespace ft::engine::cuda {
namespace {

constexpr int kThreads = 256;                    // elementwise kernels
constexpr std::size_t kMaxGridBlocks = 1u << 20;  // grid-stride loops cover the rest

unsigned grid_for(std::size_t n) {
  return unsigned(std::clamp<std::size_t>((n + kThreads - 1) / kThreads, 1, kMaxGridBlocks));
}

// ---- bf16 -----------------------------------------------------------------------------------------

// ---- RoPE -----------------------------------------------------------------------------------------

// One block per row: the row's cos/sin once in shared memory, then every head of the row.
// The reference takes cos/sin of the fp32 angle with glibc's fp32 cosf/sinf, which are within
// 0.56 ulp but not always correctly rounded. Here they are the double functions rounded to float:
// correctly rounded, so equal to the reference's but for about 1% of angles where they are one ulp
// apart (CUDA's fp32 functions may be off by two). The rotation is done without FMA contraction,
// as the reference (built for plain x86-64) computes it.
__global__ void rope_kernel(float* __restrict__ x, int heads, int head_dim, int half, bool neox,
                            const float* __restrict__ inv_freq, float attention_factor,
                            const int64_t* __restrict__ positions) {
  pdl_enter();
  extern __shared__ float trig[];  // cos [half], then sin [half]
  const std::size_t row = blockIdx.x;
  const float pos = float(positions[row]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double sn, cs;
    sincos(double(__fmul_rn(inv_freq[i], pos)), &sn, &cs);
    trig[i] = __fmul_rn(float(cs), attention_factor);  // HF: cos() * attention_scaling, in fp32
    trig[half + i] = __fmul_rn(float(sn), attention_factor);
  }
  __syncthreads();
  float* xr = x + row * std::size_t(heads) * std::size_t(head_dim);
#pragma unroll 4
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    float* v = xr + std::size_t(h) * std::size_t(head_dim);
    const int ia = neox ? i : 2 * i;
    const int ib = neox ? i + half : 2 * i + 1;
    const float a = v[ia], b = v[ib], c = trig[i], s = trig[half + i];
    v[ia] = __fadd_rn(__fmul_rn(a, c), -__fmul_rn(b, s));
    v[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

// ---- Gated query split ----------------------------------------------------------------------------

__global__ void split_gated_query_kernel(const float* __restrict__ qg, std::size_t n, int head_dim,
                                         float* __restrict__ q, float* __restrict__ gate) {
  pdl_enter();
  const std::size_t D = std::size_t(head_dim);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t th = i / D, d = i % D;
    q[i] = qg[th * 2 * D + d];
    gate[i] = qg[th * 2 * D + D + d];
  }
}

// ---- KV write -------------------------------------------------------------------------------------

// One thread per element of k/v [T, kv_heads, head_dim]. The K stores are coalesced; the V stores
// stride by page_tokens (V blocks are dimension-major), which this small write can afford.
__global__ void kv_write_kernel(const float* __restrict__ k, const float* __restrict__ v, std::size_t n,
                                int kv_heads, int head_dim, int page_tokens, PageOffsets off,
                                const int32_t* __restrict__ row_seq, const AttnSeqDev* __restrict__ seqs,
                                std::byte* const* __restrict__ pages) {
  pdl_enter();
  const std::size_t D = std::size_t(head_dim), P = std::size_t(page_tokens);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t d = i % D, th = i / D;
    const std::size_t h = th % std::size_t(kv_heads);
    const int r = int(th / std::size_t(kv_heads));
    const RowPlace at = row_place(r, row_seq, seqs, pages);
    std::byte* page = at.table[at.pos / page_tokens];
    const std::size_t slot = std::size_t(at.pos % page_tokens);
    auto* kb = reinterpret_cast<std::uint16_t*>(page + off.k_base + h * off.block_bytes);
    auto* vb = reinterpret_cast<std::uint16_t*>(page + off.v_base + h * off.block_bytes);
    kb[slot * D + d] = f32_to_bf16(k[i]);
    vb[d * P + slot] = f32_to_bf16(v[i]);
  }
}

// ---- Paged attention ------------------------------------------------------------------------------

constexpr int kTile = kAttnTile;  // keys per warp step: one key per lane for q.k
constexpr int kMaxWarps = kAttnMaxWarps;
constexpr int kMaxQueries = kAttnMaxQueries;

// The call (PagedAttentionCall: q, out, pages, shape, options) and how its plan spreads it.
struct AttnParams : PagedAttentionCall {
  int slices;  // blocks per (row, kv head): the group's heads in slices of per_slice
  int per_slice;
  int cluster;  // blocks per (row, kv head, slice) splitting its keys, merged in shared memory
  int splits;   // blocks per (row, kv head, slice) splitting its keys, merged by the last to finish
  float* part;  // splits > 1: [T * heads * splits] split states (AttentionPlan::workspace_floats)
  unsigned* split_done;  // splits > 1: a counter per (row, blockIdx.y), zero between launches
  int tile_rows;         // > 0: the rows of one-sequence tiles of this many rows are the tiled kernel's
};

// Shared memory of a block, in floats: the queries, each warp's probabilities of its current tile,
// and the merged state (what other cluster ranks read).
struct AttnSmem {
  float* q;    // [MQ][head_dim]
  float* p;    // [warps][MQ][kTile]
  float* acc;  // [MQ][head_dim]: unnormalised output
  float* m;    // [MQ]: running max
  float* l;    // [MQ]: running sum of exp(score - m)

  __device__ AttnSmem(float* base, int mq, int warps, int head_dim)
      : q(base), p(q + mq * head_dim), acc(p + warps * mq * kTile), m(acc + mq * head_dim), l(m + mq) {}
};

std::size_t attn_smem_bytes(int mq, int warps, int head_dim) {
  return sizeof(float) * std::size_t(2 * mq * head_dim + warps * mq * kTile + 2 * mq);
}

// One warp's online softmax state for its MQ queries. Lane owns output dims lane + 32 c; l holds
// the lane's share of the sum (its own keys), reduced once at the end.
template <int NC, int MQ>
struct WarpState {
  float m[MQ];
  float l[MQ];
  float acc[MQ][NC];

  __device__ void init() {
#pragma unroll
    for (int qi = 0; qi < MQ; ++qi) {
      m[qi] = -INFINITY;
      l[qi] = 0.f;
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[qi][c] = 0.f;
    }
  }
};

// ---- Tile compute

// q.k of this lane's key (key row: head_dim bf16 in its page) with each query, 16 dims (one
// 32-byte sector) a step. The key rows of a tile are 32 different rows; the row's other sectors
// hit L1 on the next steps.
// All of the row's loads are issued before the first product (head_dim <= 32 NC): one round trip
// per key instead of one per 16 dims.
template <int NC, int MQ>
__device__ __forceinline__ void score_key(const std::uint16_t* __restrict__ krow, const float* __restrict__ qs,
                                          int head_dim, float (&s)[MQ]) {
#pragma unroll
  for (int qi = 0; qi < MQ; ++qi) s[qi] = 0.f;
  const uint4* k4 = reinterpret_cast<const uint4*>(krow);
  // 16-byte loads in flight at once: 128 dims while the warp state is small, else fewer (spills).
  constexpr int kBatch = NC * MQ <= 16 ? 16 : 2;
  constexpr int kLoads = 4 * NC < kBatch ? 4 * NC : kBatch;
  uint4 raw[kLoads];
#pragma unroll
  for (int d0 = 0; d0 < 32 * NC; d0 += 16) {
    if (d0 >= head_dim) break;
    if ((d0 / 8) % kLoads == 0) {
#pragma unroll
      for (int i = 0; i < kLoads; ++i)
        if (d0 + i * 8 < head_dim) raw[i] = __ldg(k4 + d0 / 8 + i);
    }
    float k[2][8];
    unpack_bf16x8(raw[(d0 / 8) % kLoads], k[0]);
    unpack_bf16x8(raw[(d0 / 8) % kLoads + 1], k[1]);
#pragma unroll
    for (int qi = 0; qi < MQ; ++qi) {
      const float4* q4 = reinterpret_cast<const float4*>(qs + qi * head_dim + d0);
      float acc = s[qi];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 qv = q4[j];
        const float* kj = &k[j / 2][4 * (j % 2)];
        acc = fmaf(qv.x, kj[0], acc);
        acc = fmaf(qv.y, kj[1], acc);
        acc = fmaf(qv.z, kj[2], acc);
        acc = fmaf(qv.w, kj[3], acc);
      }
      s[qi] = acc;
    }
  }
}

// The online softmax step of a tile: lane's key score s (valid: the key is the row's), the
// rescale of the running state, and the tile's probabilities to p_tile [MQ][kTile].
template <int NC, int MQ>
__device__ __forceinline__ void softmax_update(WarpState<NC, MQ>& st, const float (&s)[MQ], bool valid, float scale,
                                               float* __restrict__ p_tile, int lane) {
#pragma unroll
  for (int qi = 0; qi < MQ; ++qi) {
    const float sv = valid ? s[qi] * scale : -INFINITY;
    // Every tile holds at least one key of the row, so m_new is finite and alpha is 0 on the first.
    const float m_new = fmaxf(st.m[qi], warp_max(sv));
    const float alpha = expf(st.m[qi] - m_new);
    const float pj = expf(sv - m_new);
    st.m[qi] = m_new;
    st.l[qi] = st.l[qi] * alpha + pj;
#pragma unroll
    for (int c = 0; c < NC; ++c) st.acc[qi][c] *= alpha;
    p_tile[qi * kTile + lane] = pj;
  }
}

// Where a block reads: the row's page table and key count, the kv head's blocks in a page.
struct KeySource {
  std::byte* const* table;
  int key0;   // the row's first key (0, or where its sliding window begins)
  int nkeys;  // one past its last
  std::size_t k_head;
  std::size_t v_head;
  int head_dim;
  int page_tokens;
};

// This lane's V of a tile (output dims lane + 32 c of keys j0 .. j0 + nk - 1, eight keys = 16 bytes
// of a V row, all in one page, per load), loaded before the tile's scores are known so that the
// loads overlap q.k and the softmax step.
// Preloaded while it and the warp state are small (attention_preloads_values, which the split
// decode plan follows); otherwise loaded as it goes, as a preloaded tile would spill.
template <int NC, int MQ>
struct ValueTile {
  static constexpr bool kPreload = attention_preloads_values(NC, MQ);
  uint4 raw[kTile / 8][kPreload ? NC : 1];

  __device__ __forceinline__ void load(const KeySource& src, int j0, int nk, int lane) {
    if constexpr (kPreload) fetch(src, j0, nk, lane);
  }
  __device__ __forceinline__ void fetch(const KeySource& src, int j0, int nk, int lane) {
    const int nc = src.head_dim / 32, P = src.page_tokens;
#pragma unroll
    for (int g = 0; g < kTile / 8; ++g) {
      const int j = j0 + 8 * g;
      if (8 * g < nk) {
        const auto* vrow0 = reinterpret_cast<const std::uint16_t*>(src.table[j / P] + src.v_head) + j % P;
#pragma unroll
        for (int c = 0; c < NC; ++c)
          if (c < nc)
            raw[g][c] = __ldg(reinterpret_cast<const uint4*>(vrow0 + std::size_t(lane + 32 * c) * std::size_t(P)));
      }
    }
  }
  // Group g's 16 bytes for output dims lane + 32 c.
  __device__ __forceinline__ uint4 at(const KeySource& src, int j0, int g, int c, int lane) const {
    if constexpr (kPreload) {
      return raw[g][c];
    } else {
      const int j = j0 + 8 * g, P = src.page_tokens;
      const auto* vrow0 = reinterpret_cast<const std::uint16_t*>(src.table[j / P] + src.v_head) + j % P;
      return __ldg(reinterpret_cast<const uint4*>(vrow0 + std::size_t(lane + 32 * c) * std::size_t(P)));
    }
  }
};

// acc += p . V over the tile's keys. Slots past the row's last key are zeroed so that stale page
// contents cannot reach the sum (0 * NaN).
template <int NC, int MQ>
__device__ __forceinline__ void accumulate_values(WarpState<NC, MQ>& st, const float* __restrict__ p_tile,
                                                  const ValueTile<NC, MQ>& vt, const KeySource& src, int j0, int nk,
                                                  int lane) {
  const int nc = src.head_dim / 32;
#pragma unroll
  for (int g = 0; g < kTile / 8; ++g) {
    const int k0 = 8 * g;
    if (k0 >= nk) break;
    float v[NC][8];
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < nc) unpack_bf16x8(vt.at(src, j0, g, c, lane), v[c]);
    if (nk - k0 < 8) {
#pragma unroll
      for (int c = 0; c < NC; ++c)
#pragma unroll
        for (int i = 0; i < 8; ++i)
          if (i >= nk - k0) v[c][i] = 0.f;
    }
#pragma unroll
    for (int qi = 0; qi < MQ; ++qi) {
      const float4 pa = *reinterpret_cast<const float4*>(p_tile + qi * kTile + k0);
      const float4 pb = *reinterpret_cast<const float4*>(p_tile + qi * kTile + k0 + 4);
      const float pr[8] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        if (c < nc) {
          float a = st.acc[qi][c];
#pragma unroll
          for (int i = 0; i < 8; ++i) a = fmaf(pr[i], v[c][i], a);
          st.acc[qi][c] = a;
        }
      }
    }
  }
}

// The warp's tiles first, first + stride, ... of the row: per tile the scores (lane = key), the
// online softmax step, then the values (lane = output dims).
template <int NC, int MQ>
__device__ void attend_tiles(WarpState<NC, MQ>& st, const AttnSmem& sm, float scale, const KeySource& src,
                             int first, int stride, int warp, int lane) {
  const int D = src.head_dim, P = src.page_tokens;
  const int ntiles = (src.nkeys + kTile - 1) / kTile;
  float* p_tile = sm.p + warp * MQ * kTile;
  for (int t = src.key0 / kTile + first; t < ntiles; t += stride) {
    const int j0 = t * kTile, nk = min(kTile, src.nkeys - j0), j = j0 + lane;
    ValueTile<NC, MQ> vt;
    vt.load(src, j0, nk, lane);
    float s[MQ] = {};
    if (lane < nk) {
      const auto* krow = reinterpret_cast<const std::uint16_t*>(src.table[j / P] + src.k_head) +
                         std::size_t(j % P) * std::size_t(D);
      score_key<NC, MQ>(krow, sm.q, D, s);
    }
    softmax_update<NC, MQ>(st, s, lane < nk && j >= src.key0, scale, p_tile, lane);
    __syncwarp();
    accumulate_values<NC, MQ>(st, p_tile, vt, src, j0, nk, lane);
    __syncwarp();  // p_tile is rewritten by the next tile
  }
}

// Folds the warps' states into the block's (sm.m, sm.l, sm.acc) one warp after another, warp 0
// first: a fixed order, so the result does not depend on which warp finished first.
template <int NC, int MQ>
__device__ void merge_warps(const WarpState<NC, MQ>& st, const AttnSmem& sm, int head_dim, int active, int warp,
                            int lane) {
  const int nc = head_dim / 32;
  for (int w = 0; w < max(active, 1); ++w) {
    if (warp == w) {
      float a[MQ], b[MQ];
#pragma unroll
      for (int qi = 0; qi < MQ; ++qi) {
        if (w == 0) {
          a[qi] = 0.f;
          b[qi] = 1.f;
        } else {
          const float m_new = fmaxf(sm.m[qi], st.m[qi]);
          a[qi] = expf(sm.m[qi] - m_new);
          b[qi] = expf(st.m[qi] - m_new);
        }
      }
      __syncwarp();  // every lane has read sm.m before lane 0 rewrites it
#pragma unroll
      for (int qi = 0; qi < MQ; ++qi) {
        if (lane == 0) {
          sm.m[qi] = w == 0 ? st.m[qi] : fmaxf(sm.m[qi], st.m[qi]);
          sm.l[qi] = w == 0 ? st.l[qi] : sm.l[qi] * a[qi] + st.l[qi] * b[qi];
        }
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          if (c < nc) {
            float& o = sm.acc[qi * head_dim + lane + 32 * c];
            o = w == 0 ? st.acc[qi][c] : o * a[qi] + st.acc[qi][c] * b[qi];
          }
        }
      }
    }
    __syncthreads();
  }
}

// out = acc / l of the states of `ranks` blocks (this block's alone without clusters), rank 0 first.
template <typename RankSmem>
__device__ void write_output(const AttnParams& p, int ranks, RankSmem rank_smem, int row, int h0, int count) {
  const int D = p.head_dim;
  for (int i = threadIdx.x; i < count * D; i += blockDim.x) {
    const int qi = i / D, d = i % D;
    const float sink = p.sinks ? p.sinks[h0 + qi] : -INFINITY;  // joins the softmax, adds no value
    float m = sink;
    for (int r = 0; r < ranks; ++r) m = fmaxf(m, rank_smem(r).m[qi]);
    float l = p.sinks ? expf(sink - m) : 0.f, acc = 0.f;
    for (int r = 0; r < ranks; ++r) {
      const AttnSmem other = rank_smem(r);
      const float e = expf(other.m[qi] - m);  // 0 for a rank that had no keys (m = -inf)
      l += other.l[qi] * e;
      acc += other.acc[qi * D + d] * e;
    }
    p.out[(std::size_t(row) * std::size_t(p.heads) + std::size_t(h0 + qi)) * std::size_t(D) + std::size_t(d)] =
        acc / l;
  }
}

// A split's merged state (splits > 1) to the workspace, for merge_split_heads.
__device__ void write_partial(const AttnParams& p, const AttnSmem& sm, int row, int h0, int count, int split) {
  const int D = p.head_dim;
  for (int i = threadIdx.x; i < count * D; i += blockDim.x) {
    const int qi = i / D, d = i % D;
    float* st = split_state(p.part, row, h0 + qi, p.heads, p.splits, split, D);
    if (d == 0) {
      st[0] = sm.m[qi];
      st[1] = sm.l[qi];
    }
    st[kAttnSplitStateHead + d] = sm.acc[qi * D + d];
  }
}

// Grid: x = (row * splits + split) * cluster + cluster rank, y = kv head * slices + slice. Block:
// warps of 32.
template <int NC, int MQ>
__global__ void __launch_bounds__(kMaxWarps * 32) paged_attention_kernel(const AttnParams p) {
  extern __shared__ float4 smem_f4[];  // float4: the vector loads of q and p need 16-byte alignment
  float* smem = reinterpret_cast<float*>(smem_f4);
  const int warps = int(blockDim.x / 32), warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int row = int(blockIdx.x) / (p.cluster * p.splits);
  const int split = int(blockIdx.x) / p.cluster % p.splits;
  const int kvh = int(blockIdx.y) / p.slices, slice = int(blockIdx.y) % p.slices;
  const int h0 = kvh * p.group + slice * p.per_slice;
  const int count = min(p.per_slice, p.group - slice * p.per_slice);
  // Where the row's keys are (a chain of dependent loads through the pass's uploads, which no kernel
  // writes) is asked for while the previous kernel still runs.
  const RowPlace at = row_place(row, p.row_seq, p.seqs, p.pages);
  pdl_enter();
  if (count <= 0) return;  // the same for every block of a cluster
  if (p.tile_rows > 0 && tile_in_one_sequence(row / p.tile_rows, p.tile_rows, p.T, p.row_seq)) return;
#if FT_ATTN_CLUSTERS
  const int crank = int(blockIdx.x) % p.cluster, cranks = p.cluster;
#else
  // Built without clusters but launched with them (PTX of an older arch on a newer GPU): rank 0
  // does all of the split, the other blocks nothing.
  if (int(blockIdx.x) % p.cluster != 0) return;
  const int crank = 0, cranks = 1;
#endif
  // The blocks of a row's keys: its splits, each split's cluster ranks.
  const int rank = split * cranks + crank, ranks = p.splits * cranks;
  const AttnSmem sm(smem, MQ, warps, p.head_dim);

  // The queries; heads past `count` are zeros, computed along and never written.
#pragma unroll 4
  for (int i = threadIdx.x; i < MQ * p.head_dim; i += blockDim.x) {
    const int qi = i / p.head_dim, d = i % p.head_dim;
    sm.q[i] = qi < count ? p.q[(std::size_t(row) * std::size_t(p.heads) + std::size_t(h0 + qi)) *
                                   std::size_t(p.head_dim) + std::size_t(d)]
                         : 0.f;
  }
  __syncthreads();

  const KeySource src{at.table,
                      attn_first_key(at.pos, p.window, p.chunk),
                      at.pos + 1,
                      p.off.k_base + std::size_t(kvh) * p.off.block_bytes,
                      p.off.v_base + std::size_t(kvh) * p.off.block_bytes,
                      p.head_dim,
                      p.page_tokens};

  // Tiles go round robin to the warps of all ranks: rank r's warps take tiles r*warps .. of every
  // round of ranks*warps tiles. A split with no tiles (a row shorter than the longest) keeps the
  // empty state (m = -inf, l = 0), which the merge weighs 0.
  WarpState<NC, MQ> st;
  st.init();
  attend_tiles<NC, MQ>(st, sm, p.scale, src, rank * warps + warp, ranks * warps, warp, lane);
#pragma unroll
  for (int qi = 0; qi < MQ; ++qi) st.l[qi] = warp_sum(st.l[qi]);

  const int ntiles = (src.nkeys + kTile - 1) / kTile - src.key0 / kTile;
  const int active = min(max(ntiles - rank * warps, 0), warps);  // warps that had tiles
  merge_warps<NC, MQ>(st, sm, p.head_dim, active, warp, lane);

#if FT_ATTN_CLUSTERS
  if (cranks > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every rank's state is complete
    if (crank == 0) {
      const int hd = p.head_dim;
      write_output(
          p, cranks, [&](int r) { return AttnSmem(cluster.map_shared_rank(smem, r), MQ, warps, hd); }, row, h0, count);
    }
    cluster.sync();  // the other ranks' shared memory stays alive until rank 0 has read it
    return;
  }
#endif
  if (p.splits > 1) {
    write_partial(p, sm, row, h0, count, split);
    if (last_to_finish(p.split_done + std::size_t(row) * gridDim.y + blockIdx.y, p.splits))
      merge_split_heads(p.part, p.splits, p.heads, p.head_dim, p.sinks, row, h0, count, p.out);
    return;
  }
  write_output(
      p, 1, [&](int) { return sm; }, row, h0, count);
}

template <int NC, int MQ>
void launch_attention(const AttnParams& p, dim3 grid, int warps, cudaStream_t s) {
  const std::size_t smem = attn_smem_bytes(MQ, warps, p.head_dim);  // at most 25 KB: no opt-in needed
  cudaLaunchAttribute cluster[1] = {};
  cluster[0].id = cudaLaunchAttributeClusterDimension;
  cluster[0].val.clusterDim.x = unsigned(p.cluster);
  cluster[0].val.clusterDim.y = 1;
  cluster[0].val.clusterDim.z = 1;
  launch_with(cluster, p.cluster > 1 ? 1 : 0, paged_attention_kernel<NC, MQ>, grid, dim3(unsigned(warps * 32)), smem,
              s, p);
}

template <int NC>
void launch_attention_mq(int mq, const AttnParams& p, dim3 grid, int warps, cudaStream_t s) {
  switch (mq) {
    case 1: return launch_attention<NC, 1>(p, grid, warps, s);
    case 2: return launch_attention<NC, 2>(p, grid, warps, s);
    case 4: return launch_attention<NC, 4>(p, grid, warps, s);
    default: return launch_attention<NC, kMaxQueries>(p, grid, warps, s);
  }
}

}  // namespace

void rope(float* x, int T, int heads, const ref::RopeSpec& spec, const float* inv_freq, const int64_t* positions,
          cudaStream_t s) {
  const int half = int(spec.rotary_dim / 2);
  if (T <= 0 || heads <= 0 || half <= 0) return;
  const int threads = std::min(1024, attention_pow2_ceil(heads * half));  // a decode row: one pass of the block
  launch(rope_kernel, unsigned(T), unsigned(threads), 2 * std::size_t(half) * sizeof(float), s, x, heads,
         int(spec.head_dim), half, spec.layout == ref::RopeLayout::kNeox, inv_freq, spec.attention_factor, positions);
}

void split_gated_query(const float* qg, int T, int heads, int head_dim, float* q, float* gate, cudaStream_t s) {
  const std::size_t n = std::size_t(T) * std::size_t(heads) * std::size_t(head_dim);
  if (n == 0) return;
  launch(split_gated_query_kernel, grid_for(n), kThreads, 0, s, qg, n, head_dim, q, gate);
}

void kv_write(const KvLayout& layout, int layer, const float* k, const float* v, int T, const int32_t* row_seq,
              const AttnSeqDev* seqs, std::byte* const* pages, cudaStream_t s) {
  const std::size_t n =
      std::size_t(T) * std::size_t(layout.kv_heads_at(layer)) * std::size_t(layout.head_dim_at(layer));
  if (n == 0) return;
  const PageOffsets off = page_offsets(layout, layer);
  launch(kv_write_kernel, grid_for(n), kThreads, 0, s, k, v, n, int(layout.kv_heads_at(layer)),
         int(layout.head_dim_at(layer)), int(layout.page_tokens), off, row_seq, seqs, pages);
}

namespace {

AttentionGpu this_gpu(int& dev) {
  int sms = 1, clusters = 0, major = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  return {sms, clusters != 0, major >= 8};
}

AttentionCall call_shape(const KvLayout& layout, int layer, int T, int heads, const AttentionOptions& opt,
                         int max_ctx) {
  const int kv_heads = int(layout.kv_heads_at(layer));
  max_ctx = attention_plan_context(T, max_ctx);
  // A sliding window or a chunk bounds how many keys a row reads.
  const int span = opt.window > 0 ? int(opt.window) : opt.chunk > 0 ? int(opt.chunk) : max_ctx;
  return {T,
          kv_heads,
          heads / kv_heads,
          int(layout.head_dim_at(layer)),
          std::min(max_ctx, span),
          opt.limited(),
          int(layout.page_tokens)};
}

}  // namespace

std::size_t paged_attention_workspace(const KvLayout& layout, int layer, int T, int heads, const AttentionOptions& opt,
                                      int max_ctx) {
  if (T <= 0 || heads <= 0 || T >= kAttnTiledMinRows) return 0;
  int dev = 0;
  const AttentionCall c = call_shape(layout, layer, T, heads, opt, max_ctx);
  return plan_attention(c, this_gpu(dev), true).workspace_floats(T, heads, c.head_dim);
}

void paged_attention(const KvLayout& layout, int layer, const float* q, int T, int heads, float scale,
                     const AttentionOptions& opt, const int32_t* row_seq, const AttnSeqDev* seqs, int max_ctx,
                     std::byte* const* pages, float* out, float* work, std::size_t work_floats, unsigned* split_done,
                     cudaStream_t s) {
  if (T <= 0 || heads <= 0) return;
  int dev = 0;
  const AttentionGpu gpu = this_gpu(dev);
  const AttentionCall c = call_shape(layout, layer, T, heads, opt, max_ctx);
  AttentionPlan plan = plan_attention(c, gpu, T < kAttnTiledMinRows && work && split_done);
  if (plan.workspace_floats(T, heads, c.head_dim) > work_floats) plan = plan_attention(c, gpu, false);

  const PagedAttentionCall call{.q = q,
                                .out = out,
                                .row_seq = row_seq,
                                .seqs = seqs,
                                .pages = pages,
                                .off = page_offsets(layout, layer),
                                .T = T,
                                .heads = heads,
                                .kv_heads = c.kv_heads,
                                .group = c.group,
                                .head_dim = c.head_dim,
                                .page_tokens = int(layout.page_tokens),
                                .scale = scale,
                                .window = int(opt.window),
                                .chunk = int(opt.chunk),
                                .sinks = opt.sinks};
  if (plan.mma) return decode_attention(call, plan.splits, plan.splits > 1 ? work : nullptr, split_done, s);

  AttnParams p{};
  static_cast<PagedAttentionCall&>(p) = call;
  p.slices = plan.slices;
  p.per_slice = plan.per_slice;
  p.cluster = plan.cluster;
  p.splits = plan.splits;
  p.part = plan.splits > 1 ? work : nullptr;
  p.split_done = split_done;

  // Prefill-sized calls: row tiles of one sequence go to the tiled kernel, which reads each key once
  // per tile of rows instead of once per row. The per-row kernel then takes only the rows of tiles
  // that span sequences (and skips the others at once): decode rows batched with prefills, or a
  // batch of many short sequences, keep its parallelism over rows and keys.
  p.tile_rows = tiled_prefill_attention(call, dev, gpu.sms, s);

  const int mq = attention_pow2_ceil(p.per_slice);
  const dim3 grid(unsigned(T) * unsigned(plan.splits * plan.cluster), unsigned(c.kv_heads * p.slices));
  switch (attention_pow2_ceil(c.head_dim / 32)) {
    case 1:
      launch_attention_mq<1>(mq, p, grid, plan.warps, s);
      break;
    case 2:
      launch_attention_mq<2>(mq, p, grid, plan.warps, s);
      break;
    case 4:
      launch_attention_mq<4>(mq, p, grid, plan.warps, s);
      break;
    default:
      launch_attention_mq<8>(mq, p, grid, plan.warps, s);
      break;
  }
}

}  // namespace ft::engine::cuda

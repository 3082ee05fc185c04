// Decode attention on the tensor cores: the rows of a decode step (fewer than 64) against their
// paged keys, for GQA groups of up to 8 query heads of 64 or 128 dims (attention_plan.h's
// attention_mma_fits; kernels.h paged_attention dispatches here).
//
// A block owns one row, one kv head (every query head of its group) and one split of the row's keys;
// its warps take steps of 16 keys round robin. A step is two mma m16n8k16 products:
//   - scores S = Q K^T: A is the group's queries, their bf16 high halves in rows 0-7 and low halves
//     in rows 8-15, so one product gives both halves' scores (S = row g + row g + 8: fp32-grade
//     queries at no extra product, and no padded rows); B is the K rows straight from the page, an
//     n-tile of 8 keys a product.
//   - values O += P V: A is the step's probabilities, again hi in rows 0-7 and lo in rows 8-15, taken
//     from the score fragments without leaving registers; B is the V block, which the pages keep
//     [dim][token], so 4 consecutive keys of a dim are one 8-byte load. O's rows 8-15 accumulate the
//     low halves' share, added to rows 0-7 at the end.
// Which key and dim each fragment slot stands for is a free choice (a dot product does not care
// about the order of its terms), made so that every load is a plain vector load: a thread's K loads
// are 16 bytes of one key row (dims 8 (t + 4 i) .. + 7), its V loads the 4 keys 4t .. 4t + 3 of one dim.
//
// The softmax state (max, sum, O) is per warp; the block merges its warps in a fixed order, then
// writes the row's output (one split) or its split's state for the last split to merge
// (attention_splits.h). Results do not depend on scheduling.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "attention_common.h"
#include "attention_plan.h"
#include "attention_splits.h"
#include "launch.h"
#include "mma_bf16.h"

namespace ft::engine::cuda {
namespace {

constexpr int kWarps = kAttnMmaWarps;
constexpr int kGroup = kAttnMmaMaxGroup;

struct DecodeParams : PagedAttentionCall {
  int splits;            // blocks a row's keys are split over
  float* part;           // splits > 1: the workspace (AttentionPlan::workspace_floats)
  unsigned* split_done;  // splits > 1: kAttnSplitCounters counters at zero
};

template <int D>
struct DecodeSmem {
  float m[kWarps][kGroup];
  float l[kWarps][kGroup];
  float o[kWarps][kGroup][D + 8];  // padded: the 8 rows' writes fall in different banks
  float e[kWarps][kGroup];         // each warp's weight in the merge, per query
  float mb[kGroup], lb[kGroup];    // the block's max and sum, per query
  float scale[kGroup], ls[kGroup];  // one split: the sink's share of the softmax, per query
};

template <int D>
__global__ void __launch_bounds__(kWarps * 32, 1) decode_attention_kernel(const DecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int NI = D / 32;  // a thread's 16-byte pieces of a key row (and of its query)
  constexpr int NT = D / 8;   // output n-tiles of 8 dims
  __shared__ DecodeSmem<D> sm;
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const int row = int(blockIdx.x) / p.splits, split = int(blockIdx.x) % p.splits, kvh = int(blockIdx.y);
  const int h0 = kvh * p.group;
  const RowPlace at = row_place(row, p.row_seq, p.seqs, p.pages);
  pdl_enter();
  const int key0 = attn_first_key(at.pos, p.window, p.chunk), nkeys = at.pos + 1;

  // Query g (zeros past the group) as A fragments: word w of piece i holds dims 8 (t + 4 i) + 2w, + 1.
  std::uint32_t qh[NI][4], ql[NI][4];
  {
    const float* qrow = p.q + (std::size_t(row) * std::size_t(p.heads) + std::size_t(h0 + min(g, p.group - 1))) * D;
#pragma unroll
    for (int i = 0; i < NI; ++i) {
      float4 a = __ldg(reinterpret_cast<const float4*>(qrow + 8 * (t + 4 * i)));
      float4 b = __ldg(reinterpret_cast<const float4*>(qrow + 8 * (t + 4 * i) + 4));
      if (g >= p.group) a = b = make_float4(0.f, 0.f, 0.f, 0.f);
      split_bf16x2(a.x, a.y, qh[i][0], ql[i][0]);
      split_bf16x2(a.z, a.w, qh[i][1], ql[i][1]);
      split_bf16x2(b.x, b.y, qh[i][2], ql[i][2]);
      split_bf16x2(b.z, b.w, qh[i][3], ql[i][3]);
    }
  }

  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m = -INFINITY, l = 0.f;  // query g's running max and this thread's share of its sum
  const std::size_t k_head = p.off.k_base + std::size_t(kvh) * p.off.block_bytes;
  const std::size_t v_head = p.off.v_base + std::size_t(kvh) * p.off.block_bytes;
  const int P = p.page_tokens, workers = p.splits * kWarps;

  // K of step u, n-tile j: column g is key 4 (g / 2) + 2j + g % 2 of the step, so that score slots
  // (2j + e) of thread t are keys 4t + 2j + e and its four scores are keys 4t .. 4t + 3. The step's
  // 16 keys lie in one page.
  uint4 kr[2][NI];
  const auto load_k = [&](int u) {
    const int j0 = u * kAttnMmaKeys;
    const auto* kpage = reinterpret_cast<const std::uint16_t*>(at.table[j0 / P] + k_head) + std::size_t(j0 % P) * D;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const auto* krow = reinterpret_cast<const uint4*>(kpage + std::size_t(4 * (g / 2) + 2 * j + g % 2) * D);
#pragma unroll
      for (int i = 0; i < NI; ++i) kr[j][i] = __ldg(krow + t + 4 * i);
    }
  };
  // V of step u, n-tile n: dim 8n + g, keys 4t .. 4t + 3 (x: the first two, y: the last two).
  uint2 vr[NT];
  const auto load_v = [&](int u) {
    const int j0 = u * kAttnMmaKeys;
    const std::uint16_t* vcol = reinterpret_cast<const std::uint16_t*>(at.table[j0 / P] + v_head) + j0 % P + 4 * t;
#pragma unroll
    for (int n = 0; n < NT; ++n) vr[n] = __ldg(reinterpret_cast<const uint2*>(vcol + std::size_t(8 * n + g) * P));
  };

  // The warp's steps u, u + workers, ...; the next step's K is asked for once this step's scores are
  // taken, its V once this step's values are, so each step's loads overlap the step before.
  int u = key0 / kAttnMmaKeys + split * kWarps + warp;
  bool more = u * kAttnMmaKeys < nkeys;
  if (more) {
    load_k(u);
    load_v(u);
  }
  while (more) {
    const int j0 = u * kAttnMmaKeys, next = u + workers;
    more = next * kAttnMmaKeys < nkeys;

    // Scores: rows g and g + 8 of the product are query g's hi and lo halves against the same keys.
    float s[4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int i = 0; i < NI; ++i) {
        const std::uint32_t a0[4] = {qh[i][0], ql[i][0], qh[i][1], ql[i][1]};
        const std::uint32_t a1[4] = {qh[i][2], ql[i][2], qh[i][3], ql[i][3]};
        mma_bf16(c, a0, kr[j][i].x, kr[j][i].y);
        mma_bf16(c, a1, kr[j][i].z, kr[j][i].w);
      }
      s[2 * j] = c[0] + c[2];
      s[2 * j + 1] = c[1] + c[3];
    }
    if (more) load_k(next);

    // The online softmax step over the 16 keys (the quad of threads of query g shares its max).
    // Every step holds a key of the row, so the new max is finite.
    const int k0 = j0 + 4 * t;  // this thread's first key
    float mx = -INFINITY;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[e] = k0 + e >= key0 && k0 + e < nkeys ? s[e] * p.scale : -INFINITY;
      mx = fmaxf(mx, s[e]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m, mx), alpha = expf(m - m_new);
    float pr[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) pr[e] = expf(s[e] - m_new);
    l = l * alpha + (pr[0] + pr[1] + pr[2] + pr[3]);
    m = m_new;
    std::uint32_t pa[4];
    split_bf16x2(pr[0], pr[1], pa[0], pa[1]);
    split_bf16x2(pr[2], pr[3], pa[2], pa[3]);

    // Keys outside the row read 0 as values: a stale page slot may hold NaN (0 * NaN).
    if (j0 < key0 || j0 + kAttnMmaKeys > nkeys) {
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        std::uint32_t w[2] = {vr[n].x, vr[n].y};
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (k0 + e < key0 || k0 + e >= nkeys) w[e / 2] &= e % 2 ? 0x0000ffffu : 0xffff0000u;
        vr[n] = make_uint2(w[0], w[1]);
      }
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int r = 0; r < 4; ++r) o[n][r] *= alpha;
      mma_bf16(o[n], pa, vr[n].x, vr[n].y);
    }
    if (more) load_v(next);
    u = next;
  }

  // The warp's state to shared memory: query g's max and sum, and O (hi rows plus lo rows).
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (t == 0) {
    sm.m[warp][g] = m;
    sm.l[warp][g] = l;
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    sm.o[warp][g][8 * n + 2 * t] = o[n][0] + o[n][2];
    sm.o[warp][g][8 * n + 2 * t + 1] = o[n][1] + o[n][3];
  }
  __syncthreads();

  // The warps merged, warp 0 first; a warp without keys (m = -inf) weighs 0. Each query's weights
  // and sum are made once (a thread a query), not once for every output dim.
  if (int(threadIdx.x) < p.group) {
    const int qi = int(threadIdx.x);
    float mb = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mb = fmaxf(mb, sm.m[w][qi]);
    float lb = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float e = sm.m[w][qi] == -INFINITY ? 0.f : expf(sm.m[w][qi] - mb);
      sm.e[w][qi] = e;
      lb += sm.l[w][qi] * e;
    }
    sm.mb[qi] = mb;
    sm.lb[qi] = lb;
    // A sink takes its share of the softmax and adds no value.
    const float sink = p.sinks ? p.sinks[h0 + qi] : -INFINITY, mt = fmaxf(mb, sink);
    sm.scale[qi] = expf(mb - mt);
    sm.ls[qi] = lb * sm.scale[qi] + (p.sinks ? expf(sink - mt) : 0.f);
  }
  __syncthreads();
  for (int i = int(threadIdx.x); i < p.group * D; i += int(blockDim.x)) {
    const int qi = i / D, d = i % D;
    const float mb = sm.mb[qi], lb = sm.lb[qi];
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc += sm.o[w][qi][d] * sm.e[w][qi];
    const int h = h0 + qi;
    if (p.splits > 1) {
      float* st = split_state(p.part, row, h, p.heads, p.splits, split, D);
      if (d == 0) {
        st[0] = mb;
        st[1] = lb;
      }
      st[kAttnSplitStateHead + d] = acc;
    } else {
      p.out[(std::size_t(row) * std::size_t(p.heads) + std::size_t(h)) * D + std::size_t(d)] =
          acc * sm.scale[qi] / sm.ls[qi];
    }
  }
  if (p.splits > 1 && last_to_finish(p.split_done + std::size_t(row) * gridDim.y + blockIdx.y, p.splits))
    merge_split_heads(p.part, p.splits, p.heads, D, p.sinks, row, h0, p.group, p.out);
#else
  (void)p;  // never launched below sm_80 (attention_mma_fits)
#endif
}

}  // namespace

void decode_attention(const PagedAttentionCall& a, int splits, float* part, unsigned* split_done, cudaStream_t s) {
  DecodeParams p{};
  static_cast<PagedAttentionCall&>(p) = a;
  p.splits = splits;
  p.part = part;
  p.split_done = split_done;
  const dim3 grid(unsigned(a.T * splits), unsigned(a.kv_heads));
  if (a.head_dim == 64)
    launch(decode_attention_kernel<64>, grid, dim3(kWarps * 32), 0, s, p);
  else
    launch(decode_attention_kernel<128>, grid, dim3(kWarps * 32), 0, s, p);
}

}  // namespace ft::engine::cuda

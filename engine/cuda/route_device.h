// The router's top-k for one token, as a warp-level device function: the route kernel runs it one
// warp per token, and the decode router product runs it in its last block (gemv_kernels.cu), so a
// decode step's routing costs no launch of its own. Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels.h"

namespace ft::engine::cuda {

// E <= 32 * kRouteRegisters: a lane keeps its logits in registers.
inline constexpr int kRouteRegisters = 8;

// A warp's pass over one token's E logits, lane e % 32 taking logit e: from NE registers a lane
// (E <= 32 NE: fully unrolled, so the array stays in registers) or, with NE = 0, from memory.
template <int NE, typename Fn>
__device__ __forceinline__ void for_each_logit(const float* l, const float (&cached)[NE > 0 ? NE : 1], int E,
                                               int lane, Fn&& fn) {
  if constexpr (NE > 0) {
#pragma unroll
    for (int j = 0; j < NE; ++j)
      if (lane + 32 * j < E) fn(lane + 32 * j, j, cached[j]);
  } else {
    for (int e = lane, j = 0; e < E; e += 32, ++j) fn(e, j, l[e]);
  }
}

// Writes token t's choices: lane k < top_k holds choice k (expert my_e, score my_p); picked_sum is
// the sum of the chosen scores (the same on every lane).
__device__ __forceinline__ void route_write(int t, const RouteSpec& r, int lane, int my_e, float my_p,
                                            float picked_sum) {
  const int top_k = r.top_k;
  float weight = (r.renormalize ? my_p / picked_sum : my_p) * r.scaling;
  if (r.per_expert_scale && lane < top_k) weight *= r.per_expert_scale[my_e];
  // This choice's place in ascending expert order (the experts are distinct).
  int rank = 0;
  for (int j = 0; j < top_k; ++j) rank += __shfl_sync(0xffffffffu, my_e, j) < my_e ? 1 : 0;
  if (lane < top_k) {
    const int i = t * top_k + lane, sorted = t * top_k + rank;
    r.chosen[i] = my_e;
    r.weights[i] = weight;
    if (r.by_expert.expert) {
      r.by_expert.expert[sorted] = my_e;
      r.by_expert.pair[sorted] = i;
      r.by_expert.weight[sorted] = weight;
    }
  }
}

// A logit (or choice score) as the top-k ranks it: NaN below everything (-inf), so that a NaN from
// a broken checkpoint or an overflowed activation is chosen last and every choice stays a valid
// expert index (ref::route_top_k ranks the same way).
__device__ __forceinline__ float rank_key(float v) { return v != v ? -INFINITY : v; }

// The arg-max of (v, e) pairs over the warp: the larger value, ties to the lower index.
__device__ __forceinline__ void warp_argmax(float& best, int& best_e) {
  for (int off = 16; off > 0; off >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, off);
    const int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
    if (ob > best || (ob == best && oe < best_e)) {
      best = ob;
      best_e = oe;
    }
  }
}

// DeepSeek-V3's choice (ref::route_top_k with r.grouped): sigmoid (or, ERNIE 4.5, softmax) scores s,
// choice scores c = s + bias; a group's score is the sum of its two best c; the topk_group best
// groups are kept (ties to the lower group) and every other expert's c becomes 0 (HF's masked_fill
// 0.0); then top_k rounds of arg-max over c, each choice weighted by its s. Reads the logits from
// memory in every pass (a decode step's E logits are in L1 after the first).
__device__ __forceinline__ void route_token_grouped(const float* l, int t, const RouteSpec& r, int lane) {
  const int E = r.E, G = r.n_group, per = E / G;
  float mx = -FLT_MAX, sum = 0.f;  // the softmax's max and normaliser
  if (!r.sigmoid) {
    for (int e = lane; e < E; e += 32) mx = fmaxf(mx, l[e]);
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    for (int e = lane; e < E; e += 32) sum += expf(l[e] - mx);
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  }
  auto score = [&](int e) { return r.sigmoid ? 1.f / (1.f + expf(-l[e])) : expf(l[e] - mx) / sum; };
  auto choice = [&](int e) { return score(e) + (r.bias ? r.bias[e] : 0.f); };
  unsigned long long keep = 0;  // bit g: group g kept
  {
    float group_score[kRouteMaxGroups];
    for (int g = 0; g < G; ++g) {
      // The group's two best choice scores: each lane's two, merged over the warp.
      float a = -FLT_MAX, b = -FLT_MAX;
      for (int e = g * per + lane; e < (g + 1) * per; e += 32) {
        const float c = choice(e);
        if (c > a) {
          b = a;
          a = c;
        } else if (c > b) {
          b = c;
        }
      }
      for (int off = 16; off > 0; off >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, a, off), ob = __shfl_xor_sync(0xffffffffu, b, off);
        const float hi = fmaxf(a, oa), lo = fmaxf(fminf(a, oa), fmaxf(b, ob));
        a = hi;
        b = lo;
      }
      group_score[g] = a + b;
    }
    for (int k = 0; k < r.topk_group; ++k) {
      int best_g = -1;
      for (int g = 0; g < G; ++g)
        if (!((keep >> g) & 1ull) && (best_g < 0 || group_score[g] > group_score[best_g])) best_g = g;
      keep |= 1ull << best_g;
    }
  }
  unsigned taken[8] = {};  // bit j of lane: expert lane + 32 j chosen
  float picked_sum = 0.f, my_p = 0.f;
  int my_e = 0;
  for (int k = 0; k < r.top_k; ++k) {
    float best = -INFINITY;
    int best_e = E;
    for (int e = lane, j = 0; e < E; e += 32, ++j) {
      if ((taken[j >> 5] >> (j & 31)) & 1u) continue;
      const float v = (keep >> (e / per)) & 1ull ? rank_key(choice(e)) : 0.f;
      if (v > best || (v == best && e < best_e)) {
        best = v;
        best_e = e;
      }
    }
    warp_argmax(best, best_e);
    if (best_e % 32 == lane) {
      const int j = best_e / 32;
      taken[j >> 5] |= 1u << (j & 31);
    }
    const float p = score(best_e);
    picked_sum += p;
    if (lane == k) {
      my_p = p;
      my_e = best_e;
    }
  }
  route_write(t, r, lane, my_e, my_p, picked_sum);
}

// Token t's logits l [E] -> its choices (ref::route_top_k): softmax (or sigmoid) scores, then top_k
// rounds of an arg-max over the logits (the scores are monotonic in them; ties to the lower index,
// as torch.topk on the CPU). With NE > 0 a lane's logits are read once into registers and the
// rounds cost shuffles only. Every lane of the warp calls it.
template <int NE>
__device__ __forceinline__ void route_token(const float* l, int t, const RouteSpec& r, int lane) {
  if (r.grouped) return route_token_grouped(l, t, r, lane);
  const int E = r.E, top_k = r.top_k;
  float cached[NE > 0 ? NE : 1] = {};
  if constexpr (NE > 0) {
#pragma unroll
    for (int j = 0; j < NE; ++j) cached[j] = lane + 32 * j < E ? l[lane + 32 * j] : -FLT_MAX;
  }
  float mx = -FLT_MAX;
  for_each_logit<NE>(l, cached, E, lane, [&](int, int, float v) { mx = fmaxf(mx, v); });
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float sum = 0.f;
  for_each_logit<NE>(l, cached, E, lane, [&](int, int, float v) { sum += expf(v - mx); });
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  // Bit j: this lane's expert lane + 32 j is taken (8 words: E <= 8192).
  unsigned taken[8] = {};
  float picked_sum = 0.f, my_p = 0.f;  // lane k keeps choice k (top_k <= 32)
  int my_e = 0;
  for (int k = 0; k < top_k; ++k) {
    float best = -INFINITY;
    int best_e = E;
    for_each_logit<NE>(l, cached, E, lane, [&](int e, int j, float raw) {
      const bool used = (taken[j >> 5] >> (j & 31)) & 1u;
      const float v = rank_key(raw);
      if (!used && (v > best || (v == best && e < best_e))) {
        best = v;
        best_e = e;
      }
    });
    warp_argmax(best, best_e);
    if (best_e % 32 == lane) {
      const int j = best_e / 32;
      taken[j >> 5] |= 1u << (j & 31);
    }
    const float p = r.sigmoid ? 1.f / (1.f + expf(-best)) : expf(best - mx) / sum;
    picked_sum += p;
    if (lane == k) {
      my_p = p;
      my_e = best_e;
    }
  }
  // The sums above are the same on every lane.
  route_write(t, r, lane, my_e, my_p, picked_sum);
}

// One token's routing (not grouped) by a whole block of E <= blockDim.x threads: thread e holds logit
// e and counts the logits ranked above it (larger, or equal at a lower index: route_token's order),
// so the top_k are found in one pass over shared memory instead of top_k rounds of warp arg-max,
// each a chain of dependent shuffles. The scores and their sum as route_token forms them (the
// softmax normaliser's order differs: a block sum). Every thread of the block calls it.
template <int kThreads>
__device__ __forceinline__ void route_token_block(const float* l, int t, const RouteSpec& r) {
  __shared__ float logits[kThreads];
  __shared__ float part[kThreads / 32];
  __shared__ int picked_e[32];
  __shared__ float picked_p[32];
  const int e = int(threadIdx.x), lane = e & 31, warp = e >> 5, E = r.E;
  const float v = e < E ? l[e] : -FLT_MAX;
  logits[e] = rank_key(v);
  float mx = v;
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  if (lane == 0) part[warp] = mx;
  __syncthreads();
  mx = part[0];
  for (int w = 1; w < kThreads / 32; ++w) mx = fmaxf(mx, part[w]);
  float sum = e < E && !r.sigmoid ? expf(v - mx) : 0.f;
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  __syncthreads();  // every thread has read part[] as maxima
  if (lane == 0) part[warp] = sum;
  __syncthreads();
  sum = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) sum += part[w];
  if (e < E) {
    const float key = logits[e];
    int rank = 0;
    for (int j = 0; j < E; ++j) {
      const float o = logits[j];
      rank += o > key || (o == key && j < e) ? 1 : 0;
    }
    if (rank < r.top_k) {
      picked_e[rank] = e;
      picked_p[rank] = r.sigmoid ? 1.f / (1.f + expf(-v)) : expf(v - mx) / sum;
    }
  }
  __syncthreads();
  if (warp != 0) return;
  float picked_sum = 0.f;
  for (int k = 0; k < r.top_k; ++k) picked_sum += picked_p[k];
  const bool mine = lane < r.top_k;
  route_write(t, r, lane, mine ? picked_e[lane] : 0, mine ? picked_p[lane] : 0.f, picked_sum);
}

}  // namespace ft::engine::cuda

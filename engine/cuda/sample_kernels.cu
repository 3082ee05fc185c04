// Sampling on the GPU (Backend::sample): one block per row of logits draws the next token with the
// host's uniform draw, so only the token crosses PCIe, not a vocabulary of logits.
//
// The warpers of sampling.h as thresholds on the score: top-k keeps scores >= the k-th largest,
// top-p keeps the highest scores until their probability reaches top_p (the crossing one kept),
// min-p keeps p >= min_p * p_max, i.e. score >= max + ln(min_p). The k-th largest score and the
// crossing score are found by radix selection over the scores' bits, 8 bits a pass, with counts
// (top-k) or fixed-point probability masses (top-p) in shared-memory histograms: integer sums,
// so the result does not depend on the order the threads add in. Then each thread sums the kept
// probability of its contiguous slice of the vocabulary, a block scan places the draw, and the one
// thread whose slice holds it walks it. Differences from the CPU sampler (double arithmetic, a full
// sort): fp32 here, and tokens tied at exactly the top-p crossing score are all kept (the CPU keeps
// them in index order up to the crossing).
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels.h"
#include "launch.h"

namespace ft::engine::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// Probability masses in fixed point: exp(score - max) <= 1 scaled by 2^40, summed over a
// vocabulary of < 2^18 tokens, stays below 2^58.
constexpr double kMassScale = 1099511627776.0;  // 2^40

// Scores as unsigned keys in the same order (negative floats reversed).
__device__ __forceinline__ uint32_t key_of(float s) {
  const uint32_t b = __float_as_uint(s);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct Shared {
  unsigned long long hist[256];
  float best[kWarps];
  int best_i[kWarps];
  float part[kWarps];
  uint32_t choice[2];  // the selected digit; the chosen token
  unsigned long long above;
  unsigned long long total;
};

// The largest key t with weight(keys >= t, among keys >= floor) >= target: the key of the element
// where the weights, walked from the highest key down, reach target. weight(i): 1 or its mass.
template <typename Weight>
__device__ uint32_t select_key(const float* l, float inv_t, int c0, int c1, uint32_t floor,
                               unsigned long long target, Weight weight, Shared& sh) {
  uint32_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) sh.above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = int(threadIdx.x); b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int i = c0; i < c1; ++i) {
      const float s = l[i] * inv_t;
      const uint32_t k = key_of(s);
      if (k >= floor && (k & mask) == prefix) atomicAdd(&sh.hist[(k >> shift) & 255u], weight(s));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long acc = sh.above;
      int b = 255;
      for (; b > 0; --b) {
        if (acc + sh.hist[b] >= target) break;
        acc += sh.hist[b];
      }
      sh.above = acc;
      sh.choice[0] = uint32_t(b);
    }
    __syncthreads();
    prefix |= sh.choice[0] << shift;
    mask |= 255u << shift;
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int V, const SampleRowDev* rows,
                                                          int32_t* tokens) {
  pdl_enter();
  __shared__ Shared sh;
  const SampleRowDev r = rows[blockIdx.x];
  const float* l = logits + std::size_t(r.row) * std::size_t(V);
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int per = (V + kThreads - 1) / kThreads;
  const int c0 = min(V, int(threadIdx.x) * per), c1 = min(V, c0 + per);

  // The highest logit, lowest index among equals (the greedy token; the softmax's max).
  float best = -FLT_MAX;
  int best_i = V;
  for (int i = c0; i < c1; ++i) {
    if (l[i] > best) {
      best = l[i];
      best_i = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ob > best || (ob == best && oi < best_i)) {
      best = ob;
      best_i = oi;
    }
  }
  if (lane == 0) {
    sh.best[warp] = best;
    sh.best_i[warp] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) {
      if (sh.best[w] > best || (sh.best[w] == best && sh.best_i[w] < best_i)) {
        best = sh.best[w];
        best_i = sh.best_i[w];
      }
    }
    // Every logit NaN (a broken model): token 0, as the host's argmax gives, never an id past the
    // vocabulary for the next step's embedding to read.
    if (best_i >= V) best_i = 0;
    sh.best[0] = best;
    sh.best_i[0] = best_i;
  }
  __syncthreads();
  if (r.greedy || r.temperature <= 0.f) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = sh.best_i[0];
    return;
  }
  const float inv_t = 1.f / r.temperature, m = sh.best[0] * inv_t;
  const auto mass = [&](float s) { return (unsigned long long)(double(expf(s - m)) * kMassScale); };

  uint32_t floor = 0;  // kept: keys >= floor
  if (r.top_k > 0 && r.top_k < V) {
    floor = select_key(l, inv_t, c0, c1, 0u, (unsigned long long)r.top_k, [](float) { return 1ull; }, sh);
  }
  if (r.top_p < 1.f) {
    // The kept mass, then the score where the walk from the top reaches top_p of it.
    unsigned long long z = 0;
    for (int i = c0; i < c1; ++i) {
      const float s = l[i] * inv_t;
      if (key_of(s) >= floor) z += mass(s);
    }
    if (threadIdx.x == 0) sh.total = 0;
    __syncthreads();
    atomicAdd(&sh.total, z);
    __syncthreads();
    const unsigned long long want = (unsigned long long)(double(r.top_p) * double(sh.total));
    const unsigned long long target = want > 0 ? want : 1;
    const uint32_t crossing = select_key(l, inv_t, c0, c1, floor, target, mass, sh);
    floor = crossing > floor ? crossing : floor;
  }
  if (r.min_p > 0.f) {
    const uint32_t k = key_of(m + logf(r.min_p));
    floor = k > floor ? k : floor;
  }

  // Each thread's slice of the kept probability (unnormalised), a scan over the slices in index
  // order, and the walk of the slice where u * total falls.
  float mine = 0.f;
  for (int i = c0; i < c1; ++i) {
    const float s = l[i] * inv_t;
    if (key_of(s) >= floor) mine += expf(s - m);
  }
  // Inclusive scan over the block: warps, then the warps' totals.
  float incl = mine;
  for (int o = 1; o < 32; o <<= 1) {
    const float v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) sh.part[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    float t = sh.part[lane];
    for (int o = 1; o < 32; o <<= 1) {
      const float v = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += v;
    }
    sh.part[lane] = t;  // inclusive totals of warps 0..lane
  }
  if (threadIdx.x == 0) sh.choice[1] = uint32_t(sh.best_i[0]);  // if rounding finds no slice
  __syncthreads();
  const float total = sh.part[kWarps - 1];
  const float before = (warp > 0 ? sh.part[warp - 1] : 0.f) + incl - mine;
  const float target = float(r.u) * total;
  if (mine > 0.f && target >= before && target < before + mine) {
    float cum = before;
    int pick = -1, last = -1;
    for (int i = c0; i < c1; ++i) {
      const float s = l[i] * inv_t;
      if (key_of(s) < floor) continue;
      last = i;
      cum += expf(s - m);
      if (target < cum) {
        pick = i;
        break;
      }
    }
    sh.choice[1] = uint32_t(pick >= 0 ? pick : last);
  }
  __syncthreads();
  if (threadIdx.x == 0) tokens[blockIdx.x] = int32_t(sh.choice[1]);
}

}  // namespace

void sample_rows(const float* logits, int rows, int vocab, const SampleRowDev* params, int32_t* tokens,
                 cudaStream_t s) {
  if (rows > 0) launch(sample_kernel, unsigned(rows), kThreads, 0, s, logits, vocab, params, tokens);
}

}  // namespace ft::engine::cuda

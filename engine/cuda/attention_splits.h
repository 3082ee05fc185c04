// A decode row's keys split over blocks (attention_plan.h): each block writes its partial softmax
// state (m, l, unnormalised acc[head_dim]) for its heads to the workspace, and the block that
// finishes last merges every split's state in split order. Device code shared by the attention
// kernels. Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

#include "attention_plan.h"
#include "reduce_device.h"

namespace ft::engine::cuda {

// Where split `split` of (row, head) keeps its state in the workspace `part`: m, l, two floats of
// padding, then head_dim unnormalised outputs (16-byte aligned for the merge's vector loads).
__device__ __forceinline__ float* split_state(float* part, int row, int head, int heads, int splits, int split,
                                              int head_dim) {
  return part +
         ((std::size_t(row) * std::size_t(heads) + std::size_t(head)) * std::size_t(splits) + std::size_t(split)) *
             std::size_t(head_dim + kAttnSplitStateHead);
}

// Heads h0 .. h0 + count - 1 of `row`: every split's state merged into out [rows, heads, head_dim], a
// head a warp (head_dim a multiple of 4). The lanes take the splits' maxima and sums (a split without keys, m = -inf,
// weighs 0; a sink joins the softmax and adds no value), then each lane 4 output dims over every split in split order,
// eight splits' loads in flight: the merge is a few round trips to L2, not one a split. Read through L2 (__ldcg): other
// blocks wrote the states during this launch.
__device__ __noinline__ inline void merge_split_heads(const float* part, int splits, int heads, int head_dim,
                                                      const float* sinks, int row, int h0, int count, float* out) {
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), warps = int(blockDim.x / 32);
  const std::size_t stride = std::size_t(head_dim + kAttnSplitStateHead);
  for (int qi = warp; qi < count; qi += warps) {
    const int h = h0 + qi;
    const std::size_t rh = std::size_t(row) * std::size_t(heads) + std::size_t(h);
    const float* st = part + rh * std::size_t(splits) * stride;
    static_assert(kAttnMaxSplits == 64, "a lane holds two splits' weights");
    float ms[kAttnMaxSplits / 32], m = sinks ? sinks[h] : -INFINITY;
#pragma unroll
    for (int i = 0; i < kAttnMaxSplits / 32; ++i) {
      const int s = lane + 32 * i;
      ms[i] = s < splits ? __ldcg(st + std::size_t(s) * stride) : -INFINITY;
      m = fmaxf(m, ms[i]);
    }
    m = warp_max(m);
    float e[kAttnMaxSplits / 32], l = 0.f;
#pragma unroll
    for (int i = 0; i < kAttnMaxSplits / 32; ++i) {
      const int s = lane + 32 * i;
      e[i] = expf(ms[i] - m);  // 0 for a split without keys
      if (s < splits) l += __ldcg(st + std::size_t(s) * stride + 1) * e[i];
    }
    l = warp_sum(l) + (sinks ? expf(sinks[h] - m) : 0.f);
    const float inv = 1.f / l;
    // Every lane runs every round (the weights come by shuffle); lanes past head_dim load nothing.
    for (int base = 0; base < head_dim; base += 128) {
      const int d0 = base + 4 * lane;
      const bool mine = d0 < head_dim;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
      for (int s = 0; s < splits; ++s) {
        const float w = __shfl_sync(0xffffffffu, s < 32 ? e[0] : e[1], s % 32);
        if (!mine) continue;
        const float4 a =
            __ldcg(reinterpret_cast<const float4*>(st + std::size_t(s) * stride + kAttnSplitStateHead + d0));
        acc.x += a.x * w;
        acc.y += a.y * w;
        acc.z += a.z * w;
        acc.w += a.w * w;
      }
      if (mine)
        *reinterpret_cast<float4*>(out + rh * std::size_t(head_dim) + std::size_t(d0)) =
            make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    }
  }
}

}  // namespace ft::engine::cuda

// Misses read in place, staged (kernels.h: stage_missed_experts): a layer's chosen experts that its
// table names in host memory are copied into device memory by wide loads over PCIe (what a kernel
// reading pinned memory can cross at: ~51 of a copy engine's ~55 GB/s on an H100), and the expert
// kernels then read the copies from HBM instead of reading a few bytes a lane across PCIe. The same
// copies, for the next layer's predicted misses while this layer computes: stage_ahead.
#include <cstdint>

#include "kernels.h"

namespace ft::engine::cuda {
namespace {

// The staging slot of expert e: its first choice j among the first `slots` choices when its table
// entry is host memory, else -1.
__device__ int staged_slot(int e, const std::uint8_t* from_host, const int32_t* chosen, int n) {
  if (!from_host[e]) return -1;
  for (int j = 0; j < n; ++j)
    if (chosen[j] == e) return j;
  return -1;
}

// This block's part (of gridDim.x) of expert e's three matrices (where `table`, 3 E pointers, names
// them) copied into the slot starting at `slot`: four 16-byte loads in flight a thread (the
// matrices start 16-byte aligned: slots on 256 bytes, host experts read in place on 16), the tail a
// byte a thread.
__device__ void copy_expert(const std::byte* const* table, int E, int e, const StagedExpert& shape, std::byte* slot) {
  constexpr int kUnroll = 4;
  for (int m = 0; m < 3; ++m) {
    const uint4* src = reinterpret_cast<const uint4*>(table[std::size_t(m) * E + e]);
    uint4* dst = reinterpret_cast<uint4*>(slot + shape.offset[m]);
    const std::size_t vectors = shape.bytes[m] / 16;
    const std::size_t step = std::size_t(gridDim.x) * blockDim.x;
    for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += kUnroll * step) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * step < vectors) v[u] = src[i + u * step];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * step < vectors) dst[i + u * step] = v[u];
    }
    if (blockIdx.x == 0)
      for (std::size_t i = 16 * vectors + threadIdx.x; i < shape.bytes[m]; i += blockDim.x)
        reinterpret_cast<std::byte*>(dst)[i] = reinterpret_cast<const std::byte*>(src)[i];
  }
}

// blockIdx.y < n: choice j's part blockIdx.x of its expert's three matrices, copied if the choice
// is its expert's staged one. blockIdx.y == n (block x 0): the table, each staged expert's entries
// pointing at its slot.
__global__ void stage_kernel(const std::byte* const* table, const std::uint8_t* from_host, int E, const int32_t* chosen,
                             int n, StagedExpert shape, std::byte* staging, const std::byte** out) {
  const int j = int(blockIdx.y);
  if (j == n) {
    if (blockIdx.x != 0) return;
    for (int i = int(threadIdx.x); i < 3 * E; i += int(blockDim.x)) {
      const int e = i % E, m = i / E;
      const int slot = staged_slot(e, from_host, chosen, n);
      out[i] = slot < 0 ? table[i] : staging + std::size_t(slot) * shape.slot_bytes + shape.offset[m];
    }
    return;
  }
  const int e = chosen[j];
  if (staged_slot(e, from_host, chosen, n) != j) return;
  copy_expert(table, E, e, shape, staging + std::size_t(j) * shape.slot_bytes);
}

// The next layer's experts copied ahead (stage_ahead): slot j of `slots` for the j-th distinct
// expert among `predicted` whose entry names host memory, the first `most` of them; else -1.
__device__ int ahead_slot(int e, const std::uint8_t* from_host, const int32_t* predicted, int n, int most) {
  if (!from_host[e]) return -1;
  int rank = 0;
  for (int j = 0; j < n; ++j) {
    const int p = predicted[j];
    bool first = from_host[p] != 0;
    for (int i = 0; i < j && first; ++i) first = predicted[i] != p;
    if (!first) continue;
    if (p == e) return rank < most ? rank : -1;
    ++rank;
  }
  return -1;
}

// blockIdx.y < most: the part blockIdx.x of the expert copied into slot blockIdx.y; blockIdx.y ==
// most (block x 0): the layer's table and from-host flags with the copied experts in their slots.
__global__ void stage_ahead_kernel(const std::byte* const* table, const std::uint8_t* from_host, int E,
                                   const int32_t* predicted, int n, int most, StagedExpert shape,
                                   std::byte* const* slots, const std::byte** out, std::uint8_t* out_from_host) {
  const int y = int(blockIdx.y);
  if (y == most) {
    if (blockIdx.x != 0) return;
    for (int i = int(threadIdx.x); i < 3 * E; i += int(blockDim.x)) {
      const int e = i % E, m = i / E;
      const int slot = ahead_slot(e, from_host, predicted, n, most);
      out[i] = slot < 0 ? table[i] : slots[slot] + shape.offset[m];
      if (m == 0) out_from_host[e] = slot < 0 ? from_host[e] : 0;
    }
    return;
  }
  int e = -1;
  for (int j = 0; j < n && e < 0; ++j)
    if (ahead_slot(predicted[j], from_host, predicted, n, most) == y) e = predicted[j];
  if (e < 0) return;
  copy_expert(table, E, e, shape, slots[y]);
}

}  // namespace

void stage_ahead(const std::byte* const* table, const std::uint8_t* from_host, int E, const int32_t* predicted, int n,
                 int most, const StagedExpert& shape, std::byte* const* slots, const std::byte** out,
                 std::uint8_t* out_from_host, cudaStream_t s) {
  constexpr unsigned kParts = 16;
  stage_ahead_kernel<<<dim3(kParts, unsigned(most) + 1), 256, 0, s>>>(table, from_host, E, predicted, n, most, shape,
                                                                      slots, out, out_from_host);
}

void stage_missed_experts(const std::byte* const* table, const std::uint8_t* from_host, int E, const int32_t* chosen,
                          int n, const StagedExpert& shape, std::byte* staging, const std::byte** out, cudaStream_t s) {
  // Plain launches: the expert kernels after it read the table and the weights before their
  // pdl_enter(), so this must have finished, not merely started, when they launch.
  constexpr unsigned kParts = 16;  // blocks an expert: a batch-1 step's 8 misses keep ~128 blocks reading
  stage_kernel<<<dim3(kParts, unsigned(n) + 1), 256, 0, s>>>(table, from_host, E, chosen, n, shape, staging, out);
}

}  // namespace ft::engine::cuda

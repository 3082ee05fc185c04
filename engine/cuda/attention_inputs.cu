// The attention inputs in one pass (Backend::attention_inputs): per-head RMSNorm of q and k, RoPE,
// and k, v into the bf16 KV pages — what five launches did (two norms, two RoPEs, the KV write),
// each moving a few KB in a decode step and paying a launch and a round trip to memory for it.
//
// A warp per head of a row (q heads first, then kv heads; a kv head's warp also writes its v): the
// head is read once into registers, its sum of squares reduced across the warp, normed, rotated
// through a per-warp row in shared memory (a RoPE pair can sit in two lanes), then written back in
// place and, for k, into its page. The arithmetic is the reference's: x * inv * w for the norm,
// cos/sin correctly rounded and the rotation without FMA contraction, as rope_kernel does.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "attention_common.h"
#include "kernels.h"
#include "launch.h"
#include "reduce_device.h"

namespace ft::engine::cuda {
namespace {

constexpr int kWarps = 8;  // heads per block

struct InputsParams {
  float* q;        // [T, heads, head_dim]
  float* k;        // [T, kv_heads, head_dim]
  const float* v;  // [T, kv_heads, head_dim]
  const float* q_norm;  // null: no norm
  const float* k_norm;
  float eps;
  bool zero_centered;
  int heads;
  int kv_heads;
  int head_dim;
  int half;  // rotary_dim / 2
  bool neox;
  const float* inv_freq;
  float attention_factor;  // on cos and sin (YaRN)
  const int64_t* positions;
  int page_tokens;
  PageOffsets off;
  const int32_t* row_seq;
  const AttnSeqDev* seqs;
  std::byte* const* pages;
};

// Grid (T, blocks of kWarps heads). Lane owns dims lane + 32 c, c < NC (head_dim <= 32 NC).
template <int NC>
__global__ void __launch_bounds__(kWarps * 32) attention_inputs_kernel(const InputsParams p) {
  extern __shared__ float smem[];  // cos [half], sin [half], then a row of head_dim per warp
  const int row = int(blockIdx.x), warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int head = int(blockIdx.y) * kWarps + warp, D = p.head_dim, half = p.half;
  const bool is_q = head < p.heads, valid = head < p.heads + p.kv_heads;
  const int kvh = head - p.heads;
  float* cs = smem;
  float* buf = smem + 2 * half + warp * D;

  // Before the wait, what no kernel writes (the pass's uploads, the weights): where the row's KV
  // goes (a chain of dependent loads), the rotation's cos/sin and the norm's weights, all while
  // the q/k/v product still runs.
  const RowPlace at = row_place(row, p.row_seq, p.seqs, p.pages);
  std::byte* page = is_q ? nullptr : at.table[at.pos / p.page_tokens];
  const float pos = float(p.positions[row]);
  for (int i = int(threadIdx.x); i < half; i += int(blockDim.x)) {
    double sn, cn;
    sincos(double(__fmul_rn(p.inv_freq[i], pos)), &sn, &cn);
    cs[i] = __fmul_rn(float(cn), p.attention_factor);
    cs[half + i] = __fmul_rn(float(sn), p.attention_factor);
  }
  float wn[NC];
  if (valid && p.q_norm) {
    const float* w = is_q ? p.q_norm : p.k_norm;
#pragma unroll
    for (int c = 0; c < NC; ++c) wn[c] = lane + 32 * c < D ? w[lane + 32 * c] : 0.f;
  }
  pdl_enter();  // q, k and v are the previous kernel's

  float* x = is_q ? p.q + (std::size_t(row) * p.heads + std::size_t(head)) * std::size_t(D)
                  : p.k + (std::size_t(row) * p.kv_heads + std::size_t(max(kvh, 0))) * std::size_t(D);
  float vals[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int d = lane + 32 * c;
    vals[c] = valid && d < D ? x[d] : 0.f;
  }
  if (valid && p.q_norm) {
    float ss = 0.f;
#pragma unroll
    for (int c = 0; c < NC; ++c) ss += vals[c] * vals[c];
    const float inv = rsqrtf(warp_sum(ss) / float(D) + p.eps);
    const float base = p.zero_centered ? 1.f : 0.f;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int d = lane + 32 * c;
      if (d < D) vals[c] = vals[c] * inv * (base + wn[c]);
    }
  }
  if (valid) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int d = lane + 32 * c;
      if (d < D) buf[d] = vals[c];
    }
  }
  __syncthreads();  // cos/sin and every warp's row are in place
  if (!valid) return;

  for (int i = lane; i < half; i += 32) {
    const int ia = p.neox ? i : 2 * i, ib = p.neox ? i + half : 2 * i + 1;
    const float a = buf[ia], b = buf[ib], c = cs[i], s = cs[half + i];
    buf[ia] = __fadd_rn(__fmul_rn(a, c), -__fmul_rn(b, s));
    buf[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
  __syncwarp();

  std::uint16_t* kb = nullptr;
  std::uint16_t* vb = nullptr;
  const float* vr = nullptr;
  std::size_t slot = 0;
  if (!is_q) {
    slot = std::size_t(at.pos % p.page_tokens);
    kb = reinterpret_cast<std::uint16_t*>(page + p.off.k_base + std::size_t(kvh) * p.off.block_bytes);
    vb = reinterpret_cast<std::uint16_t*>(page + p.off.v_base + std::size_t(kvh) * p.off.block_bytes);
    vr = p.v + (std::size_t(row) * p.kv_heads + std::size_t(kvh)) * std::size_t(D);
  }
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int d = lane + 32 * c;
    if (d >= D) break;
    const float r = buf[d];
    x[d] = r;
    if (!is_q) {
      kb[slot * std::size_t(D) + std::size_t(d)] = f32_to_bf16(r);
      // V blocks are dimension-major: these stores stride by page_tokens, a small write.
      vb[std::size_t(d) * std::size_t(p.page_tokens) + slot] = f32_to_bf16(vr[d]);
    }
  }
}

}  // namespace

bool attention_inputs_fit(const KvLayout& layout, int layer, const ref::RopeSpec& rope) {
  const int D = int(layout.head_dim_at(layer)), half = int(rope.rotary_dim / 2);
  return D <= 256 && half > 0 && int(rope.head_dim) == D && layout.dtype == KvDType::kBf16;
}

bool attention_inputs(const KvLayout& layout, int layer, float* q, float* k, const float* v, int T, int heads,
                      const QkNormDev* norm, const ref::RopeSpec& rope, const float* inv_freq,
                      const int64_t* positions, const int32_t* row_seq, const AttnSeqDev* seqs,
                      std::byte* const* pages, cudaStream_t s) {
  if (!attention_inputs_fit(layout, layer, rope)) return false;
  if (T <= 0) return true;
  const int D = int(layout.head_dim_at(layer)), half = int(rope.rotary_dim / 2);
  InputsParams p{};
  p.q = q;
  p.k = k;
  p.v = v;
  if (norm) {
    p.q_norm = norm->q;
    p.k_norm = norm->k;
    p.eps = norm->eps;
    p.zero_centered = norm->zero_centered;
  }
  p.heads = heads;
  p.kv_heads = int(layout.kv_heads_at(layer));
  p.head_dim = D;
  p.half = half;
  p.neox = rope.layout == ref::RopeLayout::kNeox;
  p.inv_freq = inv_freq;
  p.attention_factor = rope.attention_factor;
  p.positions = positions;
  p.page_tokens = int(layout.page_tokens);
  p.off = page_offsets(layout, layer);
  p.row_seq = row_seq;
  p.seqs = seqs;
  p.pages = pages;
  const dim3 grid(unsigned(T), unsigned((heads + p.kv_heads + kWarps - 1) / kWarps));
  const std::size_t smem = sizeof(float) * std::size_t(2 * half + kWarps * D);
  if (D <= 64) {
    launch(attention_inputs_kernel<2>, grid, kWarps * 32, smem, s, p);
  } else if (D <= 128) {
    launch(attention_inputs_kernel<4>, grid, kWarps * 32, smem, s, p);
  } else {
    launch(attention_inputs_kernel<8>, grid, kWarps * 32, smem, s, p);
  }
  return true;
}

}  // namespace ft::engine::cuda

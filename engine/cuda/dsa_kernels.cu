// DeepSeek sparse attention's kernels (kernels.h): the indexer key's LayerNorm, the lightning
// indexer's scores over the index keys in the KV pages, and attention over each query's chosen
// positions. Each is the device twin of its CPU reference in ops_dsa.h. The top-k between the
// scores and the attention is not here: it runs on the host (CudaBackend::index_select), as
// ref::top_k_positions, because its tie rule is torch's CPU one and exact zero ties are common.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "attention_common.h"
#include "kernels.h"
#include "launch.h"
#include "reduce_device.h"

namespace ft::engine::cuda {
namespace {

// ---- LayerNorm ------------------------------------------------------------------------------------

// One block per row. The mean and the variance are sums in double, as the reference's; the rest
// is the reference's fp32 arithmetic without contraction, so a row's bits are the reference's but
// where a double sum in another order rounds to another float (next to never).
__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float* out, int dim, float eps) {
  pdl_enter();
  const float* xr = x + std::size_t(blockIdx.x) * std::size_t(dim);
  float* o = out + std::size_t(blockIdx.x) * std::size_t(dim);  // may alias xr: each thread rewrites only its own
  double sum = 0.0;
  for (int i = int(threadIdx.x); i < dim; i += int(blockDim.x)) sum += double(xr[i]);
  const float mean = float(block_sum(sum) / double(dim));
  double sum_sq = 0.0;
  for (int i = int(threadIdx.x); i < dim; i += int(blockDim.x)) {
    const double c = double(__fsub_rn(xr[i], mean));
    sum_sq += c * c;
  }
  const float var = float(block_sum(sum_sq) / double(dim));
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
  for (int i = int(threadIdx.x); i < dim; i += int(blockDim.x))
    o[i] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(xr[i], mean), inv), w[i]), b[i]);
}

// ---- Indexer scores -------------------------------------------------------------------------------

constexpr int kKeysPerBlock = 128;  // one key a thread
constexpr int kStageFloats = 8192;  // query heads staged in shared memory at a time (32 KB)
constexpr int kStageHeads = 256;    // and at most this many heads' weights

struct IndexerParams {
  const float* q;  // [T, heads, head_dim]
  const float* w;  // [T, heads]
  const IndexRowDev* rows;
  const AttnSeqDev* seqs;
  std::byte* const* pages;
  float* scores;
  int64_t base;  // the offset of scores[0]
  int row0;
  int heads;
  int head_dim;
  float scale;
  float weight_scale;
  std::size_t k_base;       // K block of slot kv_slot in a page
  std::size_t block_bytes;  // one slot's block
  int slot_dim;             // a slot's width (KvLayout::head_dim)
  int page_tokens;
  int rate;  // key j at position j * rate + rate - 1
};

// Grid: x = row of the call, y = tile of kKeysPerBlock keys. A thread holds its key (head_dim <=
// 8 G dims, bf16) in registers and the block stages the row's query heads in shared memory. The
// score is ref::indexer_scores' arithmetic step for step: each head's dot product in dimension
// order, scaled, ReLU'd (as std::max(x, 0)), weighted, added in head order, every product and sum
// rounded on its own (no FMA): the same bits as the reference, so the host's top-k sees the same
// ties.
template <int G>
__global__ void __launch_bounds__(kKeysPerBlock) indexer_scores_kernel(const IndexerParams p) {
  pdl_enter();
  __shared__ float qs[kStageFloats];
  __shared__ float ws[kStageHeads];
  const int r = p.row0 + int(blockIdx.x);
  const IndexRowDev row = p.rows[r];
  const int j0 = int(blockIdx.y) * kKeysPerBlock;
  if (j0 >= row.keys) return;  // the same for the whole block
  const int j = j0 + int(threadIdx.x);
  const bool valid = j < row.keys;
  const int D = p.head_dim;

  uint4 raw[G];
  if (valid) {
    const int64_t pos = int64_t(j) * p.rate + p.rate - 1;
    const std::byte* page = p.pages[p.seqs[row.seq].page0 + int(pos / p.page_tokens)];
    const std::size_t at = std::size_t(pos % p.page_tokens) * std::size_t(p.slot_dim);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      // A slot's width is a multiple of 8 (indexer_scores_fit): 8 dims never straddle two blocks.
      if (8 * g < D) {
        const int slot = 8 * g / p.slot_dim, d = 8 * g % p.slot_dim;
        const std::byte* block = page + p.k_base + std::size_t(slot) * p.block_bytes;
        raw[g] = __ldg(reinterpret_cast<const uint4*>(block + (at + std::size_t(d)) * 2));
      }
    }
  }

  float score = 0.f;
  const int stage = min(kStageHeads, max(1, kStageFloats / D));
  for (int h0 = 0; h0 < p.heads; h0 += stage) {
    const int hn = min(stage, p.heads - h0);
    __syncthreads();  // the previous stage is read
    const float* qr = p.q + (std::size_t(r) * std::size_t(p.heads) + std::size_t(h0)) * std::size_t(D);
    for (int i = int(threadIdx.x); i < hn * D; i += int(blockDim.x)) qs[i] = qr[i];
    for (int i = int(threadIdx.x); i < hn; i += int(blockDim.x))
      ws[i] = __fmul_rn(p.w[std::size_t(r) * std::size_t(p.heads) + std::size_t(h0 + i)], p.weight_scale);
    __syncthreads();
    if (!valid) continue;
    for (int h = 0; h < hn; ++h) {
      const float* qh = qs + h * D;
      float dot = 0.f;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        if (8 * g < D) {
          float k[8];
          unpack_bf16x8(raw[g], k);
#pragma unroll
          for (int i = 0; i < 8; ++i)
            if (8 * g + i < D) dot = __fadd_rn(dot, __fmul_rn(qh[8 * g + i], k[i]));
        }
      }
      const float a = __fmul_rn(dot, p.scale);
      score = __fadd_rn(score, __fmul_rn(ws[h], a < 0.f ? 0.f : a));
    }
  }
  if (valid) p.scores[row.offset - p.base + j] = score;
}

// ---- Sparse attention -----------------------------------------------------------------------------

constexpr int kSparseThreads = 256;
constexpr int kSparseWarps = kSparseThreads / 32;

struct SparseParams {
  const float* q;           // [T, heads, head_dim]
  float* out;               // [T, heads, head_dim]
  const int32_t* selected;  // [T, top_k]
  const int32_t* row_seq;
  const AttnSeqDev* seqs;
  std::byte* const* pages;
  PageOffsets off;
  int heads;
  int head_dim;
  int page_tokens;
  int top_k;
  float scale;
};

// Shared memory of a block, in bytes: where each chosen key's V column starts, its probability,
// the query, and each warp's share of the output.
std::size_t sparse_smem_bytes(int head_dim, int top_k) {
  return std::size_t(top_k) * (sizeof(const std::uint16_t*) + sizeof(float)) +
         std::size_t(1 + kSparseWarps) * std::size_t(head_dim) * sizeof(float);
}

// Grid: x = row, y = head (query head h reads kv head h). First the scores, a key a thread (its K
// row read in 16-byte loads); then the softmax over them in fp32, probabilities normalised before V
// as the reference; then the output, the chosen keys dealt round robin to the warps with a lane
// over dims lane + 32 c, the warps' shares added in warp order: the same result however it is
// scheduled. NC: 32-dim slices of a head (head_dim <= 32 NC).
template <int NC>
__global__ void __launch_bounds__(kSparseThreads) sparse_attention_kernel(const SparseParams p) {
  pdl_enter();
  // Dynamic shared memory, the pointers first (8-byte alignment).
  extern __shared__ float4 smem_f4[];
  auto* vcol = reinterpret_cast<const std::uint16_t**>(smem_f4);  // [top_k]: null for none
  auto* prob = reinterpret_cast<float*>(vcol + p.top_k);          // [top_k]
  float* qs = prob + p.top_k;                                     // [head_dim]
  float* share = qs + p.head_dim;                                 // [warps][head_dim]
  const int r = int(blockIdx.x), h = int(blockIdx.y);
  const int D = p.head_dim, P = p.page_tokens, K = p.top_k;
  const AttnSeqDev seq = p.seqs[p.row_seq[r]];
  if (r < seq.row0 || r >= seq.row0 + seq.rows) return;  // a row of no sequence (the same for the block)
  std::byte* const* table = p.pages + seq.page0;
  const std::size_t at = (std::size_t(r) * std::size_t(p.heads) + std::size_t(h)) * std::size_t(D);
  for (int i = int(threadIdx.x); i < D; i += int(blockDim.x)) qs[i] = p.q[at + std::size_t(i)];
  __syncthreads();

  const int32_t* sel = p.selected + std::size_t(r) * std::size_t(K);
  const std::size_t k_head = p.off.k_base + std::size_t(h) * p.off.block_bytes;
  const std::size_t v_head = p.off.v_base + std::size_t(h) * p.off.block_bytes;
  float m = -INFINITY;
  for (int i = int(threadIdx.x); i < K; i += int(blockDim.x)) {
    const int pos = sel[i];
    if (pos < 0) {
      vcol[i] = nullptr;
      continue;
    }
    const std::byte* page = table[pos / P];
    const auto* krow = reinterpret_cast<const uint4*>(page + k_head) + std::size_t(pos % P) * std::size_t(D / 8);
    float dot = 0.f;
    for (int g = 0; g < D / 8; ++g) {
      float k[8];
      unpack_bf16x8(__ldg(krow + g), k);
#pragma unroll
      for (int e = 0; e < 8; ++e) dot = fmaf(qs[8 * g + e], k[e], dot);
    }
    const float s = dot * p.scale;
    prob[i] = s;
    vcol[i] = reinterpret_cast<const std::uint16_t*>(page + v_head) + pos % P;
    m = fmaxf(m, s);
  }
  m = block_max(m);  // its barriers also publish prob and vcol
  float part = 0.f;
  for (int i = int(threadIdx.x); i < K; i += int(blockDim.x)) {
    if (!vcol[i]) continue;
    const float e = expf(prob[i] - m);
    prob[i] = e;
    part += e;
  }
  const float inv = 1.f / block_sum(part);  // inf where nothing was chosen: no key adds to the zeros then

  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), nc = D / 32;
  float acc[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) acc[c] = 0.f;
  for (int i = warp; i < K; i += kSparseWarps) {
    const std::uint16_t* col = vcol[i];
    if (!col) continue;
    const float pi = prob[i] * inv;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      // V blocks are [head_dim][page_tokens]: dim d of the key at col[d * P].
      if (c < nc) {
        const std::uint16_t v = __ldg(col + std::size_t(lane + 32 * c) * std::size_t(P));
        acc[c] = fmaf(pi, __uint_as_float(std::uint32_t(v) << 16), acc[c]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < nc) share[warp * D + lane + 32 * c] = acc[c];
  __syncthreads();
  for (int d = int(threadIdx.x); d < D; d += int(blockDim.x)) {
    float o = 0.f;
    for (int w = 0; w < kSparseWarps; ++w) o += share[w * D + d];
    p.out[at + std::size_t(d)] = o;
  }
}

}  // namespace

void layer_norm(const float* x, const float* w, const float* b, float* out, int rows, int dim, float eps,
                cudaStream_t s) {
  if (rows <= 0 || dim <= 0) return;
  const int threads = std::clamp((dim + 31) / 32 * 32, 32, 256);
  launch(layer_norm_kernel, unsigned(rows), unsigned(threads), 0, s, x, w, b, out, dim, eps);
}

bool indexer_scores_fit(const KvLayout& layout, int layer, const IndexerSpec& spec) {
  const int64_t D = layout.head_dim_at(layer);
  const int64_t slots = (int64_t(spec.head_dim) + D - 1) / std::max<int64_t>(D, 1);
  return layout.dtype == KvDType::kBf16 && spec.head_dim > 0 && int(spec.head_dim) <= kIndexMaxDim && D % 8 == 0 &&
         spec.kv_slot >= 0 && spec.kv_slot + slots <= layout.kv_heads_at(layer);
}

void indexer_scores(const KvLayout& layout, int layer, const float* q, const float* w, const IndexerSpec& spec,
                    int rate, int row0, int rows, const IndexRowDev* row_info, int64_t base, int max_keys,
                    const AttnSeqDev* seqs, std::byte* const* pages, float* scores, cudaStream_t s) {
  if (rows <= 0 || max_keys <= 0 || spec.heads == 0 || rate < 1) return;
  IndexerParams p{};
  p.q = q;
  p.w = w;
  p.rows = row_info;
  p.seqs = seqs;
  p.pages = pages;
  p.scores = scores;
  p.base = base;
  p.row0 = row0;
  p.heads = int(spec.heads);
  p.head_dim = int(spec.head_dim);
  p.scale = spec.scale;
  p.weight_scale = spec.weight_scale;
  p.k_base = layout.k_offset(layer, spec.kv_slot);
  p.block_bytes = layout.block_bytes(layer);
  p.slot_dim = int(layout.head_dim_at(layer));
  p.page_tokens = int(layout.page_tokens);
  p.rate = rate;
  const dim3 grid(unsigned(rows), unsigned((max_keys + kKeysPerBlock - 1) / kKeysPerBlock));
  if (p.head_dim <= 32) return launch(indexer_scores_kernel<4>, grid, kKeysPerBlock, 0, s, p);
  if (p.head_dim <= 64) return launch(indexer_scores_kernel<8>, grid, kKeysPerBlock, 0, s, p);
  if (p.head_dim <= 128) return launch(indexer_scores_kernel<16>, grid, kKeysPerBlock, 0, s, p);
  launch(indexer_scores_kernel<32>, grid, kKeysPerBlock, 0, s, p);
}

bool sparse_attention(const KvLayout& layout, int layer, const float* q, int T, int heads, float scale,
                      const int32_t* selected, int top_k, const int32_t* row_seq, const AttnSeqDev* seqs,
                      std::byte* const* pages, float* out, cudaStream_t s) {
  if (T <= 0 || heads <= 0) return true;
  const int D = int(layout.head_dim_at(layer));
  if (layout.dtype != KvDType::kBf16 || D % 32 != 0 || D > 256 || heads > layout.kv_heads_at(layer) || top_k < 0)
    return false;
  void (*kernel)(SparseParams) = D <= 32    ? sparse_attention_kernel<1>
                                 : D <= 64  ? sparse_attention_kernel<2>
                                 : D <= 128 ? sparse_attention_kernel<4>
                                            : sparse_attention_kernel<8>;
  const std::size_t smem = sparse_smem_bytes(D, top_k);
  if (smem > 48 * 1024) {
    // Past the default: opt in, up to what the device allows.
    int dev = 0, most = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (smem > std::size_t(most)) return false;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
  }
  SparseParams p{};
  p.q = q;
  p.out = out;
  p.selected = selected;
  p.row_seq = row_seq;
  p.seqs = seqs;
  p.pages = pages;
  p.off = page_offsets(layout, layer);
  p.heads = heads;
  p.head_dim = D;
  p.page_tokens = int(layout.page_tokens);
  p.top_k = top_k;
  p.scale = scale;
  launch(kernel, dim3(unsigned(T), unsigned(heads)), unsigned(kSparseThreads), smem, s, p);
  return true;
}

}  // namespace ft::engine::cuda

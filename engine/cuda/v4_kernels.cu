// DeepSeek-V4's kernels (v4_kernels.h). Each mirrors its CPU reference line by line: fp32 arithmetic
// in the reference's order without contraction where the reference's order is sequential, sums in
// double where the reference sums in double. Simple parallel shapes (a block a token, a query row
// and head, or a compressed window): these ops are a small part of a layer's time next to its
// products and experts.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "attention_common.h"
#include "launch.h"
#include "reduce_device.h"
#include "v4_kernels.h"

namespace ft::engine::cuda {
namespace {

__device__ __forceinline__ float bf16_at(const std::uint16_t* p) { return __uint_as_float(std::uint32_t(*p) << 16); }

__device__ __forceinline__ float sigmoid(float v) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-v))); }

// cos and sin of inv_freq * pos as rope_tail takes them: the angle rounded to fp32 first, then its
// cosine and sine correctly rounded (through double, as the rope kernel computes them).
__device__ __forceinline__ void tail_trig(float inv_freq, int64_t pos, float& c, float& s) {
  double sn, cs;
  sincos(double(__fmul_rn(inv_freq, float(pos))), &sn, &cs);
  c = float(cs);
  s = float(sn);
}

// rope_rotate's GPT-J pair turn of v[2i], v[2i + 1] by (c, s).
__device__ __forceinline__ void turn_pair(float* v, int i, float c, float s) {
  const float a = v[2 * i], b = v[2 * i + 1];
  v[2 * i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  v[2 * i + 1] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
}

// ---- Hyper-connections ----------------------------------------------------------------------------

constexpr int kHyperThreads = 256;

struct HyperParams {
  const float* h;  // [T, N, D]
  const float* fn;
  const float* base;
  const float* scale;
  float* x;     // [T, D]
  float* post;  // [T, N] (not for the head)
  float* comb;  // [T, N, N] (not for the head)
  int N;
  int D;
  int rows;  // fn's rows: (2 + N) N, or N for the head
  int iters;
  float eps;
  float norm_eps;
  bool head;
};

// The reference's sinkhorn on comb [N, N] (one thread): row softmax + eps, a column normalisation,
// then (iters - 1) rounds of rows then columns, every divisor (sum + eps).
__device__ void sinkhorn(float* comb, int N, int iters, float eps) {
  for (int j = 0; j < N; ++j) {
    float* row = comb + j * N;
    float max = row[0];
    for (int k = 1; k < N; ++k) max = fmaxf(max, row[k]);
    float sum = 0.0f;
    for (int k = 0; k < N; ++k) {
      row[k] = expf(__fsub_rn(row[k], max));
      sum = __fadd_rn(sum, row[k]);
    }
    for (int k = 0; k < N; ++k) row[k] = __fadd_rn(__fdiv_rn(row[k], sum), eps);
  }
  for (int i = 0; i < max(iters, 1); ++i) {
    if (i > 0) {  // rows, from the second round on
      for (int j = 0; j < N; ++j) {
        float sum = 0.0f;
        for (int k = 0; k < N; ++k) sum = __fadd_rn(sum, comb[j * N + k]);
        for (int k = 0; k < N; ++k) comb[j * N + k] = __fdiv_rn(comb[j * N + k], __fadd_rn(sum, eps));
      }
    }
    for (int k = 0; k < N; ++k) {  // columns
      float sum = 0.0f;
      for (int j = 0; j < N; ++j) sum = __fadd_rn(sum, comb[j * N + k]);
      for (int j = 0; j < N; ++j) comb[j * N + k] = __fdiv_rn(comb[j * N + k], __fadd_rn(sum, eps));
    }
  }
}

// One block a token: the unweighted RMS norm's sum of squares (double), fn's rows over the normed
// values (a warp a row, double), then thread 0 makes pre (and post, comb with Sinkhorn) from the
// mix, and the block collapses the streams with pre, streams in order in fp32.
__global__ void __launch_bounds__(kHyperThreads) hc_mix_kernel(const HyperParams p) {
  pdl_enter();
  extern __shared__ float hsm[];  // mix [rows], pre [N], comb [N, N]
  float* mix = hsm;
  float* pre = mix + p.rows;
  float* cm = pre + p.N;
  const int N = p.N, D = p.D, n = N * D;
  const std::size_t t = blockIdx.x;
  const float* ht = p.h + t * std::size_t(n);

  double ss = 0.0;
  for (int i = int(threadIdx.x); i < n; i += int(blockDim.x)) ss += double(ht[i]) * double(ht[i]);
  ss = block_sum(ss);
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(float(ss / double(n)), p.norm_eps)));

  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), warps = int(blockDim.x >> 5);
  for (int r = warp; r < p.rows; r += warps) {
    const float* w = p.fn + std::size_t(r) * std::size_t(n);
    double acc = 0.0;
    for (int i = lane; i < n; i += 32) acc += double(w[i]) * double(__fmul_rn(ht[i], inv));
    acc = warp_sum(acc);
    if (lane == 0) mix[r] = float(acc);
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    for (int s = 0; s < N; ++s) pre[s] = __fadd_rn(sigmoid(__fadd_rn(__fmul_rn(mix[s], p.scale[0]), p.base[s])), p.eps);
    if (!p.head) {
      float* post = p.post + t * std::size_t(N);
      float* comb = p.comb + t * std::size_t(N * N);
      for (int s = 0; s < N; ++s)
        post[s] = __fmul_rn(2.0f, sigmoid(__fadd_rn(__fmul_rn(mix[N + s], p.scale[1]), p.base[N + s])));
      for (int i = 0; i < N * N; ++i) cm[i] = __fadd_rn(__fmul_rn(mix[2 * N + i], p.scale[2]), p.base[2 * N + i]);
      sinkhorn(cm, N, p.iters, p.eps);
      for (int i = 0; i < N * N; ++i) comb[i] = cm[i];
    }
  }
  __syncthreads();

  float* x = p.x + t * std::size_t(D);
  for (int d = int(threadIdx.x); d < D; d += int(blockDim.x)) {
    float acc = 0.0f;
    for (int s = 0; s < N; ++s) acc = __fadd_rn(acc, __fmul_rn(pre[s], ht[std::size_t(s) * std::size_t(D) + d]));
    x[d] = acc;
  }
}

// A thread a (token, dim) column: its N stream values read first (h_new may be h), then each new
// stream k = post[k] * out + sum_j comb[j, k] * h[j], j in order.
__global__ void hc_post_kernel(const float* h, const float* out, const float* post, const float* comb, int T, int N,
                               int D, float* h_new) {
  pdl_enter();
  const std::size_t idx = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= std::size_t(T) * std::size_t(D)) return;
  const std::size_t t = idx / std::size_t(D), d = idx % std::size_t(D);
  const float* ht = h + t * std::size_t(N) * std::size_t(D);
  const float* ct = comb + t * std::size_t(N * N);
  float col[kHyperMaxStreams];
#pragma unroll
  for (int j = 0; j < kHyperMaxStreams; ++j)
    if (j < N) col[j] = ht[std::size_t(j) * std::size_t(D) + d];
  const float o = out[t * std::size_t(D) + d];
  float* nt = h_new + t * std::size_t(N) * std::size_t(D);
  for (int k = 0; k < N; ++k) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kHyperMaxStreams; ++j)
      if (j < N) acc = __fadd_rn(acc, __fmul_rn(ct[j * N + k], col[j]));
    nt[std::size_t(k) * std::size_t(D) + d] = __fadd_rn(__fmul_rn(post[t * std::size_t(N) + std::size_t(k)], o), acc);
  }
}

// ---- Compressors ----------------------------------------------------------------------------------

constexpr int kCompressThreads = 128;

struct CompressParams {
  const float* kv;    // [T, row]
  const float* gate;  // [T, row]
  const CompressorSeqDev* seqs;
  const int32_t* row_seq;
  const float* bias;      // [m, row]
  const float* norm;      // [width]
  const float* inv_freq;  // [rope_dims / 2]
  float* entries;         // [T, width]
  int width;
  int rate;
  int row;   // series * width
  int ring;  // ring_tokens
  int rope_dims;
  bool overlap;
  float eps;
};

// The raw row of position q of a sequence: this call's input from pos0 on, the ring before it.
__device__ __forceinline__ const float* raw_row(const float* in, const float* ring, const CompressorSeqDev& seq,
                                                int64_t q, int row, int R) {
  if (q >= seq.pos0) return in + (std::size_t(seq.row0) + std::size_t(q - seq.pos0)) * std::size_t(row);
  return ring + std::size_t(q % int64_t(R)) * std::size_t(seq.ld);
}

// Slot s of the window starting at ws: its kv value and its gate plus bias for channel c (the
// reference's close_window: CSA's carried Ca of the window before first, then the window's own
// series, Cb for CSA).
struct Slot {
  float kv, z;
};
__device__ __forceinline__ Slot window_slot(const CompressParams& p, const CompressorSeqDev& seq, int64_t ws,
                                            bool carried, int s, int c) {
  const int m = p.rate;
  if (carried && s < m) {
    const int64_t q = ws - m + s;
    const float kv = raw_row(p.kv, seq.kv, seq, q, p.row, p.ring)[c];
    const float g = raw_row(p.gate, seq.gate, seq, q, p.row, p.ring)[c];
    return {kv, __fadd_rn(g, p.bias[std::size_t(s) * std::size_t(p.row) + std::size_t(c)])};
  }
  const int j = carried ? s - m : s;
  const int own = p.overlap ? p.width : 0;
  const int64_t q = ws + j;
  const float kv = raw_row(p.kv, seq.kv, seq, q, p.row, p.ring)[own + c];
  const float g = raw_row(p.gate, seq.gate, seq, q, p.row, p.ring)[own + c];
  return {kv, __fadd_rn(g, p.bias[std::size_t(j) * std::size_t(p.row) + std::size_t(own + c)])};
}

// One block a row of the call: zeros where the row's token closes no window; else the window's
// entry: per channel the softmax of its slots' gates (max, sum, then each slot's kv times its
// normalised weight, slots in order), the kv_norm (sum of squares in double), the rope at the
// window's start.
__global__ void __launch_bounds__(kCompressThreads) v4_compress_kernel(const CompressParams p) {
  pdl_enter();
  extern __shared__ float entry[];  // [width]
  const int r = int(blockIdx.x), W = p.width;
  const int si = p.row_seq[r];
  if (si < 0) return;  // a row of no sequence: nothing of it is read
  const CompressorSeqDev seq = p.seqs[si];
  float* out = p.entries + std::size_t(r) * std::size_t(W);
  const int64_t pos = seq.pos0 + (r - seq.row0);
  const int m = p.rate;
  if ((pos + 1) % m != 0) {
    for (int c = int(threadIdx.x); c < W; c += int(blockDim.x)) out[c] = 0.0f;
    return;
  }
  const int64_t w = (pos + 1) / m - 1, ws = w * m;
  const bool carried = p.overlap && w > 0;
  const int slots = carried ? 2 * m : m;
  for (int c = int(threadIdx.x); c < W; c += int(blockDim.x)) {
    float max = window_slot(p, seq, ws, carried, 0, c).z;
    for (int s = 1; s < slots; ++s) max = fmaxf(max, window_slot(p, seq, ws, carried, s, c).z);
    float sum = 0.0f;
    for (int s = 0; s < slots; ++s)
      sum = __fadd_rn(sum, expf(__fsub_rn(window_slot(p, seq, ws, carried, s, c).z, max)));
    float acc = 0.0f;
    for (int s = 0; s < slots; ++s) {
      const Slot sl = window_slot(p, seq, ws, carried, s, c);
      acc = __fadd_rn(acc, __fmul_rn(sl.kv, __fdiv_rn(expf(__fsub_rn(sl.z, max)), sum)));
    }
    entry[c] = acc;
  }
  double ss = 0.0;
  for (int c = int(threadIdx.x); c < W; c += int(blockDim.x)) ss += double(entry[c]) * double(entry[c]);
  ss = block_sum(ss);
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(float(ss / double(W)), p.eps)));
  for (int c = int(threadIdx.x); c < W; c += int(blockDim.x)) entry[c] = __fmul_rn(__fmul_rn(entry[c], inv), p.norm[c]);
  __syncthreads();
  float* tail = entry + (W - p.rope_dims);
  for (int i = int(threadIdx.x); i < p.rope_dims / 2; i += int(blockDim.x)) {
    float c, s;
    tail_trig(p.inv_freq[i], ws, c, s);
    turn_pair(tail, i, c, s);
  }
  __syncthreads();
  for (int c = int(threadIdx.x); c < W; c += int(blockDim.x)) out[c] = entry[c];
}

// The rings after the entries: each sequence's last ring_tokens() rows of this call (token p at ring
// row p % ring). After the entries kernel, which reads the rows these overwrite.
__global__ void __launch_bounds__(kCompressThreads) v4_ring_kernel(const CompressParams p) {
  pdl_enter();
  const int r = int(blockIdx.x);
  const int si = p.row_seq[r];
  if (si < 0) return;
  const CompressorSeqDev seq = p.seqs[si];
  const int t = r - seq.row0;
  if (seq.rows > p.ring && t < seq.rows - p.ring) return;
  const int64_t q = seq.pos0 + t;
  float* dk = seq.kv + std::size_t(q % int64_t(p.ring)) * std::size_t(seq.ld);
  float* dg = seq.gate + std::size_t(q % int64_t(p.ring)) * std::size_t(seq.ld);
  const float* sk = p.kv + std::size_t(r) * std::size_t(p.row);
  const float* sg = p.gate + std::size_t(r) * std::size_t(p.row);
  for (int c = int(threadIdx.x); c < p.row; c += int(blockDim.x)) {
    dk[c] = sk[c];
    dg[c] = sg[c];
  }
}

// ---- Attention ------------------------------------------------------------------------------------

constexpr int kAttnThreads = 256;

struct V4AttnParams {
  const float* q;  // [T, heads, head_dim]
  float* out;      // [T, heads, head_dim]
  const float* sinks;
  const float* inv_freq;
  const int32_t* picks;  // [T, top_k] or null
  const int32_t* row_seq;
  const AttnSeqDev* seqs;
  std::byte* const* pages;
  std::size_t k_base;  // slot 0's K block (the window's kv rows)
  std::size_t v_base;  // slot 0's V block (the compressed entries)
  int heads;
  int head_dim;
  int rope_dims;
  int page_tokens;
  int top_k;
  int window;
  int rate;
  int max_keys;
  float scale;
};

std::size_t v4_attention_smem(int head_dim, int max_keys) {
  return std::size_t(max_keys) * (sizeof(const std::uint16_t*) + sizeof(float)) +
         2 * std::size_t(head_dim) * sizeof(float);
}

// Grid: x = row, y = head. The row's keys in the reference's order (the window oldest first, then the
// visible entries; a -1 pick is a null key, skipped everywhere as the reference drops it), each a
// bf16 run: a K row (dims consecutive) for the window, a V column (dims page_tokens apart) for an
// entry. Scores a key a thread, dims in order; the max with the sink; the exponentials; their sum by
// one thread, sink first then keys in order; the output a dim a thread, keys in order; then the
// inverse rope of the tail at the row's position.
__global__ void __launch_bounds__(kAttnThreads) v4_attention_kernel(const V4AttnParams p) {
  pdl_enter();
  extern __shared__ float4 smem_f4[];
  auto* key = reinterpret_cast<const std::uint16_t**>(smem_f4);  // [max_keys]
  float* prob = reinterpret_cast<float*>(key + p.max_keys);      // [max_keys]
  float* qs = prob + p.max_keys;                                 // [head_dim]
  float* os = qs + p.head_dim;                                   // [head_dim]
  __shared__ float inv_sum;
  const int r = int(blockIdx.x), h = int(blockIdx.y);
  const int D = p.head_dim, P = p.page_tokens;
  const AttnSeqDev seq = p.seqs[p.row_seq[r]];
  if (r < seq.row0 || r >= seq.row0 + seq.rows) return;  // a row of no sequence (the same for the block)
  std::byte* const* table = p.pages + seq.page0;
  const int pos = seq.pos0 + (r - seq.row0);
  const int first = attn_first_key(pos, p.window, 0);
  const int nw = pos - first + 1;
  const int end = seq.pos0 + seq.rows;
  const int n_entries = p.rate > 0 ? end / p.rate : 0;
  const int n_visible = p.picks ? p.top_k : (p.rate > 0 ? min((pos + 1) / p.rate, n_entries) : 0);
  const int nk = min(nw + n_visible, p.max_keys);  // the host sized max_keys for every row

  const std::size_t at = (std::size_t(r) * std::size_t(p.heads) + std::size_t(h)) * std::size_t(D);
  for (int i = int(threadIdx.x); i < D; i += int(blockDim.x)) qs[i] = p.q[at + std::size_t(i)];
  for (int j = int(threadIdx.x); j < nk; j += int(blockDim.x)) {
    if (j < nw) {
      const int kp = first + j;
      key[j] = reinterpret_cast<const std::uint16_t*>(table[kp / P] + p.k_base) + std::size_t(kp % P) * std::size_t(D);
      continue;
    }
    const int i = j - nw;
    const int e = p.picks ? p.picks[std::size_t(r) * std::size_t(p.top_k) + std::size_t(i)] : i;
    if (e < 0 || e >= n_entries) {
      key[j] = nullptr;
      continue;
    }
    const int kp = e * p.rate + p.rate - 1;
    key[j] = reinterpret_cast<const std::uint16_t*>(table[kp / P] + p.v_base) + kp % P;
  }
  __syncthreads();

  float m = p.sinks ? p.sinks[h] : -INFINITY;
  for (int j = int(threadIdx.x); j < nk; j += int(blockDim.x)) {
    const std::uint16_t* k = key[j];
    if (!k) continue;
    const std::size_t stride = j < nw ? 1 : std::size_t(P);
    float dot = 0.0f;
    for (int c = 0; c < D; ++c) dot = __fadd_rn(dot, __fmul_rn(qs[c], bf16_at(k + std::size_t(c) * stride)));
    const float s = __fmul_rn(dot, p.scale);
    prob[j] = s;
    m = fmaxf(m, s);
  }
  m = block_max(m);  // its barriers also publish prob
  for (int j = int(threadIdx.x); j < nk; j += int(blockDim.x))
    if (key[j]) prob[j] = expf(__fsub_rn(prob[j], m));
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = p.sinks ? expf(__fsub_rn(p.sinks[h], m)) : 0.0f;
    for (int j = 0; j < nk; ++j)
      if (key[j]) sum = __fadd_rn(sum, prob[j]);
    inv_sum = __fdiv_rn(1.0f, sum);
  }
  __syncthreads();
  const float inv = inv_sum;
  for (int c = int(threadIdx.x); c < D; c += int(blockDim.x)) {
    float acc = 0.0f;
    for (int j = 0; j < nk; ++j) {
      const std::uint16_t* k = key[j];
      if (!k) continue;
      const std::size_t stride = j < nw ? 1 : std::size_t(P);
      acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(prob[j], inv), bf16_at(k + std::size_t(c) * stride)));
    }
    os[c] = acc;
  }
  __syncthreads();
  float* tail = os + (D - p.rope_dims);
  for (int i = int(threadIdx.x); i < p.rope_dims / 2; i += int(blockDim.x)) {
    float c, s;
    tail_trig(p.inv_freq[i], pos, c, s);
    turn_pair(tail, i, c, -s);  // the inverse turn: HF's cos, -sin
  }
  __syncthreads();
  for (int c = int(threadIdx.x); c < D; c += int(blockDim.x)) p.out[at + std::size_t(c)] = os[c];
}

// Opts a kernel into `smem` bytes of dynamic shared memory past the default 48 KB, up to what the
// device allows: false where it cannot.
bool allow_smem(const void* kernel, std::size_t smem) {
  if (smem <= 48 * 1024) return true;
  int dev = 0, most = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (smem > std::size_t(most)) return false;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace

// ---- Host side ------------------------------------------------------------------------------------

bool hyper_fits(const HyperSpec& spec) {
  const std::size_t smem = (spec.mix_rows() + spec.streams + spec.streams * spec.streams) * sizeof(float);
  return spec.streams > 0 && int(spec.streams) <= kHyperMaxStreams && spec.dim > 0 && smem <= 48 * 1024;
}

namespace {

void hc_mix(const float* h, const float* fn, const float* base, const float* scale, int T, const HyperSpec& spec,
            bool head, float* x, float* post, float* comb, cudaStream_t s) {
  if (T <= 0) return;
  HyperParams p{};
  p.h = h;
  p.fn = fn;
  p.base = base;
  p.scale = scale;
  p.x = x;
  p.post = post;
  p.comb = comb;
  p.N = int(spec.streams);
  p.D = int(spec.dim);
  p.rows = head ? p.N : int(spec.mix_rows());
  p.iters = int(spec.sinkhorn_iters);
  p.eps = spec.eps;
  p.norm_eps = spec.norm_eps;
  p.head = head;
  const std::size_t smem = std::size_t(p.rows + p.N + p.N * p.N) * sizeof(float);
  launch(hc_mix_kernel, unsigned(T), unsigned(kHyperThreads), smem, s, p);
}

}  // namespace

void hc_pre(const float* h, const float* fn, const float* base, const float* scale, int T, const HyperSpec& spec,
            float* x, float* post, float* comb, cudaStream_t s) {
  hc_mix(h, fn, base, scale, T, spec, false, x, post, comb, s);
}

void hc_head(const float* h, const float* fn, const float* base, const float* scale, int T, const HyperSpec& spec,
             float* y, cudaStream_t s) {
  hc_mix(h, fn, base, scale, T, spec, true, y, nullptr, nullptr, s);
}

void hc_post(const float* h, const float* out, const float* post, const float* comb, int T, const HyperSpec& spec,
             float* h_new, cudaStream_t s) {
  const std::size_t n = std::size_t(T) * spec.dim;
  if (n == 0) return;
  constexpr unsigned kThreads = 256;
  launch(hc_post_kernel, unsigned((n + kThreads - 1) / kThreads), kThreads, 0, s, h, out, post, comb, T,
         int(spec.streams), int(spec.dim), h_new);
}

void v4_compress(const CompressorSpec& spec, const CompressorParams& params, const float* kv, const float* gate,
                 const CompressorSeqDev* seqs, const int32_t* row_seq, int T, float* entries, cudaStream_t s) {
  if (T <= 0) return;
  CompressParams p{};
  p.kv = kv;
  p.gate = gate;
  p.seqs = seqs;
  p.row_seq = row_seq;
  p.bias = params.position_bias;
  p.norm = params.norm_weight;
  p.inv_freq = params.inv_freq;
  p.entries = entries;
  p.width = int(spec.width);
  p.rate = int(spec.rate);
  p.row = int(spec.row());
  p.ring = int(spec.ring_tokens());
  p.rope_dims = int(spec.rope_dims);
  p.overlap = spec.overlap;
  p.eps = spec.norm_eps;
  launch(v4_compress_kernel, unsigned(T), unsigned(kCompressThreads), spec.width * sizeof(float), s, p);
  launch(v4_ring_kernel, unsigned(T), unsigned(kCompressThreads), 0, s, p);
}

bool v4_attention(const KvLayout& layout, int layer, const float* q, int T, const V4AttentionSpec& spec,
                  const float* sinks, const float* inv_freq, const int32_t* picks, int top_k, const int32_t* row_seq,
                  const AttnSeqDev* seqs, std::byte* const* pages, int max_keys, float* out, cudaStream_t s) {
  if (T <= 0 || spec.heads == 0) return true;
  const int D = int(layout.head_dim_at(layer));
  if (layout.dtype != KvDType::kBf16 || std::size_t(D) != spec.head_dim || spec.rope_dims > spec.head_dim ||
      spec.rope_dims % 2 != 0 || max_keys <= 0)
    return false;
  const std::size_t smem = v4_attention_smem(D, max_keys);
  if (!allow_smem(reinterpret_cast<const void*>(v4_attention_kernel), smem)) return false;
  V4AttnParams p{};
  p.q = q;
  p.out = out;
  p.sinks = sinks;
  p.inv_freq = inv_freq;
  p.picks = picks;
  p.row_seq = row_seq;
  p.seqs = seqs;
  p.pages = pages;
  p.k_base = layout.k_offset(layer, 0);
  p.v_base = layout.v_offset(layer, 0);
  p.heads = int(spec.heads);
  p.head_dim = D;
  p.rope_dims = int(spec.rope_dims);
  p.page_tokens = int(layout.page_tokens);
  p.top_k = top_k;
  p.window = int(spec.window);
  p.rate = int(spec.rate);
  p.max_keys = max_keys;
  p.scale = spec.scale;
  launch(v4_attention_kernel, dim3(unsigned(T), unsigned(spec.heads)), unsigned(kAttnThreads), smem, s, p);
  return true;
}

}  // namespace ft::engine::cuda

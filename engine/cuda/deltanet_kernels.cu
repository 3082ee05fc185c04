// Gated DeltaNet on the GPU: the device twins of ref::deltanet_unfuse and of ReferenceBackend::deltanet
// (ops_deltanet.h). The layer runs as four kernels on the caller's stream:
//   1. conv1d_silu_kernel:  causal depthwise conv + SiLU of q|k|v with the carried conv state
//   2. prepare_kernel:      L2-normalise q and k in place (q also scaled by 1/sqrt(dk)) and compute
//                           the per-token decay exp(g) and write strength beta
//   3. delta_rule_kernel:   the recurrent gated delta rule, state held in registers across tokens
//   4. gated_norm_kernel:   the gated RMSNorm with z, in place on out
// Every reduction has a fixed order and every output one writer, so results are deterministic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "kernels.h"
#include "launch.h"

namespace ft::engine::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kL2NormEps = 1e-6f;  // HF l2norm in the delta rule (dn::kL2NormEps)

// ---- Shapes --------------------------------------------------------------------------------------

// DeltaNetDims as the ints the kernels index with (the layer sizes are far below 2^31).
struct Shape {
  int nk = 0;        // key heads
  int nv = 0;        // value heads
  int dk = 0;        // head_k_dim
  int dv = 0;        // head_v_dim
  int v_per_k = 0;   // value heads per key head
  int v_tiled = 0;   // value head h reads key head h % nk (else h / v_per_k): DeltaNetDims::v_heads_tiled
  int taps = 0;      // conv kernel K
  int key_dim = 0;   // nk * dk
  int value_dim = 0; // nv * dv
  int conv_dim = 0;  // 2 * key_dim + value_dim
};

__device__ __forceinline__ int key_head(const Shape& sh, int h) { return sh.v_tiled ? h % sh.nk : h / sh.v_per_k; }

Shape shape_of(const ref::DeltaNetDims& d) {
  Shape s;
  s.nk = static_cast<int>(d.num_k_heads);
  s.nv = static_cast<int>(d.num_v_heads);
  s.dk = static_cast<int>(d.head_k_dim);
  s.dv = static_cast<int>(d.head_v_dim);
  s.v_per_k = static_cast<int>(d.v_per_k());
  s.v_tiled = d.v_heads_tiled ? 1 : 0;
  s.taps = static_cast<int>(d.conv_kernel);
  s.key_dim = static_cast<int>(d.key_dim());
  s.value_dim = static_cast<int>(d.value_dim());
  s.conv_dim = static_cast<int>(d.conv_dim());
  return s;
}

// The scratch of one deltanet call, indexed by global row like qkv.
struct Work {
  float* mixed = nullptr;  // [T, conv_dim]: conv output; q and k normalised in place
  float* decay = nullptr;  // [T, nv]: exp(g)
  float* beta = nullptr;   // [T, nv]
};

Work carve_work(float* work, const ref::DeltaNetDims& d, int T) {
  const std::size_t rows = static_cast<std::size_t>(T);
  Work w;
  w.mixed = work;
  w.decay = w.mixed + rows * d.conv_dim();
  w.beta = w.decay + rows * d.num_v_heads;
  return w;
}

unsigned ceil_div(long long n, long long d) { return static_cast<unsigned>((n + d - 1) / d); }

// ---- Device helpers ------------------------------------------------------------------------------

// Accurate expf/log1pf rather than the fast intrinsics: these feed a recurrence over thousands of
// tokens and are checked against the CPU reference.
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// torch softplus (beta 1, threshold 20).
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Sum over the whole warp. A xor butterfly adds the same pair of operands on both sides of each
// exchange, so every lane ends with a bit-identical total.
__device__ __forceinline__ float warp_sum(float x) {
  for (int off = kWarp / 2; off > 0; off >>= 1) x += __shfl_xor_sync(kFullMask, x, off);
  return x;
}

// Sum over the kGroup consecutive lanes sharing lane / kGroup (bit-identical on all of them).
template <int kGroup>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int off = kGroup / 2; off > 0; off >>= 1) x += __shfl_xor_sync(kFullMask, x, off);
  return x;
}

// ---- Unfuse (qwen3_next) -------------------------------------------------------------------------

constexpr int kUnfuseThreads = 256;

// One thread per element of a [qkvz | ba] row: reads are coalesced, each element has one
// destination (HF fix_query_key_value_ordering).
__global__ void __launch_bounds__(kUnfuseThreads)
    unfuse_kernel(Shape sh, const float* __restrict__ qkvz, const float* __restrict__ ba, int T,
                  float* __restrict__ qkv, float* __restrict__ z, float* __restrict__ b, float* __restrict__ a) {
  pdl_enter();
  const int r = sh.v_per_k, dk = sh.dk, rdv = r * sh.dv;
  const int qkvz_group = 2 * dk + 2 * rdv, ba_group = 2 * r;
  const int qkvz_dim = sh.nk * qkvz_group, ba_dim = sh.nk * ba_group;
  const long long width = qkvz_dim + ba_dim;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= width * T) return;
  const long long t = i / width;
  int col = static_cast<int>(i - t * width);

  if (col < qkvz_dim) {
    const float x = qkvz[t * qkvz_dim + col];
    const int g = col / qkvz_group, o = col % qkvz_group;
    float* qkv_row = qkv + t * sh.conv_dim;
    if (o < dk) qkv_row[g * dk + o] = x;                                               // q of key head g
    else if (o < 2 * dk) qkv_row[sh.key_dim + g * dk + (o - dk)] = x;                  // k of key head g
    else if (o < 2 * dk + rdv) qkv_row[2 * sh.key_dim + g * rdv + (o - 2 * dk)] = x;  // v heads g*r..
    else z[t * sh.value_dim + g * rdv + (o - 2 * dk - rdv)] = x;                      // z heads g*r..
    return;
  }
  col -= qkvz_dim;
  const float x = ba[t * ba_dim + col];
  const int g = col / ba_group, o = col % ba_group;
  if (o < r) b[t * sh.nv + g * r + o] = x;
  else a[t * sh.nv + g * r + (o - r)] = x;
}

// ---- 1. Causal conv1d + SiLU ---------------------------------------------------------------------

constexpr int kConvThreads = 128;  // channels per block
constexpr int kConvRows = 16;      // rows per thread (at least K-1, see conv_tile_rows)

// Only the first row tile reads the old state (its window reaches before row 0), so making every
// tile at least K-1 rows long lets that tile's threads also write the new state without a race.
int conv_tile_rows(int taps) { return std::max(kConvRows, taps - 1); }

// Grid (row tiles, channel blocks, sequences); one thread per (channel, row tile). Taps are summed
// in the reference's order (j = 0 .. K-1, state columns first). kTaps > 0 fixes K at compile time
// (the models' K = 4) so the tap loop unrolls; 0 reads it from `taps`.
template <int kTaps>
__global__ void __launch_bounds__(kConvThreads)
    conv1d_silu_kernel(const float* __restrict__ qkv, const float* __restrict__ weight,
                       const DeltaNetSeqDev* __restrict__ seqs, int channels, int taps, int tile,
                       float* __restrict__ mixed) {
  pdl_enter();
  const DeltaNetSeqDev seq = seqs[blockIdx.z];
  const int c = static_cast<int>(blockIdx.y) * kConvThreads + static_cast<int>(threadIdx.x);
  const int t0 = static_cast<int>(blockIdx.x) * tile;
  if (c >= channels || t0 >= seq.rows) return;
  const int K = kTaps > 0 ? kTaps : taps;
  const int S = K - 1;  // state columns
  const float* w = weight + static_cast<std::size_t>(c) * K;
  const float* x = qkv + static_cast<std::size_t>(seq.row0) * channels + c;  // channel c, row 0
  float* state = seq.conv + static_cast<std::size_t>(c) * S;

  // Position p of x_ext = [S state columns ; the sequence's rows].
  auto tap = [&](int p) { return p < S ? state[p] : x[static_cast<std::size_t>(p - S) * channels]; };

  const int t_end = min(t0 + tile, static_cast<int>(seq.rows));
#pragma unroll 4  // independent rows: keeps several rows' loads in flight per thread
  for (int t = t0; t < t_end; ++t) {
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < K; ++j) acc = fmaf(w[j], tap(t + j), acc);
    mixed[static_cast<std::size_t>(seq.row0 + t) * channels + c] = silu(acc);
  }
  if (blockIdx.x != 0) return;
  // New state = x_ext[rows .. rows+S-1]; reading index rows+i > i, so the in-place shift is safe.
  for (int i = 0; i < S; ++i) state[i] = tap(seq.rows + i);
}

void launch_conv1d_silu(const Shape& sh, const float* qkv, const float* weight, const DeltaNetSeqDev* seqs, int nseq,
                        int max_rows, float* mixed, cudaStream_t s) {
  const int tile = conv_tile_rows(sh.taps);
  const dim3 grid(ceil_div(max_rows, tile), ceil_div(sh.conv_dim, kConvThreads), static_cast<unsigned>(nseq));
  if (sh.taps == 4)
    launch(conv1d_silu_kernel<4>, grid, kConvThreads, 0, s, qkv, weight, seqs, sh.conv_dim, sh.taps, tile, mixed);
  else
    launch(conv1d_silu_kernel<0>, grid, kConvThreads, 0, s, qkv, weight, seqs, sh.conv_dim, sh.taps, tile, mixed);
}

// ---- 2. q/k normalisation and gates --------------------------------------------------------------

constexpr int kPrepWarps = 8;

// x = x / sqrt(sum(x^2) + eps) * scale over n floats, by one warp.
__device__ void l2_normalize_warp(float* x, int n, float scale, int lane) {
  float ss = 0.f;
  for (int i = lane; i < n; i += kWarp) ss = fmaf(x[i], x[i], ss);
  const float inv = (1.0f / sqrtf(warp_sum(ss) + kL2NormEps)) * scale;
  for (int i = lane; i < n; i += kWarp) x[i] *= inv;
}

// Grid (rows, sequences, groups of kPrepWarps q/k vectors): one warp per (token, vector), so that
// a decode step is a single round of loads. Done once per token here rather than in the delta
// rule, where every warp of a head would repeat it on its critical path.
__global__ void __launch_bounds__(kPrepWarps * kWarp)
    prepare_kernel(Shape sh, const float* __restrict__ a, const float* __restrict__ b,
                   const float* __restrict__ A_log, const float* __restrict__ dt_bias,
                   const DeltaNetSeqDev* __restrict__ seqs, float* __restrict__ mixed, float* __restrict__ decay,
                   float* __restrict__ beta) {
  pdl_enter();
  const DeltaNetSeqDev seq = seqs[blockIdx.y];
  if (static_cast<int>(blockIdx.x) >= seq.rows) return;
  const std::size_t row = static_cast<std::size_t>(seq.row0) + blockIdx.x;

  // q heads then k heads are contiguous: vector i starts at channel i * dk.
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int vec = static_cast<int>(blockIdx.z) * kPrepWarps + warp;
  if (vec < 2 * sh.nk) {
    const float scale = vec < sh.nk ? 1.0f / sqrtf(static_cast<float>(sh.dk)) : 1.0f;
    l2_normalize_warp(mixed + row * sh.conv_dim + static_cast<std::size_t>(vec) * sh.dk, sh.dk, scale, lane);
  }
  if (blockIdx.z != 0) return;
  // g = -exp(A_log) * softplus(a + dt_bias); the rule only ever uses exp(g).
  for (int h = static_cast<int>(threadIdx.x); h < sh.nv; h += kPrepWarps * kWarp) {
    const std::size_t i = row * sh.nv + h;
    decay[i] = expf(-expf(A_log[h]) * softplus(a[i] + dt_bias[h]));
    beta[i] = sigmoid(b[i]);
  }
}

// ---- 3. Gated delta rule (recurrent) -------------------------------------------------------------
//
// Per value head and token: S *= exp(g); delta = (v - k^T S) * beta; S += k (outer) delta; o = q^T S.
// Column j of S only ever meets column j of v, delta and o, so the columns are independent and can
// be split across warps and blocks without communication. A warp owns kWarpCols columns and all dk
// rows of them: lane = (column lane, row lane r), holding rows r, r + kRowLanes, .. of
// kWarpCols / kColLanes consecutive columns in registers for the whole sequence. The two
// reductions over rows per token are in-thread sums then a group_sum over the row lanes: no shared
// memory traffic between warps. The warp's 8 columns are 32 contiguous bytes of each state row, so
// the state is read and written in whole sectors.
//
// The token loop is latency-bound: for a long prefill the inputs the previous kernel wrote are in
// DRAM, and one load round trip costs more than a token's math. So the block stages kChunk tokens'
// inputs at a time in shared memory with cp.async, double-buffered: chunk c+1 is in flight while
// chunk c is computed.

constexpr int kRuleWarps = 4;                       // warps per block
constexpr int kWarpCols = 8;                        // state columns per warp
constexpr int kBlockCols = kRuleWarps * kWarpCols;  // state columns per block

// Tokens per staged chunk: as many as keep two stages within the 48 KiB of static shared memory.
__host__ __device__ constexpr int rule_chunk(int dk_pad) { return 2048 / dk_pad < 32 ? 2048 / dk_pad : 32; }

// cp.async (sm_80+) copies global -> shared without passing through registers; older targets
// fall back to a plain copy.
__device__ __forceinline__ void copy_async(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
#else
  *dst = *src;
#endif
}

__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's newest copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// One chunk's inputs for a block. Rows of q/k past dk and columns of v past dv stay zero, so the
// padded lanes add nothing and need no bounds checks in the math.
template <int kDkPad, int kChunk>
struct Stage {
  float q[kChunk][kDkPad];  // normalised, scaled
  float k[kChunk][kDkPad];  // normalised
  float v[kChunk][kBlockCols];
  float decay[kChunk];
  float beta[kChunk];
};

// Where a block's inputs are in global memory (token 0 of its sequence).
struct RuleSource {
  const float* q = nullptr;      // the head's key head; k is key_dim floats further
  const float* v = nullptr;      // the block's first column
  const float* decay = nullptr;  // this head
  const float* beta = nullptr;
  int stride = 0;   // conv_dim: floats between tokens of q, k, v
  int key_dim = 0;
  int nv = 0;       // floats between tokens of decay and beta
  int dk = 0;
  int cols = 0;     // the block's columns that exist (< kBlockCols in a last partial tile)
};

template <int kDkPad, int kChunk>
__device__ void zero_padding(const RuleSource& src, Stage<kDkPad, kChunk>& st) {
  for (int i = static_cast<int>(threadIdx.x); i < kChunk * kDkPad; i += blockDim.x) {
    const int t = i / kDkPad, a = i % kDkPad;
    if (a >= src.dk) st.q[t][a] = st.k[t][a] = 0.f;
  }
  for (int i = static_cast<int>(threadIdx.x); i < kChunk * kBlockCols; i += blockDim.x) {
    const int t = i / kBlockCols, j = i % kBlockCols;
    if (j >= src.cols) st.v[t][j] = 0.f;
  }
}

// Issues the copies of tokens [t0, t0 + n) into st, spread over the block (coalesced).
template <int kDkPad, int kChunk>
__device__ void stage_chunk(const RuleSource& src, int t0, int n, Stage<kDkPad, kChunk>& st) {
  const int tid = static_cast<int>(threadIdx.x), nthreads = static_cast<int>(blockDim.x);
  for (int i = tid; i < n * src.dk; i += nthreads) {
    const int t = i / src.dk, a = i - t * src.dk;
    const float* q = src.q + static_cast<std::size_t>(t0 + t) * src.stride + a;
    copy_async(&st.q[t][a], q);
    copy_async(&st.k[t][a], q + src.key_dim);
  }
  for (int i = tid; i < n * src.cols; i += nthreads) {
    const int t = i / src.cols, j = i - t * src.cols;
    copy_async(&st.v[t][j], src.v + static_cast<std::size_t>(t0 + t) * src.stride + j);
  }
  for (int t = tid; t < n; t += nthreads) {
    copy_async(&st.decay[t], src.decay + static_cast<std::size_t>(t0 + t) * src.nv);
    copy_async(&st.beta[t], src.beta + static_cast<std::size_t>(t0 + t) * src.nv);
  }
  copy_async_commit();
}

// One token's inputs to the rule, as one lane needs them.
template <int kRowsPerLane, int kCols>
struct TokenInputs {
  float q[kRowsPerLane];
  float k[kRowsPerLane];
  float v[kCols];
  float decay;
  float beta;
};

template <int kRowLanes, int kRowsPerLane, int kCols, int kDkPad, int kChunk>
__device__ __forceinline__ TokenInputs<kRowsPerLane, kCols> read_token(const Stage<kDkPad, kChunk>& st, int t,
                                                                       int row_lane, int block_col) {
  TokenInputs<kRowsPerLane, kCols> in;
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) {
    in.q[i] = st.q[t][row_lane + i * kRowLanes];
    in.k[i] = st.k[t][row_lane + i * kRowLanes];
  }
#pragma unroll
  for (int n = 0; n < kCols; ++n) in.v[n] = st.v[t][block_col + n];
  in.decay = st.decay[t];
  in.beta = st.beta[t];
  return in;
}

// Dot products over a lane's rows are split into kDotParts interleaved partial sums, added in a
// fixed order at the end: the dependent FMA chain that every token waits on gets that much shorter.
template <int kRowsPerLane>
constexpr int kDotParts = kRowsPerLane < 4 ? kRowsPerLane : 4;

template <int kN>
__device__ __forceinline__ float sum_parts(const float (&p)[kN]) {
  float sum = p[0];
#pragma unroll
  for (int i = 1; i < kN; ++i) sum += p[i];
  return sum;
}

// One token on the lane's state slice; o receives the lane's columns of q^T S (full sums).
// k^T (decay S) is taken as decay * (k^T S) so the dot does not wait on the decay multiply.
template <int kRowLanes, int kRowsPerLane, int kCols>
__device__ __forceinline__ void rule_step(float (&s)[kRowsPerLane][kCols],
                                          const TokenInputs<kRowsPerLane, kCols>& in, float (&o)[kCols]) {
  constexpr int kP = kDotParts<kRowsPerLane>;
  float delta[kCols];
#pragma unroll
  for (int n = 0; n < kCols; ++n) {
    float kv[kP] = {};
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) kv[i % kP] = fmaf(in.k[i], s[i][n], kv[i % kP]);
    const float kv_sum = group_sum<kRowLanes>(sum_parts(kv)) * in.decay;
    delta[n] = (in.v[n] - kv_sum) * in.beta;
  }
  float op[kCols][kP] = {};
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i)
#pragma unroll
    for (int n = 0; n < kCols; ++n) {
      s[i][n] = fmaf(in.k[i], delta[n], s[i][n] * in.decay);
      op[n][i % kP] = fmaf(in.q[i], s[i][n], op[n][i % kP]);
    }
#pragma unroll
  for (int n = 0; n < kCols; ++n) o[n] = group_sum<kRowLanes>(sum_parts(op[n]));
}

// Grid (column tiles, value heads, sequences). kRowLanes * kRowsPerLane >= dk.
template <int kRowLanes, int kRowsPerLane>
__global__ void __launch_bounds__(kRuleWarps * kWarp)
    delta_rule_kernel(Shape sh, const float* __restrict__ mixed, const float* __restrict__ decay,
                      const float* __restrict__ beta, const DeltaNetSeqDev* __restrict__ seqs,
                      float* __restrict__ out) {
  pdl_enter();
  constexpr int kColLanes = kWarp / kRowLanes;
  constexpr int kCols = kWarpCols / kColLanes;  // columns per lane
  constexpr int kDkPad = kRowLanes * kRowsPerLane;
  constexpr int kChunk = rule_chunk(kDkPad);
  static_assert(kColLanes * kCols == kWarpCols && kCols <= kRowLanes, "lane layout");
  __shared__ Stage<kDkPad, kChunk> stage[2];

  const DeltaNetSeqDev seq = seqs[blockIdx.z];
  const int rows = seq.rows;
  if (rows <= 0) return;  // uniform over the block
  const int h = static_cast<int>(blockIdx.y);
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int row_lane = lane % kRowLanes;
  const int block_col0 = static_cast<int>(blockIdx.x) * kBlockCols;
  const int block_col = warp * kWarpCols + (lane / kRowLanes) * kCols;  // the lane's first column in the tile
  const int col = block_col0 + block_col;

  RuleSource src;
  const float* base = mixed + static_cast<std::size_t>(seq.row0) * sh.conv_dim;
  src.q = base + key_head(sh, h) * sh.dk;
  src.v = base + 2 * sh.key_dim + h * sh.dv + block_col0;
  src.decay = decay + static_cast<std::size_t>(seq.row0) * sh.nv + h;
  src.beta = beta + static_cast<std::size_t>(seq.row0) * sh.nv + h;
  src.stride = sh.conv_dim;
  src.key_dim = sh.key_dim;
  src.nv = sh.nv;
  src.dk = sh.dk;
  src.cols = min(kBlockCols, sh.dv - block_col0);
  // The state is loaded first: for a decode step its latency is most of the kernel's time, and the
  // copy instructions below (asm volatile) would otherwise keep the compiler from hoisting it.
  // Lanes past dk or dv hold zeros and never store; they still run the loop, since the whole
  // block takes part in staging and its barriers.
  float* state = seq.recurrent + static_cast<std::size_t>(h) * sh.dk * sh.dv;
  auto row_ok = [&](int i) { return row_lane + i * kRowLanes < sh.dk; };
  auto col_ok = [&](int n) { return col + n < sh.dv; };
  auto at = [&](int i, int n) { return static_cast<std::size_t>(row_lane + i * kRowLanes) * sh.dv + col + n; };
  float s[kRowsPerLane][kCols];
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i)
#pragma unroll
    for (int n = 0; n < kCols; ++n) s[i][n] = row_ok(i) && col_ok(n) ? state[at(i, n)] : 0.f;

  if (sh.dk < kDkPad || src.cols < kBlockCols) {  // only then is there padding to clear
    zero_padding(src, stage[0]);
    zero_padding(src, stage[1]);
  }
  stage_chunk(src, 0, min(kChunk, rows), stage[0]);

  // After the row sums every row lane holds all kCols outputs; row lane n stores column n.
  float* o_base = out + static_cast<std::size_t>(seq.row0) * sh.value_dim + h * sh.dv + col;
  const bool stores = row_lane < kCols && col_ok(row_lane);

  const int chunks = (rows + kChunk - 1) / kChunk;
  for (int c = 0; c < chunks; ++c) {
    const int t0 = c * kChunk;
    if (c + 1 < chunks) stage_chunk(src, t0 + kChunk, min(kChunk, rows - t0 - kChunk), stage[(c + 1) & 1]);
    else copy_async_commit();  // an empty group, so that waiting for all but one always means chunk c
    copy_async_wait<1>();
    __syncthreads();  // chunk c (and the zeroed padding) visible to every thread
    const Stage<kDkPad, kChunk>& st = stage[c & 1];
    const int n_tok = min(kChunk, rows - t0);
    for (int t = 0; t < n_tok; ++t) {
      float o[kCols];
      rule_step<kRowLanes>(s, read_token<kRowLanes, kRowsPerLane, kCols>(st, t, row_lane, block_col), o);
      float mine = o[0];
#pragma unroll
      for (int n = 1; n < kCols; ++n) mine = row_lane == n ? o[n] : mine;
      if (stores) o_base[static_cast<std::size_t>(t0 + t) * sh.value_dim + row_lane] = mine;
    }
    __syncthreads();  // every thread is done with this stage before chunk c + 2 is copied into it
  }

#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i)
#pragma unroll
    for (int n = 0; n < kCols; ++n)
      if (row_ok(i) && col_ok(n)) state[at(i, n)] = s[i][n];
}

// Fallback for dk > 256, where the register-resident state would not fit: one thread per state
// column, the state updated in global memory (same arithmetic, slower).
constexpr int kGenericThreads = 128;

__global__ void __launch_bounds__(kGenericThreads)
    delta_rule_generic_kernel(Shape sh, const float* __restrict__ mixed, const float* __restrict__ decay,
                              const float* __restrict__ beta, const DeltaNetSeqDev* __restrict__ seqs,
                              float* __restrict__ out) {
  pdl_enter();
  const DeltaNetSeqDev seq = seqs[blockIdx.z];
  const int h = static_cast<int>(blockIdx.y);
  const int j = static_cast<int>(blockIdx.x) * kGenericThreads + static_cast<int>(threadIdx.x);
  if (j >= sh.dv) return;
  float* S = seq.recurrent + static_cast<std::size_t>(h) * sh.dk * sh.dv + j;  // column j, row stride dv
  for (int t = 0; t < seq.rows; ++t) {
    const std::size_t row = static_cast<std::size_t>(seq.row0) + t;
    const float* q = mixed + row * sh.conv_dim + key_head(sh, h) * sh.dk;
    const float* k = q + sh.key_dim;
    const float v = mixed[row * sh.conv_dim + 2 * sh.key_dim + h * sh.dv + j];
    const float d = decay[row * sh.nv + h], bt = beta[row * sh.nv + h];
    float kv = 0.f;
    for (int a = 0; a < sh.dk; ++a) kv = fmaf(k[a], S[static_cast<std::size_t>(a) * sh.dv], kv);
    const float delta = (v - kv * d) * bt;
    float o = 0.f;
    for (int a = 0; a < sh.dk; ++a) {
      float& e = S[static_cast<std::size_t>(a) * sh.dv];
      e = fmaf(k[a], delta, e * d);
      o = fmaf(q[a], e, o);
    }
    out[row * sh.value_dim + h * sh.dv + j] = o;
  }
}

template <int kRowLanes, int kRowsPerLane>
void launch_rule(const Shape& sh, const Work& w, const DeltaNetSeqDev* seqs, int nseq, float* out, cudaStream_t s) {
  const dim3 grid(ceil_div(sh.dv, kRuleWarps * kWarpCols), static_cast<unsigned>(sh.nv), static_cast<unsigned>(nseq));
  launch(delta_rule_kernel<kRowLanes, kRowsPerLane>, grid, kRuleWarps * kWarp, 0, s, sh, w.mixed, w.decay, w.beta,
         seqs, out);
}

// Picks the lane layout from dk: 8 row lanes for dk <= 128 (up to 16 rows each), 16 row lanes up to
// dk = 256, so a lane holds at most dk / 4 state floats (32 at dk = 128, 64 at 256).
void launch_delta_rule(const Shape& sh, const Work& w, const DeltaNetSeqDev* seqs, int nseq, float* out,
                       cudaStream_t s) {
  if (sh.dk <= 32) launch_rule<8, 4>(sh, w, seqs, nseq, out, s);
  else if (sh.dk <= 64) launch_rule<8, 8>(sh, w, seqs, nseq, out, s);
  else if (sh.dk <= 128) launch_rule<8, 16>(sh, w, seqs, nseq, out, s);
  else if (sh.dk <= 256) launch_rule<16, 16>(sh, w, seqs, nseq, out, s);
  else {
    const dim3 grid(ceil_div(sh.dv, kGenericThreads), static_cast<unsigned>(sh.nv), static_cast<unsigned>(nseq));
    launch(delta_rule_generic_kernel, grid, kGenericThreads, 0, s, sh, w.mixed, w.decay, w.beta, seqs, out);
  }
}

// ---- 4. Gated RMSNorm ----------------------------------------------------------------------------

constexpr int kNormWarps = 8;

// Grid (row groups, sequences); one warp per (token, value head) row of dv, in place on out.
__global__ void __launch_bounds__(kNormWarps * kWarp)
    gated_norm_kernel(Shape sh, const float* __restrict__ z, const float* __restrict__ weight, float eps,
                      const DeltaNetSeqDev* __restrict__ seqs, float* __restrict__ out) {
  pdl_enter();
  const DeltaNetSeqDev seq = seqs[blockIdx.y];
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const long long item = static_cast<long long>(blockIdx.x) * kNormWarps + warp;
  if (item >= static_cast<long long>(seq.rows) * sh.nv) return;
  const long long t = item / sh.nv;
  const int h = static_cast<int>(item - t * sh.nv);
  const std::size_t off = (static_cast<std::size_t>(seq.row0) + t) * sh.value_dim + static_cast<std::size_t>(h) * sh.dv;
  float* x = out + off;
  const float* zr = z + off;

  float ss = 0.f;
  for (int i = lane; i < sh.dv; i += kWarp) ss = fmaf(x[i], x[i], ss);
  const float inv = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(sh.dv) + eps);
  // HF order: normalise, then * weight (plain, not 1 + w), then * silu(z).
  for (int i = lane; i < sh.dv; i += kWarp) x[i] = weight[i] * (x[i] * inv) * silu(zr[i]);
}

}  // namespace

// ---- Entry points --------------------------------------------------------------------------------

void deltanet_unfuse(const ref::DeltaNetDims& dims, const float* qkvz, const float* ba, int T, float* qkv, float* z,
                     float* b, float* a, cudaStream_t s) {
  if (T <= 0) return;
  const Shape sh = shape_of(dims);
  const long long width = static_cast<long long>(sh.nk) * (2 * sh.dk + 2 * sh.v_per_k * sh.dv + 2 * sh.v_per_k);
  launch(unfuse_kernel, ceil_div(width * T, kUnfuseThreads), kUnfuseThreads, 0, s, sh, qkvz, ba, T, qkv, z, b, a);
}

std::size_t deltanet_work_floats(const ref::DeltaNetDims& dims, int T) {
  return static_cast<std::size_t>(std::max(T, 0)) * (dims.conv_dim() + 2 * dims.num_v_heads);
}

void deltanet(const ref::DeltaNetDims& dims, const DeltaNetParamsDev& params, const float* qkv, const float* z,
              const float* b, const float* a, const DeltaNetSeqDev* seqs, int nseq, int T, int max_rows, float* work,
              float* out, cudaStream_t s) {
  if (nseq <= 0 || T <= 0 || max_rows <= 0) return;
  const Shape sh = shape_of(dims);
  const Work w = carve_work(work, dims, T);
  const unsigned n = static_cast<unsigned>(nseq);

  launch_conv1d_silu(sh, qkv, params.conv1d, seqs, nseq, max_rows, w.mixed, s);
  const dim3 prep_grid(static_cast<unsigned>(max_rows), n, ceil_div(2 * sh.nk, kPrepWarps));
  launch(prepare_kernel, prep_grid, kPrepWarps * kWarp, 0, s, sh, a, b, params.A_log, params.dt_bias, seqs, w.mixed,
         w.decay, w.beta);
  launch_delta_rule(sh, w, seqs, nseq, out, s);
  const dim3 norm_grid(ceil_div(static_cast<long long>(max_rows) * sh.nv, kNormWarps), n);
  launch(gated_norm_kernel, norm_grid, kNormWarps * kWarp, 0, s, sh, z, params.norm, dims.norm_eps, seqs, out);
}

}  // namespace ft::engine::cuda

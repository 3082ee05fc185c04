// CPU reference of the Gated DeltaNet linear-attention layer of Qwen3-Next (`qwen3_next`) and
// Qwen3.5/3.6-MoE (`qwen3_5_moe`), matching HF transformers' pure-torch path
// (torch_causal_conv1d_update, torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule,
// Qwen3NextGatedDeltaNet.forward / Qwen3_5MoeGatedDeltaNet.forward, Qwen3NextRMSNormGated).
// Everything is fp32, row-major, batch 1. Unlike HF, every entry point takes a starting state and
// leaves the final state behind, so a sequence may be fed in pieces split anywhere (prefill
// continuation, decode, snapshot/restore at token boundaries) with the same result.
#pragma once

#include <cstddef>
#include <vector>

#include "ft/common/result.h"

namespace ft::engine::ref {

// ---- Shapes ------------------------------------------------------------------------------------

// Layer dimensions, named after the HF config keys.
struct DeltaNetDims {
  std::size_t hidden = 0;       // hidden_size
  std::size_t num_k_heads = 0;  // linear_num_key_heads (q and k heads)
  std::size_t num_v_heads = 0;  // linear_num_value_heads, a multiple of num_k_heads
  std::size_t head_k_dim = 0;   // linear_key_head_dim
  std::size_t head_v_dim = 0;   // linear_value_head_dim
  std::size_t conv_kernel = 4;  // linear_conv_kernel_dim (K)
  float norm_eps = 1e-6f;       // rms_norm_eps, used by the gated output norm
  // Which key head a value head reads. HF repeats each key head over consecutive value heads
  // (value head h reads key head h / v_per_k). llama.cpp's converter stores Qwen3.5/3.6's value
  // heads tiled instead (value head h reads key head h % num_k_heads), permuting every value-head
  // tensor alike (v rows, z, a, b, A, dt, conv channels, out_proj columns), so that mapping is the
  // only thing that differs.
  bool v_heads_tiled = false;

  std::size_t key_dim() const { return num_k_heads * head_k_dim; }
  std::size_t value_dim() const { return num_v_heads * head_v_dim; }
  // Channels of the short convolution: q, k and v concatenated.
  std::size_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // Value heads per key head (HF: num_v_heads // num_k_heads).
  std::size_t v_per_k() const { return num_k_heads ? num_v_heads / num_k_heads : 0; }
  std::size_t k_head(std::size_t v_head) const { return v_heads_tiled ? v_head % num_k_heads : v_head / v_per_k(); }
};

// ---- State -------------------------------------------------------------------------------------

// Float counts and byte sizes of one layer's state, for sizing snapshots.
struct DeltaNetStateSizes {
  std::size_t conv_floats = 0;       // conv_dim * (K - 1)
  std::size_t recurrent_floats = 0;  // num_v_heads * head_k_dim * head_v_dim
  std::size_t conv_bytes() const { return conv_floats * sizeof(float); }
  std::size_t recurrent_bytes() const { return recurrent_floats * sizeof(float); }
  std::size_t total_bytes() const { return conv_bytes() + recurrent_bytes(); }
};
DeltaNetStateSizes deltanet_state_sizes(const DeltaNetDims& dims);

// Non-owning view of one layer's state, updated in place by the ops below.
//   conv:      [conv_dim, K-1], channel-major; column K-2 is the most recent input. These are the
//              last K-1 pre-convolution inputs (the projected q|k|v), zeros before the first token.
//              (HF's cache holds K columns; its oldest one is never read by the kernel, so an HF
//              conv state maps to ours by dropping column 0.)
//   recurrent: [num_v_heads, head_k_dim, head_v_dim]; S_h with out_t = q_t^T S_h (HF layout).
// A zero-filled state is the state before the first token.
struct DeltaNetStateView {
  float* conv = nullptr;
  float* recurrent = nullptr;
};

// Owning state for one layer (zero-initialised). Copyable, so a copy is a snapshot.
struct DeltaNetState {
  std::vector<float> conv;
  std::vector<float> recurrent;

  DeltaNetState() = default;
  explicit DeltaNetState(const DeltaNetDims& dims);
  void reset();  // back to zeros: the state before the first token
  DeltaNetStateView view() { return {conv.data(), recurrent.data()}; }
};

// ---- Short convolution -------------------------------------------------------------------------

// Causal depthwise conv1d over time followed by SiLU (no bias in these models):
//   out[t, c] = silu( sum_{j<K} w[c, j] * x_ext[t + j, c] ),  x_ext = [state columns ; x rows]
// which is HF's F.conv1d(padding=K-1)[:T] when the state is zero.
//   x:      [T, channels] token-major (as a projection writes it)
//   weight: [channels, K] (HF conv1d.weight [channels, 1, K] squeezed)
//   state:  [channels, K-1] as in DeltaNetStateView::conv; replaced by the last K-1 inputs
//   out:    [T, channels]; may not alias x
// Exact split invariance: the arithmetic per output does not depend on where the input was split.
void causal_conv1d_silu(const float* x, std::size_t T, std::size_t channels, const float* weight,
                        std::size_t K, float* state, float* out);
// One-token (decode) form of the above; same result as causal_conv1d_silu with T = 1.
void causal_conv1d_silu_step(const float* x, std::size_t channels, const float* weight,
                             std::size_t K, float* state, float* out);

// ---- Gated delta rule --------------------------------------------------------------------------

// Inputs of the gated delta rule for T tokens. Value head h reads key head h / (num_v/num_k)
// (HF's repeat_interleave on the head axis: each q/k head serves consecutive value heads).
struct DeltaRuleInput {
  const float* q = nullptr;  // token t, key head kh at q[t * qk_stride + kh * head_k_dim]; raw
  const float* k = nullptr;  //   (L2-normalised inside, eps 1e-6; q then scaled by 1/sqrt(dk))
  const float* v = nullptr;  // token t, value head h at v[t * v_stride + h * head_v_dim]
  std::size_t qk_stride = 0;  // floats between tokens of q and of k (e.g. conv_dim or key_dim)
  std::size_t v_stride = 0;   // floats between tokens of v
  const float* g = nullptr;     // [T, num_v_heads] log-decay, <= 0 (state *= exp(g))
  const float* beta = nullptr;  // [T, num_v_heads] write strength, in (0, 1)
};

// Per value head h and token t (HF torch_recurrent_gated_delta_rule, use_qk_l2norm_in_kernel):
//   S *= exp(g);  delta = (v - k^T S) * beta;  S += k (outer) delta;  out = q^T S
// state: [num_v_heads, head_k_dim, head_v_dim], in/out. out: [T, num_v_heads, head_v_dim].
void gated_delta_rule_recurrent(const DeltaNetDims& dims, const DeltaRuleInput& in, std::size_t T,
                                float* state, float* out);

// Same result via HF's chunked (WY / UT-transform) form, chunk_size 64 with the intra-chunk
// unit-lower-triangular solve; faster for prefill. Chunks start at token 0 of this call; a final
// partial chunk behaves as HF's zero padding does.
inline constexpr std::size_t kDeltaRuleChunk = 64;
void gated_delta_rule_chunked(const DeltaNetDims& dims, const DeltaRuleInput& in, std::size_t T,
                              float* state, float* out);

// ---- Gates and output norm ---------------------------------------------------------------------

// softplus as torch computes it (beta 1, threshold 20: x > 20 returns x).
float softplus(float x);

// g[t,h] = -exp(A_log[h]) * softplus(a[t,h] + dt_bias[h]);  beta[t,h] = sigmoid(b[t,h]).
// a, b, g, beta: [T, num_v_heads]; A_log, dt_bias: [num_v_heads].
void deltanet_gates(const float* a, const float* b, const float* A_log, const float* dt_bias,
                    std::size_t T, std::size_t num_v_heads, float* g, float* beta);

// Qwen3NextRMSNormGated / Qwen3_5MoeRMSNormGated over rows of `dim` (one row per token and head):
//   out = x / sqrt(mean(x^2) + eps) * w * silu(z)
// The weight is plain (HF initialises it to ones and multiplies by w, not 1 + w) in both families.
// x, z, out: [rows, dim]; weight: [dim]. out may alias x.
void rms_norm_gated(const float* x, const float* z, const float* weight, float* out,
                    std::size_t rows, std::size_t dim, float eps);

// ---- The layer ---------------------------------------------------------------------------------

enum class DeltaNetProjLayout {
  // qwen3_next: in_proj_qkvz [2*key_dim + 2*value_dim, hidden] and in_proj_ba [2*num_v_heads,
  // hidden], rows grouped per key head g (r = num_v_heads / num_k_heads):
  //   qkvz block g (2*dk + 2*r*dv rows): q_g[dk] | k_g[dk] | v[r*dv] | z[r*dv]
  //     (the v and z parts are value heads g*r .. g*r+r-1 in order)
  //   ba block g (2*r rows): b[r] | a[r]  (value heads g*r .. g*r+r-1)
  // (HF fix_query_key_value_ordering.)
  kQwen3NextFused,
  // qwen3_5_moe: in_proj_qkv [2*key_dim + value_dim, hidden] (q | k | v, head-major),
  // in_proj_z [value_dim, hidden], in_proj_b / in_proj_a [num_v_heads, hidden].
  kQwen3_5Split,
};

// One layer's weights, HF tensor names, row-major [out, in] like nn.Linear.weight. Not owned.
struct DeltaNetWeights {
  DeltaNetProjLayout layout = DeltaNetProjLayout::kQwen3_5Split;
  const float* in_proj_qkvz = nullptr;  // kQwen3NextFused only
  const float* in_proj_ba = nullptr;    // kQwen3NextFused only
  const float* in_proj_qkv = nullptr;   // kQwen3_5Split only
  const float* in_proj_z = nullptr;     // kQwen3_5Split only
  const float* in_proj_b = nullptr;     // kQwen3_5Split only
  const float* in_proj_a = nullptr;     // kQwen3_5Split only
  const float* conv1d = nullptr;    // [conv_dim, 1, K] over channels q | k | v
  const float* dt_bias = nullptr;   // [num_v_heads]
  const float* A_log = nullptr;     // [num_v_heads]
  const float* norm = nullptr;      // [head_v_dim], the gated RMSNorm weight (plain, not 1 + w)
  const float* out_proj = nullptr;  // [hidden, value_dim]
};

// qwen3_next: the outputs of the fused projections, qkvz [T, 2*key_dim + 2*value_dim] and
// ba [T, 2*num_v_heads] grouped per key head, put in the split layout's order: qkv [T, conv_dim]
// (q | k | v), z [T, value_dim], b and a [T, num_v_heads] (HF fix_query_key_value_ordering).
void deltanet_unfuse(const DeltaNetDims& dims, const float* qkvz, const float* ba, std::size_t T, float* qkv,
                     float* z, float* b, float* a);

enum class DeltaRuleMode {
  kAuto,       // T == 1 -> recurrent, T > 1 -> chunked (what HF does)
  kRecurrent,  // token by token
  kChunked,    // chunks of kDeltaRuleChunk
};

// Checks dims: non-zero, num_v_heads a multiple of num_k_heads, K >= 1.
Status validate_deltanet_dims(const DeltaNetDims& dims);
// validate_deltanet_dims, and that the weights the layout needs are present.
Status validate_deltanet(const DeltaNetDims& dims, const DeltaNetWeights& w);

// The GatedDeltaNet layer on T tokens: x [T, hidden] -> out [T, hidden] (out may not alias x),
// starting from `state` and leaving the state after token T-1 in it.
//   projections -> conv1d+SiLU (q|k|v) -> gates -> gated delta rule -> gated RMSNorm(z) -> out_proj
// Returns kInvalidArgument (state untouched) when validate_deltanet fails.
Status deltanet_forward(const DeltaNetDims& dims, const DeltaNetWeights& w, const float* x,
                        std::size_t T, DeltaNetStateView state, float* out,
                        DeltaRuleMode mode = DeltaRuleMode::kAuto);

}  // namespace ft::engine::ref

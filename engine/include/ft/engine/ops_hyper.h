// CPU reference ops of DeepSeek-V4's manifold-constrained hyper-connections (mHC; HF
// DeepseekV4HyperConnection / DeepseekV4HyperHead, docs/deepseek-v4.md §2.4-§2.5): the residual is
// N streams of the hidden size per token, h [T, N, D]; before each sub-layer hc_pre collapses them
// into the sub-layer's input and makes the weights with which hc_post writes its output back into
// every stream; hc_head collapses them once more before the final norm.
#pragma once

#include <cstddef>

namespace ft::engine {

// One hyper-connection's dims and constants (all layers of a model share them).
struct HyperSpec {
  std::size_t streams = 0;          // N: hc_mult
  std::size_t dim = 0;              // D: hidden_size
  std::size_t sinkhorn_iters = 20;  // hc_sinkhorn_iters
  float eps = 1e-6f;                // hc_eps: the floor added to pre, comb and every Sinkhorn divisor
  float norm_eps = 1e-6f;           // rms_norm_eps of the unweighted norm over a token's N * D values

  std::size_t mix_rows() const { return (2 + streams) * streams; }  // fn's rows: pre, post, comb
};

}  // namespace ft::engine

namespace ft::engine::ref {

// attn_hc / ffn_hc of §2.5, per token t of h [T, N, D], in fp32 as HF (the two long reductions, the
// norm's sum of squares and fn's dot products over N * D values, in double so that the result does
// not hang on their order):
//   flat = h[t] / sqrt(mean(h[t]^2) + norm_eps)                (all N * D values, no weight)
//   mix  = fn [(2+N)N, N*D] @ flat, split into pre_w [N], post_w [N], comb_w [N, N]; base so too
//   pre  = sigmoid(pre_w * scale[0] + base_pre) + eps
//   post = 2 * sigmoid(post_w * scale[1] + base_post)                       -> post [t, N]
//   comb = row softmax(comb_w * scale[2] + base_comb) + eps, then one column normalisation, then
//          (sinkhorn_iters - 1) x (rows, columns), each x / (sum + eps)   -> comb [t, N, N] (row j,
//          column k: the weight of stream j in new stream k, hc_post's comb[j, k])
//   x[t, d] = sum_n pre[n] * h[t, n, d]                                    -> x [T, D]
void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
            const HyperSpec& spec, float* x, float* post, float* comb);

// The residual update after a sub-layer: h_new[t, k] = post[t, k] * out[t] + sum_j comb[t, j, k] * h[t, j]
// (HF: post[..., None] * out[:, None, :] + comb.transpose(-1, -2) @ h; comb is applied transposed).
// h, h_new [T, N, D], out [T, D]; h_new may be h (each column of N values is read before it is written).
void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
             const HyperSpec& spec, float* h_new);

// hc_head of §2.5: the pre-only collapse before the model's final norm, with hc_fn [N, N*D],
// hc_base [N], hc_scale [1]: y[t] = sum_n (sigmoid(mix[n] * scale[0] + base[n]) + eps) * h[t, n]
// with mix and flat as hc_pre's (no post, no comb, no Sinkhorn). y [T, D].
void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
             const HyperSpec& spec, float* y);

}  // namespace ft::engine::ref

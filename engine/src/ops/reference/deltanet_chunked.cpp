// Chunked gated delta rule (HF torch_chunk_gated_delta_rule, chunk 64). Within a chunk of n
// tokens with cumulative log-decay c_i = g_0 + .. + g_i, the n sequential rank-1 updates collapse
// into one unit-lower-triangular system (the UT / WY transform):
//   (I + L) U = diag(beta) V,       (I + L) W = diag(beta e^{c}) K,
//   L_ij = beta_i e^{c_i - c_j} k_i.k_j   (j < i)
// then, with S the state entering the chunk:
//   v_new_i = U_i - W_i^T S
//   out_i   = e^{c_i} q_i^T S + sum_{j<=i} e^{c_i - c_j} (q_i.k_j) v_new_j
//   S'      = e^{c_n-1} S + sum_j e^{c_n-1 - c_j} k_j (outer) v_new_j
// HF pads the last chunk with zeros (k = v = beta = g = 0), which changes nothing; a shorter last
// chunk is the same computation.
#include <algorithm>
#include <cmath>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "ft/engine/ops_deltanet.h"
#include "ops/reference/deltanet_internal.h"

namespace ft::engine::ref {
namespace {

// Per-head scratch for one chunk, allocated once per task and reused for every chunk.
struct ChunkScratch {
  std::vector<float> qn, kn;  // [C, dk] normalised (q also scaled by 1/sqrt(dk))
  std::vector<float> c;       // [C] cumulative log-decay
  std::vector<float> beta;    // [C]
  std::vector<float> U, vnew; // [C, dv]
  std::vector<float> W;       // [C, dk]

  ChunkScratch(std::size_t C, std::size_t dk, std::size_t dv)
      : qn(C * dk), kn(C * dk), c(C), beta(C), U(C * dv), vnew(C * dv), W(C * dk) {}
};

// One chunk [t0, t0 + n) of value head h, updating S [dk, dv] in place.
void run_chunk(const DeltaNetDims& dims, const DeltaRuleInput& in, std::size_t h, std::size_t t0,
               std::size_t n, float q_scale, ChunkScratch& sc, float* S, float* out) {
  const std::size_t nv = dims.num_v_heads, dk = dims.head_k_dim, dv = dims.head_v_dim;
  const std::size_t kh = dims.k_head(h);

  float cum = 0.f;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t t = t0 + i;
    dn::l2_normalize(in.q + t * in.qk_stride + kh * dk, &sc.qn[i * dk], dk, q_scale);
    dn::l2_normalize(in.k + t * in.qk_stride + kh * dk, &sc.kn[i * dk], dk, 1.0f);
    cum += in.g[t * nv + h];  // sequential cumsum, like torch.cumsum on the chunk
    sc.c[i] = cum;
    sc.beta[i] = in.beta[t * nv + h];
  }

  // Forward substitution for U and W; row i of L is used as soon as it is known, never stored.
  for (std::size_t i = 0; i < n; ++i) {
    const float* v = in.v + (t0 + i) * in.v_stride + h * dv;
    float* Ui = &sc.U[i * dv];
    float* Wi = &sc.W[i * dk];
    const float* ki = &sc.kn[i * dk];
    for (std::size_t j = 0; j < dv; ++j) Ui[j] = sc.beta[i] * v[j];
    const float wscale = sc.beta[i] * std::exp(sc.c[i]);
    for (std::size_t a = 0; a < dk; ++a) Wi[a] = wscale * ki[a];
    for (std::size_t j = 0; j < i; ++j) {
      const float l = sc.beta[i] * std::exp(sc.c[i] - sc.c[j]) * dn::dot(ki, &sc.kn[j * dk], dk);
      dn::axpy(-l, &sc.U[j * dv], Ui, dv);
      dn::axpy(-l, &sc.W[j * dk], Wi, dk);
    }
  }

  // v_new = U - W S, and the part of the output that reads the entering state.
  for (std::size_t i = 0; i < n; ++i) {
    float* vn = &sc.vnew[i * dv];
    float* o = out + (t0 + i) * nv * dv + h * dv;
    std::copy_n(&sc.U[i * dv], dv, vn);
    for (std::size_t j = 0; j < dv; ++j) o[j] = 0.f;
    const float* Wi = &sc.W[i * dk];
    const float* qi = &sc.qn[i * dk];
    for (std::size_t a = 0; a < dk; ++a) {
      const float* row = S + a * dv;
      dn::axpy(-Wi[a], row, vn, dv);
      dn::axpy(qi[a], row, o, dv);
    }
    const float ec = std::exp(sc.c[i]);
    for (std::size_t j = 0; j < dv; ++j) o[j] *= ec;
  }

  // Intra-chunk attention over the corrected values (causal, diagonal included).
  for (std::size_t i = 0; i < n; ++i) {
    float* o = out + (t0 + i) * nv * dv + h * dv;
    const float* qi = &sc.qn[i * dk];
    for (std::size_t j = 0; j <= i; ++j) {
      const float a = std::exp(sc.c[i] - sc.c[j]) * dn::dot(qi, &sc.kn[j * dk], dk);
      dn::axpy(a, &sc.vnew[j * dv], o, dv);
    }
  }

  // State update: decay across the whole chunk, plus each token's decayed write.
  const float clast = sc.c[n - 1];
  const float chunk_decay = std::exp(clast);
  for (std::size_t i = 0; i < n; ++i) sc.c[i] = std::exp(clast - sc.c[i]);  // reuse as weights
  for (std::size_t a = 0; a < dk; ++a) {
    float* row = S + a * dv;
    for (std::size_t j = 0; j < dv; ++j) row[j] *= chunk_decay;
    for (std::size_t i = 0; i < n; ++i) dn::axpy(sc.c[i] * sc.kn[i * dk + a], &sc.vnew[i * dv], row, dv);
  }
}

}  // namespace

void gated_delta_rule_chunked(const DeltaNetDims& dims, const DeltaRuleInput& in, std::size_t T,
                              float* state, float* out) {
  const std::size_t nv = dims.num_v_heads, dk = dims.head_k_dim, dv = dims.head_v_dim;
  const float q_scale = 1.0f / std::sqrt(float(dk));
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, nv), [&](const tbb::blocked_range<std::size_t>& hr) {
    ChunkScratch sc(kDeltaRuleChunk, dk, dv);
    for (std::size_t h = hr.begin(); h < hr.end(); ++h) {
      float* S = state + h * dk * dv;
      for (std::size_t t0 = 0; t0 < T; t0 += kDeltaRuleChunk)
        run_chunk(dims, in, h, t0, std::min(kDeltaRuleChunk, T - t0), q_scale, sc, S, out);
    }
  });
}

}  // namespace ft::engine::ref

// Token-by-token gated delta rule (HF torch_recurrent_gated_delta_rule with
// use_qk_l2norm_in_kernel=True). Used for decode and as the ground truth for the chunked form.
#include <cmath>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "ft/engine/ops_deltanet.h"
#include "ops/reference/deltanet_internal.h"

namespace ft::engine::ref {

void gated_delta_rule_recurrent(const DeltaNetDims& dims, const DeltaRuleInput& in, std::size_t T,
                                float* state, float* out) {
  const std::size_t nv = dims.num_v_heads, dk = dims.head_k_dim, dv = dims.head_v_dim;
  const float q_scale = 1.0f / std::sqrt(float(dk));

  // Heads are independent and each writes only its own state and output slices: deterministic.
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, nv), [&](const tbb::blocked_range<std::size_t>& hr) {
    std::vector<float> qn(dk), kn(dk), kv(dv);
    for (std::size_t h = hr.begin(); h < hr.end(); ++h) {
      const std::size_t kh = dims.k_head(h);
      float* S = state + h * dk * dv;  // [dk, dv]
      for (std::size_t t = 0; t < T; ++t) {
        dn::l2_normalize(in.q + t * in.qk_stride + kh * dk, qn.data(), dk, q_scale);
        dn::l2_normalize(in.k + t * in.qk_stride + kh * dk, kn.data(), dk, 1.0f);
        const float* v = in.v + t * in.v_stride + h * dv;
        const float decay = std::exp(in.g[t * nv + h]);
        const float beta = in.beta[t * nv + h];

        // Pass 1: decay the state and read kv_mem = k^T S from the decayed rows.
        for (std::size_t j = 0; j < dv; ++j) kv[j] = 0.f;
        for (std::size_t a = 0; a < dk; ++a) {
          float* row = S + a * dv;
          for (std::size_t j = 0; j < dv; ++j) row[j] *= decay;
          dn::axpy(kn[a], row, kv.data(), dv);
        }
        // delta = (v - kv_mem) * beta, kept in kv.
        for (std::size_t j = 0; j < dv; ++j) kv[j] = (v[j] - kv[j]) * beta;
        // Pass 2: S += k (outer) delta, and read out = q^T S from the updated rows.
        float* o = out + t * nv * dv + h * dv;
        for (std::size_t j = 0; j < dv; ++j) o[j] = 0.f;
        for (std::size_t a = 0; a < dk; ++a) {
          float* row = S + a * dv;
          dn::axpy(kn[a], kv.data(), row, dv);
          dn::axpy(qn[a], row, o, dv);
        }
      }
    }
  });
}

}  // namespace ft::engine::ref

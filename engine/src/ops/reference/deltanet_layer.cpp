// The GatedDeltaNet layer (HF Qwen3NextGatedDeltaNet.forward / Qwen3_5MoeGatedDeltaNet.forward),
// its state, gates and gated output norm.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "ft/engine/ops_deltanet.h"
#include "ops/reference/deltanet_internal.h"

namespace ft::engine::ref {

// ---- State -------------------------------------------------------------------------------------

DeltaNetStateSizes deltanet_state_sizes(const DeltaNetDims& d) {
  DeltaNetStateSizes s;
  s.conv_floats = d.conv_kernel ? d.conv_dim() * (d.conv_kernel - 1) : 0;
  s.recurrent_floats = d.num_v_heads * d.head_k_dim * d.head_v_dim;
  return s;
}

DeltaNetState::DeltaNetState(const DeltaNetDims& dims) {
  const DeltaNetStateSizes s = deltanet_state_sizes(dims);
  conv.assign(s.conv_floats, 0.f);
  recurrent.assign(s.recurrent_floats, 0.f);
}

void DeltaNetState::reset() {
  std::fill(conv.begin(), conv.end(), 0.f);
  std::fill(recurrent.begin(), recurrent.end(), 0.f);
}

// ---- Gates and norm ----------------------------------------------------------------------------

float softplus(float x) {
  // torch.nn.functional.softplus(beta=1, threshold=20); log1p keeps precision for very negative x.
  return x > 20.f ? x : std::log1p(std::exp(x));
}

void deltanet_gates(const float* a, const float* b, const float* A_log, const float* dt_bias,
                    std::size_t T, std::size_t num_v_heads, float* g, float* beta) {
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t h = 0; h < num_v_heads; ++h) {
      const std::size_t i = t * num_v_heads + h;
      g[i] = -std::exp(A_log[h]) * softplus(a[i] + dt_bias[h]);
      beta[i] = dn::sigmoid(b[i]);
    }
}

void rms_norm_gated(const float* x, const float* z, const float* weight, float* out,
                    std::size_t rows, std::size_t dim, float eps) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float* o = out + r * dim;
    double ss = 0.0;
    for (std::size_t i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(float(ss / double(dim)) + eps);
    // HF order: norm, then * weight, then * silu(gate). Plain weight (not 1 + w).
    for (std::size_t i = 0; i < dim; ++i) o[i] = weight[i] * (xr[i] * inv) * dn::silu(zr[i]);
  }
}

// ---- Layer -------------------------------------------------------------------------------------

namespace {

// y[T, O] = x[T, I] W[O, I]^T (nn.Linear without bias). Output rows are split across threads and
// each weight row is applied to up to four tokens at once, so it is read from memory once per four
// tokens instead of once per token. Every element is summed in the same fixed order (dn::dot's
// eight lanes) whatever the tiling or threading, so results do not depend on either.
void linear(const float* x, std::size_t T, std::size_t I, const float* W, std::size_t O, float* y) {
  constexpr std::size_t kTok = 4;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, O, 16), [&](const tbb::blocked_range<std::size_t>& rg) {
    for (std::size_t t0 = 0; t0 < T; t0 += kTok) {
      const std::size_t nt = std::min(kTok, T - t0);
      for (std::size_t o = rg.begin(); o < rg.end(); ++o) {
        const float* w = W + o * I;
        if (nt < kTok) {
          for (std::size_t t = t0; t < t0 + nt; ++t) y[t * O + o] = dn::dot(x + t * I, w, I);
          continue;
        }
        float acc[kTok][8] = {};
        std::size_t i = 0;
        for (; i + 8 <= I; i += 8)
          for (std::size_t t = 0; t < kTok; ++t) {
            const float* xt = x + (t0 + t) * I + i;
            for (std::size_t l = 0; l < 8; ++l) acc[t][l] += xt[l] * w[i + l];
          }
        for (std::size_t t = 0; t < kTok; ++t) {
          const float* xt = x + (t0 + t) * I;
          float tail = 0.f;
          for (std::size_t j = i; j < I; ++j) tail += xt[j] * w[j];
          const float* a = acc[t];
          y[(t0 + t) * O + o] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])) + tail;
        }
      }
    }
  });
}

// Projected inputs of T tokens, in the order the rest of the layer wants them.
struct Projected {
  std::vector<float> qkv;  // [T, conv_dim]: q (key heads) | k (key heads) | v (value heads)
  std::vector<float> z;    // [T, value_dim]
  std::vector<float> b;    // [T, num_v_heads]
  std::vector<float> a;    // [T, num_v_heads]
};

void project_split(const DeltaNetDims& d, const DeltaNetWeights& w, const float* x, std::size_t T,
                   Projected& p) {
  linear(x, T, d.hidden, w.in_proj_qkv, d.conv_dim(), p.qkv.data());
  linear(x, T, d.hidden, w.in_proj_z, d.value_dim(), p.z.data());
  linear(x, T, d.hidden, w.in_proj_b, d.num_v_heads, p.b.data());
  linear(x, T, d.hidden, w.in_proj_a, d.num_v_heads, p.a.data());
}

// qwen3_next: project with the fused matrices, then undo the per-key-head grouping exactly as
// HF fix_query_key_value_ordering does (view [.., num_k_heads, group] then split).
void project_fused(const DeltaNetDims& d, const DeltaNetWeights& w, const float* x, std::size_t T,
                   Projected& p) {
  const std::size_t nk = d.num_k_heads, dk = d.head_k_dim, dv = d.head_v_dim, r = d.v_per_k();
  const std::size_t qkvz_dim = nk * (2 * dk + 2 * r * dv), ba_dim = nk * 2 * r;
  std::vector<float> qkvz(T * qkvz_dim), ba(T * ba_dim);
  linear(x, T, d.hidden, w.in_proj_qkvz, qkvz_dim, qkvz.data());
  linear(x, T, d.hidden, w.in_proj_ba, ba_dim, ba.data());

  deltanet_unfuse(d, qkvz.data(), ba.data(), T, p.qkv.data(), p.z.data(), p.b.data(), p.a.data());
}

}  // namespace

void deltanet_unfuse(const DeltaNetDims& d, const float* qkvz_all, const float* ba_all, std::size_t T, float* qkv_all,
                     float* z_all, float* b_all, float* a_all) {
  const std::size_t nk = d.num_k_heads, nv = d.num_v_heads, dk = d.head_k_dim, dv = d.head_v_dim;
  const std::size_t r = d.v_per_k();
  const std::size_t qkvz_group = 2 * dk + 2 * r * dv, ba_group = 2 * r;
  const std::size_t qkvz_dim = nk * qkvz_group, ba_dim = nk * ba_group;
  const std::size_t conv_dim = d.conv_dim(), key_dim = d.key_dim(), value_dim = d.value_dim();
  for (std::size_t t = 0; t < T; ++t) {
    float* qkv = qkv_all + t * conv_dim;
    for (std::size_t g = 0; g < nk; ++g) {
      const float* src = qkvz_all + t * qkvz_dim + g * qkvz_group;
      std::copy_n(src, dk, qkv + g * dk);                                          // q of key head g
      std::copy_n(src + dk, dk, qkv + key_dim + g * dk);                           // k of key head g
      std::copy_n(src + 2 * dk, r * dv, qkv + 2 * key_dim + g * r * dv);           // v heads g*r..
      std::copy_n(src + 2 * dk + r * dv, r * dv, z_all + t * value_dim + g * r * dv);  // z heads g*r..
      const float* bsrc = ba_all + t * ba_dim + g * ba_group;
      std::copy_n(bsrc, r, b_all + t * nv + g * r);
      std::copy_n(bsrc + r, r, a_all + t * nv + g * r);
    }
  }
}

Status validate_deltanet_dims(const DeltaNetDims& d) {
  if (!d.hidden || !d.num_k_heads || !d.num_v_heads || !d.head_k_dim || !d.head_v_dim)
    return invalid_argument("deltanet: every dimension must be non-zero");
  if (d.num_v_heads % d.num_k_heads != 0)
    return invalid_argument("deltanet: linear_num_value_heads (" + std::to_string(d.num_v_heads) +
                            ") is not a multiple of linear_num_key_heads (" +
                            std::to_string(d.num_k_heads) + ")");
  if (d.conv_kernel < 1) return invalid_argument("deltanet: linear_conv_kernel_dim must be >= 1");
  return Status::ok();
}

Status validate_deltanet(const DeltaNetDims& d, const DeltaNetWeights& w) {
  FT_RETURN_IF_ERROR(validate_deltanet_dims(d));
  const bool fused = w.layout == DeltaNetProjLayout::kQwen3NextFused;
  if (fused && (!w.in_proj_qkvz || !w.in_proj_ba))
    return invalid_argument("deltanet: qwen3_next layout needs in_proj_qkvz and in_proj_ba");
  if (!fused && (!w.in_proj_qkv || !w.in_proj_z || !w.in_proj_b || !w.in_proj_a))
    return invalid_argument("deltanet: qwen3_5 layout needs in_proj_qkv, in_proj_z, in_proj_b, in_proj_a");
  if (!w.conv1d || !w.dt_bias || !w.A_log || !w.norm || !w.out_proj)
    return invalid_argument("deltanet: missing conv1d, dt_bias, A_log, norm or out_proj weight");
  return Status::ok();
}

Status deltanet_forward(const DeltaNetDims& d, const DeltaNetWeights& w, const float* x,
                        std::size_t T, DeltaNetStateView state, float* out, DeltaRuleMode mode) {
  FT_RETURN_IF_ERROR(validate_deltanet(d, w));
  if (T == 0) return Status::ok();
  if (!x || !out || !state.recurrent || (d.conv_kernel > 1 && !state.conv))
    return invalid_argument("deltanet: null input, output or state");
  const std::size_t nv = d.num_v_heads, dv = d.head_v_dim;
  const std::size_t conv_dim = d.conv_dim(), key_dim = d.key_dim(), value_dim = d.value_dim();

  Projected p{std::vector<float>(T * conv_dim), std::vector<float>(T * value_dim),
              std::vector<float>(T * nv), std::vector<float>(T * nv)};
  if (w.layout == DeltaNetProjLayout::kQwen3NextFused) project_fused(d, w, x, T, p);
  else project_split(d, w, x, T, p);

  std::vector<float> mixed(T * conv_dim);  // conv1d + SiLU of q|k|v
  if (T == 1) causal_conv1d_silu_step(p.qkv.data(), conv_dim, w.conv1d, d.conv_kernel, state.conv, mixed.data());
  else causal_conv1d_silu(p.qkv.data(), T, conv_dim, w.conv1d, d.conv_kernel, state.conv, mixed.data());

  std::vector<float> g(T * nv), beta(T * nv);
  deltanet_gates(p.a.data(), p.b.data(), w.A_log, w.dt_bias, T, nv, g.data(), beta.data());

  DeltaRuleInput in;
  in.q = mixed.data();
  in.k = mixed.data() + key_dim;
  in.v = mixed.data() + 2 * key_dim;
  in.qk_stride = in.v_stride = conv_dim;
  in.g = g.data();
  in.beta = beta.data();
  std::vector<float> core(T * value_dim);  // [T, num_v_heads, head_v_dim]
  const bool recurrent = mode == DeltaRuleMode::kRecurrent || (mode == DeltaRuleMode::kAuto && T == 1);
  if (recurrent) gated_delta_rule_recurrent(d, in, T, state.recurrent, core.data());
  else gated_delta_rule_chunked(d, in, T, state.recurrent, core.data());

  // One norm row per (token, value head); z has the same [T, num_v_heads, head_v_dim] layout.
  rms_norm_gated(core.data(), p.z.data(), w.norm, core.data(), T * nv, dv, d.norm_eps);
  linear(core.data(), T, value_dim, w.out_proj, d.hidden, out);
  return Status::ok();
}

}  // namespace ft::engine::ref

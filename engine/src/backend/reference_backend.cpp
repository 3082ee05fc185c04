#include "backend/reference_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ft/engine/ops.h"
#include "ft/engine/ops_dense.h"
#include "ft/engine/ops_hyper.h"
#include "ft/engine/ops_v4_attention.h"

namespace ft::engine {

ReferenceBackend::ReferenceBackend(int threads)
    : arena_(threads > 0 ? threads : tbb::task_arena::automatic) {}

void ReferenceBackend::embedding(const Matrix& table, std::span<const int32_t> ids, float* out) {
  for (std::size_t t = 0; t < ids.size(); ++t) matrix_row_f32(table, ids[t], out + t * std::size_t(table.cols));
}

void ReferenceBackend::linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) {
  Scratch::Frame frame(scratch_);
  float* wf = scratch_.floats(std::size_t(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) matrix_row_f32(w, r, wf + std::size_t(r * w.cols));
  ref::linear(x, wf, bias, y, T, std::size_t(w.rows), std::size_t(w.cols));
}

void ReferenceBackend::rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim,
                                float eps, bool zero_centered) {
  ref::rms_norm(x, weight, out, rows, dim, eps, zero_centered);
}

void ReferenceBackend::silu_mul(const float* gate, const float* up, float* out, std::size_t n) {
  ref::silu_mul(gate, up, out, n);
}

void ReferenceBackend::mul_sigmoid(float* x, const float* gate, std::size_t n) { ref::mul_sigmoid(x, gate, n); }

void ReferenceBackend::add(float* y, const float* x, std::size_t n) { ref::add_inplace(y, x, n); }

void ReferenceBackend::rope(float* x, std::size_t T, std::size_t heads, const ref::RopeSpec& spec,
                            const float* inv_freq, const int64_t* positions) {
  const std::vector<float> inv(inv_freq, inv_freq + spec.rotary_dim / 2);
  for (std::size_t t = 0; t < T; ++t) ref::apply_rope(x + t * heads * spec.head_dim, 1, heads, spec, inv, positions[t]);
}

void ReferenceBackend::kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v,
                                std::span<const AttentionSeq> seqs) {
  const std::size_t width = std::size_t(layout.kv_heads_at(layer) * layout.head_dim_at(layer));
  for (const AttentionSeq& s : seqs)
    ref::kv_write(layout, layer, k + s.row0 * width, v + s.row0 * width, s.rows, s.pos0, s.pages);
}

std::pair<float*, float*> ReferenceBackend::gather_kv(const KvLayout& layout, int64_t layer, const AttentionSeq& s) {
  const std::size_t n = std::size_t(s.pos0) + s.rows;
  const std::size_t width = std::size_t(layout.kv_heads_at(layer) * layout.head_dim_at(layer));
  float* k = scratch_.floats(n * width);
  float* v = scratch_.floats(n * width);
  ref::kv_gather(layout, layer, int64_t(n), s.pages, k, v);
  return {k, v};
}

void ReferenceBackend::attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                                 std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt) {
  const std::size_t D = std::size_t(layout.head_dim_at(layer)), KV = std::size_t(layout.kv_heads_at(layer));
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch_);
    const auto [k, v] = gather_kv(layout, layer, s);
    ref::causal_attention(q + s.row0 * heads * D, k, v, out + s.row0 * heads * D, s.rows, std::size_t(s.pos0), heads,
                          KV, D, scale, opt);
  }
}

void ReferenceBackend::layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows,
                                  std::size_t dim, float eps) {
  ref::layer_norm(x, weight, bias, out, rows, dim, eps);
}

void ReferenceBackend::index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                                    const IndexerSpec& spec, std::span<const AttentionSeq> seqs, int32_t* selected) {
  const std::size_t D = std::size_t(layout.head_dim_at(layer)), KV = std::size_t(layout.kv_heads_at(layer)),
                    K = spec.top_k;
  std::size_t T = 0;
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch_);
    const std::size_t n = std::size_t(s.pos0) + s.rows;
    const auto [k, v] = gather_kv(layout, layer, s);
    float* scores = scratch_.floats(n);
    for (std::size_t r = 0; r < s.rows; ++r) {
      const std::size_t row = s.row0 + r, keys = std::size_t(s.pos0) + r + 1;  // causal
      ref::indexer_scores(q + row * spec.heads * spec.head_dim, w + row * spec.heads, k + std::size_t(spec.kv_slot) * D,
                          KV * D, keys, spec, scores);
      ref::top_k_positions(scores, keys, n, K, selected + row * K);
    }
    T = std::max(T, s.row0 + s.rows);
  }
  // Forced: the positions the runtime chose (its own choice kept for the trace), so a near-tie that
  // rounding flipped is compared as the same function.
  if (forced_ && forced_selections_ < forced_->selections.size() && forced_->selection_k == K &&
      forced_->selections[forced_selections_].size() == T * K) {
    if (trace_) trace_->unforced_selections.emplace_back(selected, selected + T * K);
    std::copy_n(forced_->selections[forced_selections_++].data(), T * K, selected);
  } else if (forced_) {
    forced_selections_ = forced_->selections.size();  // out of step: select freely from here on
  }
  record_selection(selected, T, K);
}

void ReferenceBackend::sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads,
                                        float scale, std::span<const AttentionSeq> seqs, const int32_t* selected,
                                        std::size_t top_k, float* out) {
  const std::size_t D = std::size_t(layout.head_dim_at(layer)), KV = std::size_t(layout.kv_heads_at(layer));
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch_);
    const auto [k, v] = gather_kv(layout, layer, s);
    for (std::size_t r = 0; r < s.rows; ++r) {
      const std::size_t row = s.row0 + r;
      ref::sparse_attention_row(q + row * heads * D, k, v, heads, KV, D, selected + row * top_k, top_k, scale,
                                out + row * heads * D);
    }
  }
}

bool ReferenceBackend::follow_forced_routing(int32_t* chosen, std::size_t T, std::size_t K) {
  if (forced_ && forced_calls_ < forced_->calls.size() && forced_->top_k == K &&
      forced_->calls[forced_calls_].size() == T * K) {
    if (trace_) trace_->unforced.emplace_back(chosen, chosen + T * K);  // its own choice, for the trace
    std::copy_n(forced_->calls[forced_calls_++].data(), T * K, chosen);
    return true;
  }
  if (forced_) forced_calls_ = forced_->calls.size();  // out of step: route freely from here on
  return false;
}

void ReferenceBackend::moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) {
  const std::size_t H = std::size_t(w.hidden), E = w.router_spec.num_experts, K = w.router_spec.top_k;
  Scratch::Frame frame(scratch_);
  float* logits = scratch_.floats(T * E);
  float* weights = scratch_.floats(T * K);
  int32_t* chosen = scratch_.take<int32_t>(T * K);
  linear(router_x ? router_x : x, T, w.router, w.router_bias, logits);
  ref::route_top_k(logits, T, w.router_spec, chosen, weights);
  if (follow_forced_routing(chosen, T, K)) ref::route_weights_for(logits, T, w.router_spec, chosen, weights);
  record_routing(chosen, T, K);
  routed_experts(w, x, T, chosen, weights, out);
  if (w.has_shared) {
    float* shared = scratch_.floats(T * H);
    float* gate = scratch_.floats(T);
    swiglu(w.shared, x, shared, T);
    if (w.shared_gated) linear(x, T, w.shared_gate, nullptr, gate);
    for (std::size_t t = 0; t < T; ++t) {
      const float g = w.shared_gated ? ref::sigmoid(gate[t]) : 1.0f;
      for (std::size_t d = 0; d < H; ++d) out[t * H + d] += g * shared[t * H + d];
    }
  }
}

void ReferenceBackend::moe_chosen(const MoeWeights& w, const float* x, std::size_t T, const int32_t* choice,
                                  float* out) {
  const std::size_t E = w.router_spec.num_experts, K = w.router_spec.top_k;
  Scratch::Frame frame(scratch_);
  float* logits = scratch_.floats(T * E);
  float* weights = scratch_.floats(T * K);
  int32_t* chosen = scratch_.take<int32_t>(T * K);
  std::copy_n(choice, T * K, chosen);
  linear(x, T, w.router, w.router_bias, logits);
  follow_forced_routing(chosen, T, K);
  ref::route_weights_for(logits, T, w.router_spec, chosen, weights);
  record_routing(chosen, T, K);
  routed_experts(w, x, T, chosen, weights, out);
}

void ReferenceBackend::swiglu(const SwiGluMatrices& m, const float* in, float* res, std::size_t n) {
  Scratch::Frame f(scratch_);
  const std::size_t I = std::size_t(m.inter());
  float* g = scratch_.floats(n * I);
  float* u = scratch_.floats(n * I);
  linear(in, n, m.gate, nullptr, g);
  linear(in, n, m.up, nullptr, u);
  ref::silu_mul(g, u, g, n * I);
  linear(g, n, m.down, nullptr, res);
}

void ReferenceBackend::routed_experts(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen,
                                      const float* weights, float* out) {
  const std::size_t H = std::size_t(w.hidden), E = w.router_spec.num_experts, K = w.router_spec.top_k;
  // Each expert once for all its tokens; experts added in ascending index order, as HF's loop over
  // expert_hit does.
  std::vector<std::vector<std::pair<std::size_t, float>>> routed(E);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t i = 0; i < K; ++i) routed[std::size_t(chosen[t * K + i])].push_back({t, weights[t * K + i]});
  std::fill(out, out + T * H, 0.0f);
  // A routed expert: the plain SwiGLU, or with its biases and the family's GLU (gpt-oss).
  const auto expert = [&](std::size_t e, const float* in, float* res, std::size_t n) {
    const SwiGluMatrices& m = w.experts[e];
    if (w.plain_experts()) return swiglu(m, in, res, n);
    Scratch::Frame f(scratch_);
    const std::size_t I = std::size_t(m.inter());
    float* g = scratch_.floats(n * I);
    float* u = scratch_.floats(n * I);
    linear(in, n, m.gate, w.gate_bias ? w.gate_bias + e * I : nullptr, g);
    linear(in, n, m.up, w.up_bias ? w.up_bias + e * I : nullptr, u);
    for (std::size_t i = 0; i < n * I; ++i) g[i] = ref::expert_glu(w.glu, g[i], u[i]);
    linear(g, n, m.down, w.down_bias ? w.down_bias + e * H : nullptr, res);
  };
  for (std::size_t e = 0; e < E; ++e) {
    const auto& tokens = routed[e];
    if (tokens.empty()) continue;
    Scratch::Frame f(scratch_);
    const std::size_t n = tokens.size();
    float* xs = scratch_.floats(n * H);
    float* ys = scratch_.floats(n * H);
    for (std::size_t j = 0; j < n; ++j) std::memcpy(xs + j * H, x + tokens[j].first * H, H * sizeof(float));
    expert(e, xs, ys, n);
    for (std::size_t j = 0; j < n; ++j) {
      float* o = out + tokens[j].first * H;
      const float wgt = tokens[j].second;
      for (std::size_t d = 0; d < H; ++d) o[d] += ys[j * H + d] * wgt;
    }
  }
}

void ReferenceBackend::hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                              const HyperSpec& spec, float* x, float* post, float* comb) {
  ref::hc_pre(h, fn, base, scale, T, spec, x, post, comb);
}

void ReferenceBackend::hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
                               const HyperSpec& spec, float* h_new) {
  ref::hc_post(h, out, post, comb, T, spec, h_new);
}

void ReferenceBackend::hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                               const HyperSpec& spec, float* y) {
  ref::hc_head(h, fn, base, scale, T, spec, y);
}

void ReferenceBackend::v4_index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                                       const IndexerSpec& spec, std::size_t rate, std::span<const AttentionSeq> seqs,
                                       int32_t* picks) {
  const std::size_t D = std::size_t(layout.head_dim_at(layer)), KV = std::size_t(layout.kv_heads_at(layer));
  const std::size_t Di = spec.head_dim, K = spec.top_k;
  std::size_t T = 0;
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch_);
    const auto [k, v] = gather_kv(layout, layer, s);
    // Entry e's index key: the K row of the position closing its window, from slot kv_slot on.
    const std::size_t n = (std::size_t(s.pos0) + s.rows) / rate;
    float* keys = scratch_.floats(std::max<std::size_t>(n, 1) * Di);
    for (std::size_t e = 0; e < n; ++e)
      std::copy_n(k + ((e + 1) * rate - 1) * KV * D + std::size_t(spec.kv_slot) * D, Di, keys + e * Di);
    for (std::size_t r = 0; r < s.rows; ++r) {
      const std::size_t row = s.row0 + r;
      ref::v4_index_select(q + row * spec.heads * Di, w + row * spec.heads, keys, n, s.pos0 + int64_t(r), rate, spec,
                           picks + row * K);
    }
    T = std::max(T, s.row0 + s.rows);
  }
  // Forced: the entries the runtime chose (its own choice kept for the trace), as index_select.
  if (forced_ && forced_selections_ < forced_->selections.size() && forced_->selection_k == K &&
      forced_->selections[forced_selections_].size() == T * K) {
    if (trace_) trace_->unforced_selections.emplace_back(picks, picks + T * K);
    std::copy_n(forced_->selections[forced_selections_++].data(), T * K, picks);
  } else if (forced_) {
    forced_selections_ = forced_->selections.size();
  }
  record_selection(picks, T, K);
}

void ReferenceBackend::v4_attention(const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                                    const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs,
                                    const int32_t* picks, std::size_t top_k, float* out) {
  const std::size_t D = std::size_t(layout.head_dim_at(layer)), KV = std::size_t(layout.kv_heads_at(layer));
  const std::size_t d = spec.head_dim, row = spec.heads * d;
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch_);
    const auto [k, v] = gather_kv(layout, layer, s);
    const std::size_t n = std::size_t(s.pos0) + s.rows;
    // The window's rows: slot 0's keys; the entries: slot 0's values where their windows close.
    float* kv = scratch_.floats(n * d);
    for (std::size_t p = 0; p < n; ++p) std::copy_n(k + p * KV * D, d, kv + p * d);
    const std::size_t entries = spec.rate ? n / spec.rate : 0;
    float* ent = scratch_.floats(std::max<std::size_t>(entries, 1) * d);
    for (std::size_t e = 0; e < entries; ++e) std::copy_n(v + ((e + 1) * spec.rate - 1) * KV * D, d, ent + e * d);
    ref::v4_attention(q + s.row0 * row, kv, s.rows, s.pos0, ent, entries, picks ? picks + s.row0 * top_k : nullptr,
                      top_k, sinks, inv_freq, spec, out + s.row0 * row);
  }
}

void ReferenceBackend::deltanet(const ref::DeltaNetDims& d, const DeltaNetParams& p, const float* qkv,
                                const float* z, const float* b, const float* a, std::span<const DeltaNetSeq> seqs,
                                float* out) {
  const std::size_t conv_dim = d.conv_dim(), key_dim = d.key_dim(), value_dim = d.value_dim(), nv = d.num_v_heads;
  for (const DeltaNetSeq& s : seqs) {
    Scratch::Frame frame(scratch_);
    const std::size_t T = s.rows;
    float* mixed = scratch_.floats(T * conv_dim);
    const float* in = qkv + s.row0 * conv_dim;
    if (T == 1) ref::causal_conv1d_silu_step(in, conv_dim, p.conv1d, d.conv_kernel, s.conv, mixed);
    else ref::causal_conv1d_silu(in, T, conv_dim, p.conv1d, d.conv_kernel, s.conv, mixed);
    float* g = scratch_.floats(T * nv);
    float* beta = scratch_.floats(T * nv);
    ref::deltanet_gates(a + s.row0 * nv, b + s.row0 * nv, p.A_log, p.dt_bias, T, nv, g, beta);
    ref::DeltaRuleInput dr;
    dr.q = mixed;
    dr.k = mixed + key_dim;
    dr.v = mixed + 2 * key_dim;
    dr.qk_stride = dr.v_stride = conv_dim;
    dr.g = g;
    dr.beta = beta;
    float* o = out + s.row0 * value_dim;
    if (T == 1) ref::gated_delta_rule_recurrent(d, dr, T, s.recurrent, o);
    else ref::gated_delta_rule_chunked(d, dr, T, s.recurrent, o);
    ref::rms_norm_gated(o, z + s.row0 * value_dim, p.norm, o, T * nv, d.head_v_dim, d.norm_eps);
  }
}

}  // namespace ft::engine

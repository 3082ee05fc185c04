#include "backend/cpu_backend.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ft/engine/ops.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_dense.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/deltanet.h"
#include "ops/cpu/dequant_rows.h"
#include "ops/cpu/dsa.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/moe.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/v4.h"

namespace ft::engine {
namespace {

// fn(begin, end) over [0, n) items of `width` elements each, in parallel when there is enough work.
template <typename Fn>
void for_range(std::size_t n, std::size_t width, const Fn& fn) {
  if (n * width <= cpu::kParallelElems) {
    fn(std::size_t(0), n);
    return;
  }
  const std::size_t grain = std::max<std::size_t>(1, 4096 / std::max<std::size_t>(width, 1));
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::size_t>& r) { fn(r.begin(), r.end()); });
}

}  // namespace

CpuBackend::CpuBackend(int threads, CpuIsa isa, bool deterministic, bool bf16_activations)
    : arena_(threads > 0 ? threads : tbb::task_arena::automatic),
      isa_(cpu_isa_supported(isa) ? isa : best_cpu_isa()),
      deterministic_(deterministic),
      bf16_x_(bf16_activations && !deterministic) {}

CpuIsa CpuBackend::isa_for(std::size_t rows) const {
  // AMX tiles pay for prefill-sized products; a decode-sized one is a weight stream, which the
  // AVX-512 kernels run faster (measured: docs/perf-notes.md "CPU runtime").
  if (isa_ == CpuIsa::kAmxBf16 && !deterministic_ && rows <= 16) return CpuIsa::kAvx512;
  return isa_;
}

void CpuBackend::embedding(const Matrix& table, std::span<const int32_t> ids, float* out) {
  const OpTimer timer(profile_, OpProfile::kEmbedding);
  // Rows in parallel: a prompt's rows are scattered over a table that may still be on disk, and
  // each first touch of a mapped row is a page fault (a read) the other threads can overlap.
  const std::size_t cols = std::size_t(table.cols);
  for_range(ids.size(), cols, [&](std::size_t a, std::size_t b) {
    for (std::size_t t = a; t < b; ++t) cpu::decode_row(isa_, table, ids[t], out + t * cols);
  });
}

void CpuBackend::linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) {
  const OpTimer timer(profile_, OpProfile::kLinear);
  cpu::linear(scratch_, isa_for(T), x, T, w, bias, y, !deterministic_, bf16_x_);
}

void CpuBackend::linears(const float* x, std::size_t T, std::span<const LinearOut> outs) {
  const OpTimer timer(profile_, OpProfile::kLinear);
  cpu::linears(scratch_, isa_for(T), x, T, outs, !deterministic_, bf16_x_);
}

void CpuBackend::rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim,
                          float eps, bool zero_centered) {
  const OpTimer timer(profile_, OpProfile::kNorm);
  for_range(rows, dim, [&](std::size_t a, std::size_t b) {
    cpu::rms_norm(isa_, x + a * dim, weight, out + a * dim, b - a, dim, eps, zero_centered);
  });
}

void CpuBackend::silu_mul(const float* gate, const float* up, float* out, std::size_t n) {
  const OpTimer timer(profile_, OpProfile::kElementwise);
  for_range(n, 1, [&](std::size_t a, std::size_t b) { cpu::silu_mul(isa_, gate + a, up + a, out + a, b - a); });
}

void CpuBackend::mul_sigmoid(float* x, const float* gate, std::size_t n) {
  const OpTimer timer(profile_, OpProfile::kElementwise);
  for_range(n, 1, [&](std::size_t a, std::size_t b) { ref::mul_sigmoid(x + a, gate + a, b - a); });
}

void CpuBackend::add(float* y, const float* x, std::size_t n) {
  const OpTimer timer(profile_, OpProfile::kElementwise);
  for_range(n, 1, [&](std::size_t a, std::size_t b) { ref::add_inplace(y + a, x + a, b - a); });
}

const CpuBackend::RopeTable& CpuBackend::rope_table(const float* inv_freq, std::size_t half, float attention_factor,
                                                    int64_t max_position) {
  RopeTable* table = nullptr;
  for (RopeTable& t : rope_tables_) {
    if (t.inv_freq.size() == half && t.attention_factor == attention_factor &&
        std::equal(t.inv_freq.begin(), t.inv_freq.end(), inv_freq))
      table = &t;
  }
  if (!table) {
    rope_tables_.push_back({std::vector<float>(inv_freq, inv_freq + half), attention_factor, {}, {}});
    table = &rope_tables_.back();
  }
  const std::size_t have = half ? table->cos.size() / half : 0, need = std::size_t(max_position) + 1;
  if (need > have) {
    // Grow to the next power of two so a decode does not recompute the table every token.
    std::size_t n = std::max<std::size_t>(need, 1024);
    n = std::size_t(1) << std::size_t(std::ceil(std::log2(double(n))));
    table->cos.resize(n * half);
    table->sin.resize(n * half);
    for (std::size_t p = have; p < n; ++p) {
      for (std::size_t i = 0; i < half; ++i) {
        // HF: freqs = inv_freq * position in fp32, then cos/sin in fp32, times attention_scaling.
        const float angle = inv_freq[i] * float(p);
        table->cos[p * half + i] = std::cos(angle) * attention_factor;
        table->sin[p * half + i] = std::sin(angle) * attention_factor;
      }
    }
  }
  return *table;
}

void CpuBackend::rope(float* x, std::size_t T, std::size_t heads, const ref::RopeSpec& spec, const float* inv_freq,
                      const int64_t* positions) {
  const OpTimer timer(profile_, OpProfile::kRope);
  const std::size_t half = spec.rotary_dim / 2, D = spec.head_dim;
  if (half == 0 || T == 0) return;
  const int64_t max_pos = *std::max_element(positions, positions + T);
  const RopeTable& table = rope_table(inv_freq, half, spec.attention_factor, max_pos);
  for_range(T, heads * D, [&](std::size_t a, std::size_t b) {
    for (std::size_t t = a; t < b; ++t) {
      const float* c = table.cos.data() + std::size_t(positions[t]) * half;
      const float* s = table.sin.data() + std::size_t(positions[t]) * half;
      for (std::size_t h = 0; h < heads; ++h) ref::rope_rotate(x + (t * heads + h) * D, c, s, spec);
    }
  });
}

void CpuBackend::kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v,
                          std::span<const AttentionSeq> seqs) {
  const OpTimer timer(profile_, OpProfile::kKvWrite);
  cpu::kv_write(layout, layer, k, v, seqs);
}

void CpuBackend::attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                           std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt) {
  const OpTimer timer(profile_, OpProfile::kAttention);
  std::size_t rows = 0;
  for (const AttentionSeq& s : seqs) rows += s.rows;
  cpu::attention(scratch_, isa_for(rows), layout, layer, q, heads, scale, seqs, out, opt, bf16_x_);
}

void CpuBackend::layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows,
                            std::size_t dim, float eps) {
  const OpTimer timer(profile_, OpProfile::kNorm);
  for_range(rows, dim, [&](std::size_t a, std::size_t b) {
    ref::layer_norm(x + a * dim, weight, bias, out + a * dim, b - a, dim, eps);
  });
}

void CpuBackend::index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                              const IndexerSpec& spec, std::span<const AttentionSeq> seqs, int32_t* selected) {
  const OpTimer timer(profile_, OpProfile::kAttention);
  cpu::index_select(scratch_, layout, layer, q, w, spec, seqs, selected);
  if (!trace_) return;
  std::size_t T = 0;
  for (const AttentionSeq& s : seqs) T = std::max(T, s.row0 + s.rows);
  record_selection(selected, T, spec.top_k);
}

void CpuBackend::sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                                  std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k,
                                  float* out) {
  const OpTimer timer(profile_, OpProfile::kAttention);
  cpu::sparse_attention(layout, layer, q, heads, scale, seqs, selected, top_k, out);
}

void CpuBackend::moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) {
  const OpTimer timer(profile_, OpProfile::kMoe);
  if (!trace_)
    return cpu::moe(scratch_, isa_for(T), w, x, T, out, router_x, nullptr, profile_, !deterministic_, bf16_x_);
  std::vector<int32_t> chosen(T * w.router_spec.top_k);
  cpu::moe(scratch_, isa_for(T), w, x, T, out, router_x, chosen.data(), profile_, !deterministic_, bf16_x_);
  record_routing(chosen.data(), T, w.router_spec.top_k);
}

void CpuBackend::moe_chosen(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen, float* out) {
  const OpTimer timer(profile_, OpProfile::kMoe);
  Scratch::Frame frame(scratch_);
  const std::size_t E = w.router_spec.num_experts, K = w.router_spec.top_k;
  float* logits = scratch_.floats(T * E);
  float* weights = scratch_.floats(T * K);
  cpu::linear(scratch_, isa_for(T), x, T, w.router, w.router_bias, logits, !deterministic_, bf16_x_);
  ref::route_weights_for(logits, T, w.router_spec, chosen, weights);
  cpu::moe_experts(scratch_, isa_for(T), w, x, T, K, chosen, weights, out, profile_, !deterministic_, nullptr, nullptr,
                   bf16_x_);
  record_routing(chosen, T, K);
}

void CpuBackend::hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                        const HyperSpec& spec, float* x, float* post, float* comb) {
  const OpTimer timer(profile_, OpProfile::kNorm);
  cpu::hc_pre(h, fn, base, scale, T, spec, x, post, comb);
}

void CpuBackend::hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
                         const HyperSpec& spec, float* h_new) {
  const OpTimer timer(profile_, OpProfile::kElementwise);
  cpu::hc_post(h, out, post, comb, T, spec, h_new);
}

void CpuBackend::hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                         const HyperSpec& spec, float* y) {
  const OpTimer timer(profile_, OpProfile::kNorm);
  cpu::hc_head(h, fn, base, scale, T, spec, y);
}

void CpuBackend::v4_index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                                 const IndexerSpec& spec, std::size_t rate, std::span<const AttentionSeq> seqs,
                                 int32_t* picks) {
  const OpTimer timer(profile_, OpProfile::kAttention);
  cpu::v4_index_select(scratch_, layout, layer, q, w, spec, rate, seqs, picks);
  if (!trace_) return;
  std::size_t T = 0;
  for (const AttentionSeq& s : seqs) T = std::max(T, s.row0 + s.rows);
  record_selection(picks, T, spec.top_k);
}

void CpuBackend::v4_attention(const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                              const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs,
                              const int32_t* picks, std::size_t top_k, float* out) {
  const OpTimer timer(profile_, OpProfile::kAttention);
  cpu::v4_attention(scratch_, layout, layer, q, spec, sinks, inv_freq, seqs, picks, top_k, out);
}

void CpuBackend::deltanet(const ref::DeltaNetDims& dims, const DeltaNetParams& params, const float* qkv,
                          const float* z, const float* b, const float* a, std::span<const DeltaNetSeq> seqs,
                          float* out) {
  const OpTimer timer(profile_, OpProfile::kDeltaNet);
  cpu::deltanet(scratch_, isa_, dims, params, qkv, z, b, a, seqs, out);
}

}  // namespace ft::engine

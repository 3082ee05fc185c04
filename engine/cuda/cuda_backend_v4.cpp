// DeepSeek-V4's ops: hyper-connections, compressors, its attention and the host-routed MoE.
#include "cuda_backend.h"

namespace ft::engine {

void CudaBackend::expert_glu(const ref::ExpertGlu& glu, const float* gate, const float* up, float* out, std::size_t n) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::expert_glu(gate, up, out, n, glu, s());
}

void CudaBackend::hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                         const HyperSpec& spec, float* x, float* post, float* comb) {
  Timed timer(this, OpProfile::kNorm);
  if (replaying()) return;
  if (!cuda::hyper_fits(spec)) return fail(hyper_unfit(spec));
  cuda::hc_pre(h, fn, base, scale, int(T), spec, x, post, comb, s());
}

void CudaBackend::hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
                          const HyperSpec& spec, float* h_new) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  if (!cuda::hyper_fits(spec)) return fail(hyper_unfit(spec));
  cuda::hc_post(h, out, post, comb, int(T), spec, h_new, s());
}

void CudaBackend::hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                          const HyperSpec& spec, float* y) {
  Timed timer(this, OpProfile::kNorm);
  if (replaying()) return;
  if (!cuda::hyper_fits(spec)) return fail(hyper_unfit(spec));
  cuda::hc_head(h, fn, base, scale, int(T), spec, y, s());
}

void CudaBackend::v4_compress(const CompressorSpec& spec, const CompressorParams& params, const float* kv,
                              const float* gate, std::span<const CompressorSeq> seqs, float* entries) {
  Timed timer(this, OpProfile::kAttention);
  std::size_t T = 0;
  for (const CompressorSeq& q : seqs) T = std::max(T, q.row0 + q.rows);
  std::vector<cuda::CompressorSeqDev> dev(seqs.size());
  std::vector<int32_t> row_seq(T, -1);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const CompressorSeq& q = seqs[i];
    dev[i] = {int32_t(q.row0), int32_t(q.rows), q.pos0, q.kv, q.gate, int64_t(q.ld)};
    for (std::size_t r = 0; r < q.rows; ++r) row_seq[q.row0 + r] = int32_t(i);
  }
  const cuda::CompressorSeqDev* dev_seqs = upload(dev.data(), dev.size());
  const int32_t* dev_rows = upload(row_seq.data(), row_seq.size());
  if (replaying() || T == 0) return;
  if (spec.rate == 0 || spec.rope_dims > spec.width || spec.rope_dims % 2 != 0)
    return fail("DeepSeek-V4's compressor: rate " + std::to_string(spec.rate) + ", rope dims " +
                std::to_string(spec.rope_dims) + " of " + std::to_string(spec.width) + " do not fit the GPU's kernel");
  cuda::v4_compress(spec, params, kv, gate, dev_seqs, dev_rows, int(T), entries, s());
}

void CudaBackend::v4_index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                                  const IndexerSpec& spec, std::size_t rate, std::span<const AttentionSeq> seqs,
                                  int32_t* picks) {
  select_keys(layout, layer, q, w, spec, rate, seqs, picks, "DeepSeek-V4's indexer");
}

void CudaBackend::v4_attention(const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                               const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs,
                               const int32_t* picks, std::size_t top_k, float* out) {
  Timed timer(this, OpProfile::kAttention);
  const AttnBatch& b = attention_batch(layout, seqs);
  if (replaying()) return;
  // The most keys a row reads: its window and its entries (all a sequence holds, or the picks).
  int64_t ctx = 0;
  for (const AttentionSeq& sq : seqs) ctx = std::max(ctx, sq.pos0 + int64_t(sq.rows));
  if (mode_ != cuda::PassGraphs::Mode::kRun) ctx = std::max(ctx, kv_tokens_);
  const int64_t window = spec.window > 0 ? std::min(spec.window, ctx) : ctx;
  const int64_t entries = picks ? int64_t(top_k) : spec.rate > 0 ? ctx / int64_t(spec.rate) : 0;
  const int max_keys = int(std::max<int64_t>(window + entries, 1));
  if (!cuda::v4_attention(layout, int(layer), q, b.rows, spec, sinks, inv_freq, picks, int(top_k), b.row_seq, b.seqs,
                          b.pages, max_keys, out, s()))
    fail("DeepSeek-V4's attention over " + std::to_string(max_keys) + " keys of heads " +
         std::to_string(layout.head_dim_at(layer)) + " wide does not fit the GPU's kernel");
}

void CudaBackend::moe_chosen(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen, float* out) {
  Timed timer(this, OpProfile::kMoe);
  Scratch::Frame frame(scratch_);
  moe_host_routed(w, x, x, T, chosen, out);
}

void CudaBackend::moe_host_routed(const MoeWeights& w, const float* x, const float* router_x, std::size_t T,
                                  const int32_t* chosen, float* out) {
  if (offload_ && !offload_ready(w)) return;
  if (mode_ != cuda::PassGraphs::Mode::kRun)
    return fail("internal error: a MoE routed on the host cannot be recorded as a graph");
  host_synced_ = true;
  if (T == 0) return;
  std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeRoute, true);
  const std::size_t E = w.router_spec.num_experts, K = w.router_spec.top_k;
  float* logits = scratch_.floats(T * E);
  linear(router_x, T, w.router, w.router_bias, logits);
  auto pinned = pass_host_.take(T * E * sizeof(float) + T * K * (sizeof(int32_t) + sizeof(float)));
  if (!pinned) throw std::bad_alloc();
  auto* logits_host = reinterpret_cast<float*>(*pinned);
  auto* chosen_host = reinterpret_cast<int32_t*>(*pinned + T * E * sizeof(float));
  auto* weights_host = reinterpret_cast<float*>(*pinned + T * E * sizeof(float) + T * K * sizeof(int32_t));
  check(cudaMemcpyAsync(logits_host, logits, T * E * sizeof(float), cudaMemcpyDeviceToHost, s()), "routing");
  wait_mid_pass("routing");
  if (!failure_.empty()) return;
  const ref::RouterSpec* spec = host_router(w);
  if (!spec) return;
  if (chosen) {
    std::memcpy(chosen_host, chosen, T * K * sizeof(int32_t));
    ref::route_weights_for(logits_host, T, *spec, chosen_host, weights_host);
  } else {
    ref::route_top_k(logits_host, T, *spec, chosen_host, weights_host);
  }
  if (trace_) pending_traces_.push_back({chosen_host, T, K});  // pinned: valid until the pass ends
  const int32_t* chosen_dev = upload(chosen_host, T * K);
  const float* weights_dev = upload(weights_host, T * K);
  const bool decode = T <= kFusedMoeTokens;
  const cuda::ExpertTable* table = offload_ ? nullptr : expert_table(w);
  const cuda::ChoicesByExpert by_expert =
      decode && (offload_ || table) ? upload_by_expert(chosen_host, weights_host, T, K) : cuda::ChoicesByExpert{};
  if (offload_) {
    phase.reset();
    return offloaded_experts(w, x, T, chosen_dev, weights_dev, by_expert, out);
  }
  phase.emplace(this, OpProfile::kMoeExperts, true);
  if (table && decode) {
    float* h = scratch_.floats(T * K * std::size_t(table->inter));
    experts_decode(*table, x, T, K, chosen_dev, h, by_expert, out);
  } else if (table) {
    std::vector<int32_t> counts(E, 0);
    for (std::size_t i = 0; i < T * K; ++i) ++counts[std::size_t(chosen_host[i])];
    experts_batched(*table, w, x, T, K, counts, chosen_dev, weights_dev, out);
  } else {
    experts_one_by_one(w, x, T, K, chosen_dev, weights_dev, out);
  }
  phase.emplace(this, OpProfile::kMoeCombine, true);
  add_shared_expert(w, x, T, out);
}

cuda::ChoicesByExpert CudaBackend::upload_by_expert(const int32_t* chosen, const float* weights, std::size_t T,
                                                    std::size_t K) {
  std::vector<int32_t> expert(T * K), pair(T * K);
  std::vector<float> weight(T * K);
  std::vector<std::pair<int32_t, int32_t>> order(K);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t k = 0; k < K; ++k) order[k] = {chosen[t * K + k], int32_t(t * K + k)};
    std::sort(order.begin(), order.end());
    for (std::size_t k = 0; k < K; ++k) {
      expert[t * K + k] = order[k].first;
      pair[t * K + k] = order[k].second;
      weight[t * K + k] = weights[std::size_t(order[k].second)];
    }
  }
  return {const_cast<int32_t*>(upload(expert.data(), expert.size())),
          const_cast<int32_t*>(upload(pair.data(), pair.size())),
          const_cast<float*>(upload(weight.data(), weight.size()))};
}

const ref::RouterSpec* CudaBackend::host_router(const MoeWeights& w) {
  if (auto it = host_routers_.find(&w); it != host_routers_.end()) return &it->second.spec;
  HostRouter hr;
  hr.spec = w.router_spec;
  const std::size_t E = w.router_spec.num_experts;
  const auto fetch = [&](const float* dev, std::vector<float>& host) -> const float* {
    if (!dev) return nullptr;
    host.resize(E);
    check(cudaMemcpy(host.data(), dev, E * sizeof(float), cudaMemcpyDeviceToHost), "copying the router's bias");
    return host.data();
  };
  if (!failure_.empty()) return nullptr;
  HostRouter& kept = host_routers_[&w] = std::move(hr);
  kept.spec.correction_bias = fetch(w.router_spec.correction_bias, kept.bias);
  kept.spec.per_expert_scale = fetch(w.router_spec.per_expert_scale, kept.scale);
  if (!failure_.empty()) {
    host_routers_.erase(&w);
    return nullptr;
  }
  return &kept.spec;
}

std::string CudaBackend::hyper_unfit(const HyperSpec& spec) {
  return "DeepSeek-V4's hyper-connections on the GPU take up to " + std::to_string(cuda::kHyperMaxStreams) +
         " streams, not " + std::to_string(spec.streams);
}

}  // namespace ft::engine

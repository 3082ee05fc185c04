// Attention over paged KV (decode and prefill kernels, the pass's sequence tables), DeepSeek sparse
// attention's indexer and Gated DeltaNet.
#include "cuda_backend.h"

namespace ft::engine {

void CudaBackend::rope(float* x, std::size_t T, std::size_t heads, const ref::RopeSpec& spec, const float* inv_freq,
                       const int64_t* positions) {
  Timed timer(this, OpProfile::kRope);
  if (replaying()) return;
  cuda::rope(x, int(T), int(heads), spec, inv_freq, positions, s());
}

void CudaBackend::split_gated_query(const float* qg, std::size_t T, std::size_t heads, std::size_t head_dim, float* q,
                                    float* gate) {
  if (replaying()) return;
  cuda::split_gated_query(qg, int(T), int(heads), int(head_dim), q, gate, s());
}

void CudaBackend::kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v,
                           std::span<const AttentionSeq> seqs) {
  Timed timer(this, OpProfile::kKvWrite);
  const AttnBatch& b = attention_batch(layout, seqs);
  if (replaying()) return;
  cuda::kv_write(layout, int(layer), k, v, b.rows, b.row_seq, b.seqs, b.pages, s());
}

void CudaBackend::attention_inputs(const KvLayout& layout, int64_t layer, float* q, float* k, const float* v,
                                   std::size_t T, std::size_t heads, const QkNorm* norm, const ref::RopeSpec& rope,
                                   const float* inv_freq, const int64_t* positions,
                                   std::span<const AttentionSeq> seqs) {
  if (!norm || norm->per_head) {          // the kernel norms per head; OLMoE's whole-width norm composes
    Timed timer(this, OpProfile::kRope);  // norms, RoPE and the KV write, timed as one
    const AttnBatch& b = attention_batch(layout, seqs);
    if (replaying() && cuda::attention_inputs_fit(layout, int(layer), rope)) return;
    const cuda::QkNormDev dn =
        norm ? cuda::QkNormDev{norm->q, norm->k, norm->eps, norm->zero_centered} : cuda::QkNormDev{};
    if (!replaying() && cuda::attention_inputs(layout, int(layer), q, k, v, int(T), int(heads), norm ? &dn : nullptr,
                                               rope, inv_freq, positions, b.row_seq, b.seqs, b.pages, s()))
      return;
  }
  Backend::attention_inputs(layout, layer, q, k, v, T, heads, norm, rope, inv_freq, positions, seqs);
}

void CudaBackend::attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                            std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt) {
  Timed timer(this, OpProfile::kAttention);
  const AttnBatch& b = attention_batch(layout, seqs);
  if (replaying()) return;
  // The workspace lives as long as the call's kernels are ordered before anything else on the
  // stream that may take the same scratch (one stream: they are).
  Scratch::Frame frame(scratch_);
  const std::size_t work_floats =
      cuda::paged_attention_workspace(layout, int(layer), b.rows, int(heads), opt, b.max_ctx);
  float* work = work_floats ? scratch_.floats(work_floats) : nullptr;
  cuda::paged_attention(layout, int(layer), q, b.rows, int(heads), scale, opt, b.row_seq, b.seqs, b.max_ctx, b.pages,
                        out, work, work_floats, work ? zeroed_counters(split_done_, cuda::kAttnSplitCounters) : nullptr,
                        s());
}

void CudaBackend::layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows,
                             std::size_t dim, float eps) {
  Timed timer(this, OpProfile::kNorm);
  if (replaying()) return;
  cuda::layer_norm(x, weight, bias, out, int(rows), int(dim), eps, s());
}

void CudaBackend::index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                               const IndexerSpec& spec, std::span<const AttentionSeq> seqs, int32_t* selected) {
  select_keys(layout, layer, q, w, spec, 1, seqs, selected, "DeepSeek sparse attention's indexer");
}

void CudaBackend::select_keys(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                              const IndexerSpec& spec, std::size_t rate, std::span<const AttentionSeq> seqs,
                              int32_t* selected, const std::string& who) {
  Timed timer(this, OpProfile::kAttention);
  if (mode_ != cuda::PassGraphs::Mode::kRun) return fail("internal error: " + who + " cannot be recorded as a graph");
  host_synced_ = true;
  if (rate == 0 || !cuda::indexer_scores_fit(layout, int(layer), spec))
    return fail(who + " on the GPU takes bf16 KV and index keys up to " + std::to_string(cuda::kIndexMaxDim) +
                " wide, not " + std::to_string(spec.head_dim));
  const AttnBatch& b = attention_batch(layout, seqs);
  const cuda::IndexRows rows = cuda::index_rows(seqs, rate);
  const std::size_t T = rows.size(), K = spec.top_k;
  if (T == 0) return;
  Scratch::Frame frame(scratch_);
  const cuda::IndexRowDev* rows_dev = upload(rows.dev.data(), T);
  const std::vector<cuda::ScoreChunk> chunks = cuda::score_chunks(rows, kIndexScoreFloats);
  std::size_t most = 1;
  for (const cuda::ScoreChunk& c : chunks) most = std::max(most, std::size_t(c.floats));
  float* scores_dev = scratch_.floats(most);
  auto scores_host = pass_host_.take(most * sizeof(float));
  auto selected_host = pass_host_.take(std::max<std::size_t>(T * K, 1) * sizeof(int32_t));
  if (!scores_host || !selected_host) throw std::bad_alloc();
  const auto* scores = reinterpret_cast<const float*>(*scores_host);
  auto* chosen = reinterpret_cast<int32_t*>(*selected_host);
  for (const cuda::ScoreChunk& c : chunks) {
    cuda::indexer_scores(layout, int(layer), q, w, spec, int(rate), int(c.row0), int(c.row1 - c.row0), rows_dev,
                         c.offset, c.max_keys, b.seqs, b.pages, scores_dev, s());
    const std::size_t bytes = std::size_t(c.floats) * sizeof(float);
    check(cudaMemcpyAsync(*scores_host, scores_dev, bytes, cudaMemcpyDeviceToHost, s()),
          "copying the indexer's scores");
    wait_mid_pass("copying the indexer's scores");
    if (!failure_.empty()) return;
    cuda::select_rows(rows, c, scores, K, chosen);
  }
  // From pinned memory of this pass: it stays until the pass has synchronised at its end.
  check(cudaMemcpyAsync(selected, chosen, T * K * sizeof(int32_t), cudaMemcpyHostToDevice, s()),
        "uploading the indexer's choices");
  record_selection(chosen, T, K);
}

void CudaBackend::sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads,
                                   float scale, std::span<const AttentionSeq> seqs, const int32_t* selected,
                                   std::size_t top_k, float* out) {
  Timed timer(this, OpProfile::kAttention);
  const AttnBatch& b = attention_batch(layout, seqs);
  if (replaying()) return;
  if (!cuda::sparse_attention(layout, int(layer), q, b.rows, int(heads), scale, selected, int(top_k), b.row_seq, b.seqs,
                              b.pages, out, s()))
    fail("DeepSeek sparse attention over " + std::to_string(top_k) + " positions of heads " +
         std::to_string(layout.head_dim_at(layer)) + " wide does not fit the GPU's kernel");
}

void CudaBackend::deltanet_unfuse(const ref::DeltaNetDims& dims, const float* qkvz, const float* ba, std::size_t T,
                                  float* qkv, float* z, float* b, float* a) {
  if (replaying()) return;
  cuda::deltanet_unfuse(dims, qkvz, ba, int(T), qkv, z, b, a, s());
}

void CudaBackend::deltanet(const ref::DeltaNetDims& dims, const DeltaNetParams& params, const float* qkv,
                           const float* z, const float* b, const float* a, std::span<const DeltaNetSeq> seqs,
                           float* out) {
  Timed timer(this, OpProfile::kDeltaNet);
  Scratch::Frame frame(scratch_);
  std::vector<cuda::DeltaNetSeqDev> dev(seqs.size());
  int T = 0, max_rows = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    dev[i] = {int32_t(seqs[i].row0), int32_t(seqs[i].rows), seqs[i].conv, seqs[i].recurrent};
    T = std::max(T, int(seqs[i].row0 + seqs[i].rows));
    max_rows = std::max(max_rows, int(seqs[i].rows));
  }
  float* work = scratch_.floats(cuda::deltanet_work_floats(dims, T));
  const cuda::DeltaNetParamsDev p{params.conv1d, params.dt_bias, params.A_log, params.norm};
  const cuda::DeltaNetSeqDev* dev_seqs = upload(dev.data(), dev.size());
  if (replaying()) return;
  cuda::deltanet(dims, p, qkv, z, b, a, dev_seqs, int(dev.size()), T, max_rows, work, out, s());
}

const CudaBackend::AttnBatch& CudaBackend::attention_batch(const KvLayout& layout, std::span<const AttentionSeq> seqs) {
  if (attn_.pass == pass_ && attn_.key == seqs.data() && attn_.n == seqs.size()) return attn_;
  std::vector<cuda::AttnSeqDev> dev(seqs.size());
  std::vector<int32_t> row_seq;
  std::vector<std::byte*> pages;
  int max_ctx = 0;
  // A recorded or replayed pass: every page table padded to the shape's context and the launches
  // shaped for it, so that the recording serves every step up to that context.
  const bool shaped = mode_ != cuda::PassGraphs::Mode::kRun;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& q = seqs[i];
    const int64_t ctx = q.pos0 + int64_t(q.rows);
    dev[i] = {int32_t(q.row0), int32_t(q.rows), int32_t(q.pos0), int32_t(pages.size())};
    for (int64_t p = 0; p < layout.pages_for(ctx); ++p) pages.push_back(q.pages[p]);
    if (shaped) {
      if (ctx > kv_tokens_) fail("internal error: a sequence is longer than its pass's shape");
      for (int64_t p = layout.pages_for(ctx); p < layout.pages_for(kv_tokens_); ++p) pages.push_back(nullptr);
    }
    if (row_seq.size() < q.row0 + q.rows) row_seq.resize(q.row0 + q.rows, 0);
    for (std::size_t r = 0; r < q.rows; ++r) row_seq[q.row0 + r] = int32_t(i);
    max_ctx = std::max(max_ctx, int(ctx));
  }
  if (shaped) max_ctx = int(kv_tokens_);
  attn_ = {seqs.data(),
           seqs.size(),
           pass_,
           int(row_seq.size()),
           max_ctx,
           upload(row_seq.data(), row_seq.size()),
           upload(dev.data(), dev.size()),
           upload(pages.data(), pages.size())};
  return attn_;
}

}  // namespace ft::engine

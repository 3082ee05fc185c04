// The fp32 definitions behind the Backend interface: every op is the plain reference of
// ops_*.h, weights are converted to fp32 as they are read (a whole matrix per call: this backend
// exists for tests on small models), KV pages are fp32, Gated DeltaNet prefill takes HF's chunked
// form. Golden tests hold it to HF transformers at 1e-3; the fast backends are tested against it.
#pragma once

#include <tbb/task_arena.h>

#include <utility>

#include "backend/host_backend.h"

namespace ft::engine {

class ReferenceBackend final : public HostBackend {
 public:
  explicit ReferenceBackend(int threads);

  BackendKind kind() const override { return BackendKind::kReference; }
  KvDType kv_dtype() const override { return KvDType::kF32; }
  int threads() const override { return arena_.max_concurrency(); }
  Status execute(const std::function<void()>& fn) override {
    arena_.execute(fn);
    return Status::ok();
  }

  void embedding(const Matrix& table, std::span<const int32_t> ids, float* out) override;
  void linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) override;
  void rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim, float eps,
                bool zero_centered) override;
  void silu_mul(const float* gate, const float* up, float* out, std::size_t n) override;
  void mul_sigmoid(float* x, const float* gate, std::size_t n) override;
  void add(float* y, const float* x, std::size_t n) override;
  void rope(float* x, std::size_t T, std::size_t heads, const ref::RopeSpec& spec, const float* inv_freq,
            const int64_t* positions) override;
  void kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v,
                std::span<const AttentionSeq> seqs) override;
  void attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                 std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt) override;
  void moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) override;
  bool set_forced_routing(const RoutingTrace* forced) override {
    forced_ = forced;
    forced_calls_ = 0;
    forced_selections_ = 0;
    return true;
  }
  bool has_sparse_attention() const override { return true; }
  void layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows, std::size_t dim,
                  float eps) override;
  void index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                    std::span<const AttentionSeq> seqs, int32_t* selected) override;
  void sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                        std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k,
                        float* out) override;
  void deltanet(const ref::DeltaNetDims& dims, const DeltaNetParams& params, const float* qkv, const float* z,
                const float* b, const float* a, std::span<const DeltaNetSeq> seqs, float* out) override;
  void moe_chosen(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen, float* out) override;
  bool has_v4_ops() const override { return true; }
  void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
              const HyperSpec& spec, float* x, float* post, float* comb) override;
  void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
               const HyperSpec& spec, float* h_new) override;
  void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
               const HyperSpec& spec, float* y) override;
  void v4_index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                       std::size_t rate, std::span<const AttentionSeq> seqs, int32_t* picks) override;
  void v4_attention(const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                    const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs, const int32_t* picks,
                    std::size_t top_k, float* out) override;

 private:
  // With forced routing in step: records `chosen` (this call's own choice) as unforced and puts the
  // forced experts there; returns whether it did.
  bool follow_forced_routing(int32_t* chosen, std::size_t T, std::size_t top_k);
  void swiglu(const SwiGluMatrices& m, const float* in, float* res, std::size_t n);
  // out [T, hidden] = the chosen experts' outputs, weighted.
  void routed_experts(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen, const float* weights,
                      float* out);
  // Sequence s's whole K and V of `layer` as fp32 [n, kv_heads, head_dim] in the pass's scratch
  // (the caller's frame).
  std::pair<float*, float*> gather_kv(const KvLayout& layout, int64_t layer, const AttentionSeq& s);
  tbb::task_arena arena_;
  const RoutingTrace* forced_ = nullptr;
  std::size_t forced_calls_ = 0;       // MoE calls routed as forced_ so far
  std::size_t forced_selections_ = 0;  // indexer calls that took forced_'s positions so far
};

}  // namespace ft::engine

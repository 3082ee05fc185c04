// The runtime on the CPU: weights read in their stored dtype by the kernels of the best ISA this
// CPU has (AVX512-BF16 / AVX-512 / AVX2, see expert_kernels.h; FT_CPU_ISA caps it), bf16 KV pages,
// oneTBB threads in an arena of `threads`. Ops are row-deterministic (backend.h).
#pragma once

#include <tbb/task_arena.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/host_backend.h"
#include "ft/engine/expert_kernels.h"

namespace ft::engine {

class CpuBackend final : public HostBackend {
 public:
  // deterministic: one kernel family for every call, so a row's bits never depend on how many rows
  // share the call (with AMX, decode-sized calls then stay on AMX tiles instead of AVX-512).
  // bf16_activations (not deterministic): AMX products and attention take bf16 activations, not
  // bf16x2 (amx.h).
  explicit CpuBackend(int threads, CpuIsa isa = best_cpu_isa(), bool deterministic = false,
                      bool bf16_activations = false);

  BackendKind kind() const override { return BackendKind::kCpu; }
  KvDType kv_dtype() const override { return KvDType::kBf16; }
  int threads() const override { return arena_.max_concurrency(); }
  Status execute(const std::function<void()>& fn) override {
    arena_.execute(fn);
    return Status::ok();
  }
  CpuIsa isa() const { return isa_; }
  // The kernels a call of `rows` rows runs on (see the constructor).
  CpuIsa isa_for(std::size_t rows) const;

  void embedding(const Matrix& table, std::span<const int32_t> ids, float* out) override;
  void linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) override;
  void linears(const float* x, std::size_t T, std::span<const LinearOut> outs) override;
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
  bool has_sparse_attention() const override { return true; }
  void layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows, std::size_t dim,
                  float eps) override;
  void index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                    std::span<const AttentionSeq> seqs, int32_t* selected) override;
  void sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                        std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k,
                        float* out) override;
  void moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) override;
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
  // cos/sin of position * inv_freq (times the attention factor) for positions [0, n), per rotary
  // frequency set (every layer of a model shares one), grown as longer sequences arrive.
  struct RopeTable {
    std::vector<float> inv_freq;
    float attention_factor = 1.0f;
    std::vector<float> cos, sin;  // [positions, rotary_dim / 2]
  };
  const RopeTable& rope_table(const float* inv_freq, std::size_t half, float attention_factor, int64_t max_position);

  tbb::task_arena arena_;
  CpuIsa isa_;
  bool deterministic_;
  bool bf16_x_;  // AMX activations as bf16 (amx.h)
  std::vector<RopeTable> rope_tables_;
};

}  // namespace ft::engine

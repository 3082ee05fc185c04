// The Backend on a GPU. Weights are copied to VRAM at load in their stored dtype (one arena for the
// model's life); activations, KV pages and linear-attention state live in VRAM; every op enqueues
// on one stream and a pass synchronises once, at its end (and, in prefill-sized passes, once per
// MoE layer for the experts' row counts that size its GEMMs). Dense products are cuBLAS GEMMs with
// bf16 (f16) operands and fp32 accumulation and output; the other ops are kernels of our own
// (kernels.h).
//
// This header declares the class; its members are defined by area:
//   cuda_backend.cpp            passes (run, recorded, replayed), placement, the factory
//   cuda_backend_dense.cpp      products, norms, elementwise ops, sampling
//   cuda_backend_attention.cpp  paged attention, DeepSeek sparse attention, Gated DeltaNet
//   cuda_backend_moe.cpp        experts in VRAM: routing, decode kernels, grouped prefill GEMMs
//   cuda_backend_offload.cpp    experts in host RAM: the cache, fetches, in-place reads, the CPU share
//   cuda_backend_v4.cpp         DeepSeek-V4's ops
// Internal to engine/cuda.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "attention_plan.h"
#include "backend/cuda_factory.h"
#include "device_memory.h"
#include "expert_slots.h"
#include "ft/engine/device.h"
#include "index_rows.h"
#include "kernels.h"
#include "lt_batched_gemm.h"
#include "pass_graphs.h"
#include "v4_kernels.h"

namespace ft::engine {

inline constexpr std::size_t kWeightChunk = std::size_t(1) << 30;
inline constexpr std::size_t kPassChunk = std::size_t(16) << 20;
// MoE calls of at most this many tokens run each (token, choice) pair's expert rows with kernels
// of their own (decode); larger ones group the tokens by expert and run batched GEMMs.
inline constexpr std::size_t kFusedMoeTokens = 16;
// Up to this many rows a 16-bit product is bound by its weight reads, above it by arithmetic (a
// 2-byte weight feeds 4T flops over the 2T split columns; an H200 does ~200 flops per byte read).
inline constexpr std::size_t kOneGemmTokens = 96;
// The most bf16 hi + lo tiles a prefill-sized product over block-dtype weights decodes at a time.
inline constexpr std::size_t kBlockTileBytes = std::size_t(256) << 20;
// The indexer's scores come to the host for its top-k in chunks of rows of at most this many
// floats (16 MiB of device scratch and of pinned memory; a prefill of a long context takes a few).
inline constexpr std::size_t kIndexScoreFloats = std::size_t(4) << 20;

inline const char* cublas_status_text(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "alloc failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "arch mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    default:
      return "error";
  }
}

class CudaBackend final : public Backend {
  using Arena = cuda::Arena;

  // An op's time in the profile, when one is set and times ops: the GPU is synchronised at the
  // op's end so the time is the op's own, not its enqueue (profiled passes are slower; benchmarks
  // time apart). Ops called from inside another (the MoE's linears) count as the outer op's;
  // `phase` marks the MoE's phases, which are timed within it.
  // With OpProfile::gpu_events, an event pair on the stream instead (read when the pass ends).
  class Timed {
   public:
    Timed(CudaBackend* be, OpProfile::Kind kind, bool phase = false)
        : be_(be),
          on_(be->profile_ && be->profile_->time_ops && (phase || be->op_depth_ == 0)),
          events_(on_ && be->profile_->gpu_events),
          phase_(phase),
          kind_(kind),
          timer_(on_ && !events_ ? be->profile_ : nullptr, kind) {
      if (!phase_) ++be_->op_depth_;
      if (events_) start_ = be_->op_event();
    }
    ~Timed() {
      if (!phase_) --be_->op_depth_;
      if (events_) {
        be_->op_events_.push_back({kind_, start_, be_->op_event()});
      } else if (on_) {
        cudaStreamSynchronize(be_->s());
      }
    }
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;

   private:
    CudaBackend* be_;
    bool on_, events_, phase_;
    OpProfile::Kind kind_;
    cudaEvent_t start_ = nullptr;
    OpTimer timer_;  // destroyed after the synchronisation above
  };

  // An event recorded on the stream now, from a pool the pass returns at its end.
  cudaEvent_t op_event();
  // After the pass's last synchronisation: each timed op's GPU time into the profile.
  void collect_op_events();
  struct OpEvents {
    OpProfile::Kind kind;
    cudaEvent_t start, stop;
  };
  std::vector<OpEvents> op_events_;
  std::vector<cudaEvent_t> event_pool_;
  std::size_t events_used_ = 0;

 public:
  CudaBackend(std::string name, int device, std::shared_ptr<cuda::Stream> stream, cublasHandle_t blas)
      : name_(std::move(name)),
        device_(device),
        stream_(std::move(stream)),
        blas_(blas),
        memory_(std::make_shared<cuda::DeviceMemory>(stream_)),
        weights_(memory_, kWeightChunk),
        pass_device_(memory_, kPassChunk),
        pass_host_(std::make_shared<cuda::PinnedMemory>(), kPassChunk) {
    scratch_ = Scratch(memory_);
  }
  ~CudaBackend() override {
    for (cudaEvent_t e : event_pool_) cudaEventDestroy(e);
    cublasDestroy(blas_);
  }

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string device_name() const override { return name_; }
  KvDType kv_dtype() const override { return KvDType::kBf16; }
  int threads() const override { return offload_ ? offload_->cpu().threads() : 1; }
  Scratch& host_scratch() override { return host_scratch_; }
  std::shared_ptr<Memory> memory() const override { return memory_; }

  Status execute(const std::function<void()>& fn) override;

  // A decode step: recorded as a graph the second time its shape is seen, replayed after that
  // (pass_graphs.h). Op-timed profiles and routing traces run the pass as it is.
  Status execute(const std::function<void()>& fn, const PassShape& shape) override;

  // After a synchronised pass: the CPU share's failure, the cache kept for misses read in place,
  // the stats readers see.
  void after_offloaded_pass();

  // ---- Placement ----
  Status place(Matrix& m) override;
  Result<const float*> place(std::span<const float> v) override;
  Status set_expert_offload(const ExpertOffloadOptions& options) override;
  bool pin_host(std::span<const std::byte> bytes) override { return offload_ && offload_->pin(bytes); }
  std::span<std::byte> host_buffer(std::size_t bytes) override;
  Status place_expert(Matrix& m) override;
  std::optional<ExpertOffloadStats> expert_offload_stats() const override;
  void set_moe_policy(const MoePolicy& policy) override {
    if (offload_) offload_->set_policy(policy);
  }
  // Both may run on a thread other than the one issuing passes (a control request, the memory
  // watcher): the device is made current there first.
  Result<int> resize_expert_cache(int slots, int floor_per_layer) override;
  std::optional<DeviceMemoryInfo> device_memory() const override;
  Status reserve_workspace(std::size_t bytes) override;
  Result<std::size_t> resize_workspace(std::size_t bytes) override;
  const int64_t* stage(std::span<const int64_t> host) override { return upload(host.data(), host.size()); }

  // ---- Dense ----
  void embedding(const Matrix& table, std::span<const int32_t> ids, float* out) override;

  void linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) override;

  // 16-bit weights multiply the input split in two 16-bit halves (x ~= hi + lo): W hi + W lo gives
  // fp32-grade activations, the precision the CPU backends have (bf16 activations alone drift
  // ~1-2% from the fp32 logits). The input is split once for all the products.
  void linears(const float* x, std::size_t T, std::span<const LinearOut> outs) override;

  void rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim, float eps,
                bool zero_centered) override;
  void add_rms_norm(float* hidden, const float* delta, const float* weight, float* out, std::size_t rows,
                    std::size_t dim, float eps, bool zero_centered) override;
  void silu_mul(const float* gate, const float* up, float* out, std::size_t n) override;
  void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n) override;
  void scale(float* x, std::size_t n, float factor) override;
  void softcap(float* x, std::size_t n, float cap) override;
  void mul_sigmoid(float* x, const float* gate, std::size_t n) override;
  void scale_by_top_sigmoid(const float* x, const float* logits, std::size_t T, std::size_t width, std::size_t E,
                            float* out) override;
  void attention_temperature(float* x, std::size_t T, std::size_t width, const int64_t* positions, float floor_scale,
                             float attn_scale) override;
  void add(float* y, const float* x, std::size_t n) override;
  void gather_rows(const float* src, std::span<const std::size_t> rows, std::size_t width, float* dst) override;
  void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                    std::size_t rows, std::size_t width) override;
  void to_host(const float* src, std::size_t n, float* dst) override;

  // On the GPU: only the tokens come back (after the pass when it is recorded or replayed).
  void sample(const float* logits, std::size_t vocab, std::span<const std::size_t> rows,
              std::span<const SampleRequest> requests, std::span<int32_t* const> tokens) override;

  // ---- Attention ----
  void rope(float* x, std::size_t T, std::size_t heads, const ref::RopeSpec& spec, const float* inv_freq,
            const int64_t* positions) override;
  void split_gated_query(const float* qg, std::size_t T, std::size_t heads, std::size_t head_dim, float* q,
                         float* gate) override;
  void kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v,
                std::span<const AttentionSeq> seqs) override;
  void attention_inputs(const KvLayout& layout, int64_t layer, float* q, float* k, const float* v, std::size_t T,
                        std::size_t heads, const QkNorm* norm, const ref::RopeSpec& rope, const float* inv_freq,
                        const int64_t* positions, std::span<const AttentionSeq> seqs) override;
  void attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                 std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt) override;

  // ---- DeepSeek sparse attention ----
  bool has_sparse_attention() const override { return true; }
  void layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows, std::size_t dim,
                  float eps) override;
  // The scores on the GPU, the top-k on the host (index_rows.h: ref::top_k_positions, whose tie rule
  // is torch's on the CPU), the choices back to `selected` (device). Each chunk of scores is a
  // synchronisation, so passes with an indexer run as they are, never recorded as graphs.
  void index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                    std::span<const AttentionSeq> seqs, int32_t* selected) override;
  // An indexer's choice of keys one every `rate` positions (1: DSA; DeepSeek-V4's CSA entries).
  void select_keys(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                   std::size_t rate, std::span<const AttentionSeq> seqs, int32_t* selected, const std::string& who);
  void sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                        std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k,
                        float* out) override;

  // ---- DeepSeek-V4 ----
  // The hyper-connections, compressors and attention run in kernels of their own (v4_kernels.h);
  // the indexer's top-k and the routers' choices (sqrt-softplus scores, hash tables) are made on
  // the host, so a V4 pass synchronises in its middle and is never recorded as a graph.
  bool has_v4_ops() const override { return true; }
  void expert_glu(const ref::ExpertGlu& glu, const float* gate, const float* up, float* out, std::size_t n) override;
  void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
              const HyperSpec& spec, float* x, float* post, float* comb) override;
  void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
               const HyperSpec& spec, float* h_new) override;
  void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
               const HyperSpec& spec, float* y) override;
  void v4_compress(const CompressorSpec& spec, const CompressorParams& params, const float* kv, const float* gate,
                   std::span<const CompressorSeq> seqs, float* entries) override;
  // As index_select over the compressed entries (ref::v4_index_select): the entries a row's position
  // has closed are its keys, those its sequence holds after the pass the row length of its top-k.
  void v4_index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                       std::size_t rate, std::span<const AttentionSeq> seqs, int32_t* picks) override;
  void v4_attention(const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                    const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs, const int32_t* picks,
                    std::size_t top_k, float* out) override;
  // The routed experts of a hash-routed layer: the choices come from the host, the weights from the
  // router's scores (ref::route_weights_for), on the host too.
  void moe_chosen(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen, float* out) override;

  // A MoE whose router the GPU's route kernels do not score (DeepSeek-V4's sqrt-softplus) or whose
  // choices are given (`chosen`, host memory): the router's logits to the host, the choices (unless
  // given) and their weights made there by the reference's routing, then the experts as the
  // device-routed ones run (the fused kernels, the batched GEMMs, or offloaded). One
  // synchronisation a layer, so such passes are never recorded as graphs.
  void moe_host_routed(const MoeWeights& w, const float* x, const float* router_x, std::size_t T, const int32_t* chosen,
                       float* out);

  // Host choices [T, K] in each token's ascending expert order, as the router kernels write
  // ChoicesByExpert, uploaded for the decode kernels (which only read them).
  cuda::ChoicesByExpert upload_by_expert(const int32_t* chosen, const float* weights, std::size_t T, std::size_t K);

  // The router's spec with host copies of its device parameters (the correction bias, per-expert
  // scales), made once per layer: what the reference's routing reads on the host. Null after a failure.
  const ref::RouterSpec* host_router(const MoeWeights& w);
  static std::string hyper_unfit(const HyperSpec& spec);
  struct HostRouter {
    ref::RouterSpec spec;
    std::vector<float> bias, scale;
  };
  std::unordered_map<const MoeWeights*, HostRouter> host_routers_;

  // ---- Mixture of experts ----
  // Router and top-k on the GPU. A few tokens (decode) stay on the GPU throughout; larger calls
  // group the choices by expert on the GPU, bring the experts' row counts to the host (the one
  // sync of the layer) and run batched GEMMs; a kernel adds each token's expert outputs in
  // ascending expert order, then the shared expert.
  void moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) override;

  // Experts whose rows the fused kernels cannot load (uneven strides, unaligned rows, a dtype they do
  // not read): the router's product and top-k on the device, then expert by expert through the
  // linear products (with the biases in them) and the GLU kernel between. The choices come to the
  // host each layer, so passes with such layers are never recorded as graphs (the first pass of a
  // model, never recorded, marks it).
  void moe_expert_by_expert(const MoeWeights& w, const float* x, const float* router_x, std::size_t T, float* out);

  // x [T, cols] as int8 planes in this pass's scratch (the integer decode products' input).
  cuda::X8 quantize_x8(const float* x, std::size_t T, std::size_t cols);

  // A few tokens' routed experts from the device's choices: gate/up into h [T * K, inter], then
  // down and the weighted combine into out. Block experts with integer products read x and h as
  // int8 planes.
  void experts_decode(const cuda::ExpertTable& table, const float* x, std::size_t T, std::size_t K,
                      const int32_t* chosen, float* h, const cuda::ChoicesByExpert& by_expert, float* out);

  // The router's product and top-k for T tokens into this pass's scratch: the choices per token
  // (and, `by_expert`, in ascending expert order per token, as the down kernel adds them). Decode
  // runs the product and its top-k in one launch.
  // (`chosen_into`: where the choices go, memory that outlives the op; null: this op's scratch)
  cuda::RouteSpec route_tokens(const MoeWeights& w, const float* x, std::size_t T, bool by_expert,
                               int32_t* chosen_into = nullptr);

  // Each expert's rows among `n` choices, counted on the device and brought to the host: the
  // layer's one synchronisation (pinned memory of this pass; empty after a failure).
  std::span<const int32_t> expert_counts(const int32_t* chosen_dev, std::size_t n, std::size_t E);

  // ---- Offloaded experts ----
  // A MoE layer whose routed experts live in host RAM. The router runs here; its choices (and
  // the layer's input) come to the host, the layer's one synchronisation. Decode-sized calls then
  // split the misses: hits and fetched experts run in the GPU kernels (choices the CPU takes read
  // an all-zero expert there), the CPU computes its share meanwhile and the GPU adds it. Prefill-
  // sized calls fetch every missing expert, in rounds that fit the slots.
  void moe_offloaded(const MoeWeights& w, const float* x, const float* router_x, std::size_t T, float* out);

  // The slots know the offloaded layer `w` and take its experts; the split's costs are calibrated
  // (once). False after a failure.
  bool offload_ready(const MoeWeights& w);

  // An offloaded layer's routed experts for the device's choices (and, decode-sized, the same in
  // expert order per token), then its shared expert.
  // `predicted_dev`: decode's choices of the next layer's router for this input (its experts are
  // copied ahead), or null.
  void offloaded_experts(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen_dev,
                         const float* weights_dev, const cuda::ChoicesByExpert& by_expert, float* out,
                         const int32_t* predicted_dev = nullptr);

  // Misses read in place (policy direct): the kernels read every chosen expert through the
  // layer's table (a slot, or the expert's pinned host memory over PCIe); the choices go to the
  // host for the cache to count after the pass. Nothing here waits, so the step records as a graph.
  void decode_in_place(const MoeWeights& w, int layer, cuda::ExpertTable table, const float* x, std::size_t T,
                       std::size_t K, const int32_t* chosen_dev, const cuda::ChoicesByExpert& by_expert, float* out,
                       const int32_t* predicted_dev);

  void decode_offloaded(const MoeWeights& w, int layer, cuda::ExpertTable table, const float* x, std::size_t T,
                        std::size_t K, const int32_t* chosen_dev, const cuda::ChoicesByExpert& by_expert, float* out,
                        const int32_t* predicted_dev);

  void prefill_offloaded(const MoeWeights& w, int layer, const cuda::ExpertTable& dims, const float* x, std::size_t T,
                         std::size_t K, const int32_t* chosen_dev, const float* weights_dev, float* out);

  // ---- Gated DeltaNet ----
  void deltanet_unfuse(const ref::DeltaNetDims& dims, const float* qkvz, const float* ba, std::size_t T, float* qkv,
                       float* z, float* b, float* a) override;
  void deltanet(const ref::DeltaNetDims& dims, const DeltaNetParams& params, const float* qkv, const float* z,
                const float* b, const float* a, std::span<const DeltaNetSeq> seqs, float* out) override;

 private:
  cudaStream_t s() const { return stream_->get(); }

  void begin_pass();
  // Replaying a recorded pass: the ops do their host side (uploads) and enqueue nothing.
  bool replaying() const { return mode_ == cuda::PassGraphs::Mode::kReplay; }

  void fail(std::string what) {
    if (failure_.empty()) failure_ = std::move(what);
  }
  void check(cudaError_t err, const char* what) {
    if (err != cudaSuccess) fail(cuda::error_text(what, err));
  }

  static const std::byte* weight(const Matrix& m);

  // Waits inside a pass for the GPU to reach this point (the host needs a result to go on: a
  // layer's expert counts, the choices, an indexer's scores). The GPU's queue runs dry meanwhile,
  // so the profile counts these waits (sync_seconds).
  void wait_mid_pass(const char* what);

  // Host values -> this pass's device memory (through pinned memory, asynchronously).
  template <typename T>
  const T* upload(const T* host, std::size_t n) {
    const std::size_t bytes = std::max<std::size_t>(n, 1) * sizeof(T);
    auto pinned = pass_host_.take(bytes);
    auto dev = pass_device_.take(bytes);
    if (!pinned || !dev) throw std::bad_alloc();
    if (n) std::memcpy(*pinned, host, n * sizeof(T));
    if (mode_ != cuda::PassGraphs::Mode::kRun) graphs_.log_upload(*pinned, *dev, bytes);
    if (replaying()) return reinterpret_cast<const T*>(*dev);
    // With experts in host RAM the copy engine may be streaming experts: an upload on it would
    // wait behind them (measured: an offloaded prefill layer's MoE 5 -> 12 ms while the next
    // layer's experts crossed), so the SMs read it over PCIe instead.
    if (offload_ && mode_ == cuda::PassGraphs::Mode::kRun)
      cuda::copy_from_host(*dev, *pinned, bytes, s());
    else
      check(cudaMemcpyAsync(*dev, *pinned, bytes, cudaMemcpyHostToDevice, s()), "uploading pass data");
    return reinterpret_cast<const T*>(*dev);
  }

  // A product with weights in a GGUF block dtype. Decode-sized: one kernel reads the blocks and
  // dots them with the fp32 rows. Larger: tiles of rows are decoded into bf16 planes W ~= Wh + Wl,
  // and with x ~= xh + xl (the split, `xs`: hi rows then lo rows) y = Wh xh + Wh xl + Wl xh, three
  // GEMMs accumulating in fp32: the products of the dequantised weights to ~2^-16.
  // With f16 (cuda::f16_block_products), xs is x as one fp16 plane (round_f16) and the tiles one
  // fp16 plane: one GEMM (~2^-11 a factor).
  void block_product(const float* x, const std::uint16_t* xs, std::size_t T, const LinearOut& o, bool f16);
  // x [T, cols] as int8 planes over whole slots of kSlotRows rows (the rows past T zeros), and a
  // prefill-sized product on them on the int8 tensor cores (block_mma_products; the weight's dtype
  // and shape block_mma_fits, its rows units_fit).
  cuda::X8 quantize_x8_slots(const float* x, std::size_t T, std::size_t cols);
  void block_mma_linear(const cuda::X8& xq, std::size_t T, const LinearOut& o);

  // Bytes of decoded bf16 planes a prefill-sized block product may hold at once: up to
  // kBlockTileBytes, and at most half of what the workspace still has free (larger tiles mean fewer
  // launches and GEMM calls, which the host issues one by one).
  std::size_t tile_bytes() const { return std::min(kBlockTileBytes, scratch_.available() / 2); }
  // With experts in host RAM, the workspace past what decode steps take is lent to the expert cache
  // once passes have been decode steps for a while (a prefill chunk's temporaries need the whole
  // workspace, a decode step's a few MB); any other pass takes it back first. At the start of every
  // pass.
  void size_workspace(bool decode_step);
  static constexpr int kLendAfterSteps = 8;
  static constexpr std::size_t kDecodeWorkspace = std::size_t(256) << 20;  // kept, at least
  bool decode_step_ = false;       // execute(fn, shape) falling back to execute(fn)
  bool last_pass_decode_ = false;  // whose scratch peak the next size_workspace reads
  int decode_steps_ = 0;           // in a row
  std::size_t decode_peak_ = 0;    // the most scratch a decode step has taken
  // The workspace as reserved at load, and how far passes have grown it past that (warned once per
  // new high: memory outside the plan).
  std::size_t workspace_reserved_ = 0, workspace_overflow_ = 0;
  void note_workspace_growth();

  // y [T, ldy] (columns [0, n)) = x [T, K] w^T + beta y for a bf16 x and w [n, K] in device memory.
  // The same for fp16 x and w where type is CUDA_R_16F.
  void gemm_16(const std::uint16_t* x, std::size_t T, std::size_t K, const std::uint16_t* w, std::size_t n, float* y,
               std::size_t ldy, float beta, cudaDataType_t type = CUDA_R_16BF);

  // y [T, w.rows] = x [T, w.cols] w^T + beta y: column-major C^T[rows, T] = W[cols, rows]^T X^T[cols, T].
  void gemm(const void* x, std::size_t T, const Matrix& w, float* y, float beta);

  // Device pointers of a round's experts, in the order given: the placed weights, or (offloaded
  // experts) slots the callback has made them resident in.
  using Resolve = std::function<std::vector<cuda::ExpertPtrs>(std::span<const int32_t> experts)>;
  using RoundDone = std::function<void()>;

  // The routed experts of a prefill-sized call in a few launches. Each active expert's rows fill
  // consecutive slots of kSlotRows rows (its last slot padded with zero rows), so every problem of
  // the batched GEMMs has one shape, and one call per product takes the whole layer however the
  // routing is skewed (buckets of experts with alike row counts made ~10 calls a product and tiny
  // GEMMs for the tail on a skewed layer, and padded a third of the rows). The rows are grouped on
  // the device (moe_scatter) and split in two bf16 halves, slot by slot (the slot's high halves,
  // then its low ones); each product is one GEMM over both halves of a slot (split_gemms: bf16
  // weights as stored, GGUF blocks decoded to bf16 planes first), whose two parts the next pass
  // adds (glu_split, moe_combine_split). A product on GGUF blocks with integer codes instead runs on
  // the int8 tensor cores (mma_products): its input quantised into int8 planes (the gather, the
  // GLU), its output fp32 rows in one part. counts: each expert's rows. Offloaded experts go in
  // rounds of at most `round_experts` experts, each made resident by `resolve` before its GEMMs.
  static constexpr std::size_t kSlotRows = 64;  // x 2 halves: 128 columns, the GEMM kernels' tile
  void experts_batched(const cuda::ExpertTable& dims, const MoeWeights& w, const float* x, std::size_t T, std::size_t K,
                       std::span<const int32_t> counts, const int32_t* chosen_dev, const float* weights_dev, float* out,
                       std::size_t round_experts = SIZE_MAX, const Resolve& resolve = nullptr,
                       const RoundDone& round_done = nullptr);

  // Experts the batched kernels do not take (biases, uneven strides, unaligned rows): the choices come to the
  // host, which groups the tokens by expert; each expert with tokens runs its SwiGLU as GEMMs over
  // its rows.
  void experts_one_by_one(const MoeWeights& w, const float* x, std::size_t T, std::size_t K, const int32_t* chosen_dev,
                          const float* weights_dev, float* out);

  // For each slot j of `ws` (its expert's matrix): C_j [2n, m] = X_j [2n, k] W_j^T, X_j the slot's
  // rows as bf16 halves (x ~= hi + lo: n hi rows at b + j b_stride, then n lo rows), so C_j's first
  // n rows are the products of the high halves and the next n those of the low ones (a row's value
  // is their sum). bf16 weights: one batched GEMM over both halves. GGUF blocks: decoded a few
  // experts at a time into bf16 planes W ~= Wh + Wl (dequant_split_rows, as block_product), then
  // Wh [hi; lo], and Wl hi added into the high parts: two batched GEMMs. Consecutive slots of one
  // expert share its decoded planes.
  void split_gemms(const std::vector<const void*>& ws, DType dtype, std::size_t row_bytes, int m, int k,
                   const std::uint16_t* b, std::size_t b_stride, std::size_t n, float* c, std::size_t c_stride);

  // For each slot j of `ws` (its expert's matrix, in a GGUF block dtype): rows [64 j, +64) of
  // y [slots * 64, m] = x's fp16 rows [64 j, +64) W_j^T, W_j decoded a few experts at a time into
  // one fp16 plane (dequant_f16_matrices): one batched GEMM (cuda::f16_block_products).
  void f16_gemms(const std::vector<const void*>& ws, DType dtype, std::size_t row_bytes, int m, int k,
                 const std::uint16_t* x, float* y);

  // For each slot j of `ws` (its expert's matrix, in a block dtype block_mma_fits takes): rows
  // [64 j, +64) of y [slots * 64, m] = x's rows [64 j, +64) W_j^T (block_mma_products).
  void mma_products(const std::vector<const void*>& ws, DType dtype, std::size_t row_bytes, int m, int k,
                    const cuda::X8& x, float* y);

  // For each of `count` problems j: C_j [n, m] = B_j [n, k] W_j^T (+ C_j when `accumulate`) with
  // W_j [m, k] (row stride row_bytes) at ws[j] and B_j at b + j b_stride both of `type` (bf16 or
  // fp16), C_j fp32 at c + j c_stride.
  void batched_gemm(const void* const* ws, std::size_t row_bytes, int m, int k, const std::uint16_t* b,
                    std::size_t b_stride, std::size_t n, float* c, std::size_t c_stride, bool accumulate,
                    std::size_t count, cudaDataType_t type = CUDA_R_16BF);

  // The cuBLASLt path of batched_gemm (unless FT_CUDA_GEMM=batched), made on first use; null when
  // off or when it could not start (then the batched call serves every product).
  cuda::LtBatchedGemm* lt_batched();
  std::unique_ptr<cuda::LtBatchedGemm> lt_;
  bool lt_tried_ = false;

  // The host time of one library GEMM call, and whether its shape is new, into the profile
  // (OpProfile::gemm_*). The shapes seen are kept whether or not a profile is set.
  class GemmTimer {
   public:
    GemmTimer(CudaBackend* be, const std::array<int64_t, 6>& shape)
        : be_(be), new_shape_(be->gemm_shapes_.insert(shape).second), t0_(std::chrono::steady_clock::now()) {}
    ~GemmTimer() {
      if (!be_->profile_) return;
      be_->profile_->gemm_host_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      ++be_->profile_->gemm_calls;
      if (new_shape_) ++be_->profile_->gemm_new_shapes;
    }
    GemmTimer(const GemmTimer&) = delete;
    GemmTimer& operator=(const GemmTimer&) = delete;

   private:
    CudaBackend* be_;
    bool new_shape_;
    std::chrono::steady_clock::time_point t0_;
  };
  std::set<std::array<int64_t, 6>> gemm_shapes_;

  // out += sigmoid(shared_gate x) * shared_expert(x), or + shared_expert(x) without a gate, when
  // the layer has one.
  void add_shared_expert(const MoeWeights& w, const float* x, std::size_t T, float* out);

  // What follows the routed experts' products: the family's GLU and its biases (in VRAM).
  static cuda::ExpertEpilogue epilogue(const MoeWeights& w);

  // The device table of a MoE layer's experts for the fused few-token path, built once per layer
  // (kept with the weights); null when the layer's experts do not fit it (not bf16, uneven
  // strides, unaligned).
  const cuda::ExpertTable* expert_table(const MoeWeights& w);
  const std::byte* const* place_pointers(const std::vector<const std::byte*>& ptrs);

  // `n` device counters at zero, set up once into `slot`, by which the blocks of a launch know which
  // of them finished last (gemv_route's routing block, a split decode attention's merging block);
  // they are zero again between launches. Null if they cannot be had (the callers then take a path
  // without them).
  unsigned* zeroed_counters(unsigned*& slot, std::size_t n);

  // Routing a trace asked for, copied out without stalling the pass: recorded when it ends.
  void trace_later(const int32_t* chosen_dev, std::size_t T, std::size_t K);

  // Routed expert e of a gpt-oss MoE: biased gate and up products, the GLU, the biased down product.
  void biased_expert(const MoeWeights& w, std::size_t e, const float* x, std::size_t T, float* out);

  void swiglu(const SwiGluMatrices& m, const float* x, std::size_t T, float* out);

  // The device view of a pass's sequences for attention: built by the first attention op of the
  // pass and reused by every layer after it (the decoder passes the same span to each).
  struct AttnBatch {
    const AttentionSeq* key = nullptr;
    std::size_t n = 0;
    std::uint64_t pass = 0;
    int rows = 0;
    int max_ctx = 0;
    const int32_t* row_seq = nullptr;
    const cuda::AttnSeqDev* seqs = nullptr;
    std::byte* const* pages = nullptr;
  };
  const AttnBatch& attention_batch(const KvLayout& layout, std::span<const AttentionSeq> seqs);

  std::string name_;
  int device_;
  std::shared_ptr<cuda::Stream> stream_;
  cublasHandle_t blas_;
  std::shared_ptr<cuda::DeviceMemory> memory_;
  Arena weights_;      // every placed weight, for the backend's life
  Arena pass_device_;  // uploads of the current pass
  Arena pass_host_;    // their pinned sources
  Scratch host_scratch_;
  std::uint64_t pass_ = 0;
  int op_depth_ = 0;  // Timed ops in progress
  AttnBatch attn_;
  std::string failure_;  // the first error of the current pass
  std::unordered_map<const MoeWeights*, std::unique_ptr<cuda::ExpertTable>> tables_;
  unsigned* route_done_ = nullptr;                               // gemv_route's counter (device)
  unsigned* split_done_ = nullptr;                               // split decode attention's counters (device)
  std::unique_ptr<cuda::ExpertSlots> offload_;                   // routed experts in host RAM, a cache of them here
  std::optional<std::chrono::steady_clock::time_point> issued_;  // the pass's first wait for results
  cuda::PassGraphs graphs_;
  // A pass of this model brings results to the host in its middle (moe_expert_by_expert's choices,
  // index_select's scores), so none is recorded as a graph. Set by the first pass, never recorded.
  bool host_synced_ = false;
  cuda::PassGraphs::Mode mode_ = cuda::PassGraphs::Mode::kRun;  // of the pass in progress
  int64_t kv_tokens_ = 0;  // a recorded or replayed pass's attention context (its PassShape's)
  struct PendingTrace {
    const int32_t* chosen;  // pinned, filled by the end of the pass
    std::size_t T, K;
  };
  std::vector<PendingTrace> pending_traces_;
};

}  // namespace ft::engine

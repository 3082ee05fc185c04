// The Backend on a GPU. Weights are copied to VRAM at load in their stored dtype (one arena for the
// model's life); activations, KV pages and linear-attention state live in VRAM; every op enqueues
// on one stream and a pass synchronises once, at its end (and, in prefill-sized passes, once per
// MoE layer for the experts' row counts that size its GEMMs). Dense products are cuBLAS GEMMs with bf16 (f16) operands and fp32
// accumulation and output; the other ops are kernels of our own (kernels.h).
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
namespace {

using cuda::Arena;

constexpr std::size_t kWeightChunk = std::size_t(1) << 30;
constexpr std::size_t kPassChunk = std::size_t(16) << 20;
// MoE calls of at most this many tokens run each (token, choice) pair's expert rows with kernels
// of their own (decode); larger ones group the tokens by expert and run batched GEMMs.
constexpr std::size_t kFusedMoeTokens = 16;
// Up to this many rows a 16-bit product is bound by its weight reads, above it by arithmetic (a
// 2-byte weight feeds 4T flops over the 2T split columns; an H200 does ~200 flops per byte read).
constexpr std::size_t kOneGemmTokens = 96;
// The most bf16 hi + lo tiles a prefill-sized product over block-dtype weights decodes at a time.
constexpr std::size_t kBlockTileBytes = std::size_t(256) << 20;
// The indexer's scores come to the host for its top-k in chunks of rows of at most this many
// floats (16 MiB of device scratch and of pinned memory; a prefill of a long context takes a few).
constexpr std::size_t kIndexScoreFloats = std::size_t(4) << 20;

const char* cublas_status_text(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "alloc failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "arch mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
  }
}

class CudaBackend final : public Backend {
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
  cudaEvent_t op_event() {
    if (events_used_ == event_pool_.size()) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      event_pool_.push_back(e);
    }
    cudaEvent_t e = event_pool_[events_used_++];
    cudaEventRecord(e, s());
    return e;
  }
  // After the pass's last synchronisation: each timed op's GPU time into the profile.
  void collect_op_events() {
    for (const OpEvents& op : op_events_) {
      float ms = 0.f;
      if (profile_ && op.start && op.stop && cudaEventElapsedTime(&ms, op.start, op.stop) == cudaSuccess) {
        profile_->seconds[op.kind] += double(ms) * 1e-3;
        ++profile_->calls[op.kind];
      }
    }
    cudaGetLastError();
    op_events_.clear();
    events_used_ = 0;
  }
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

  Status execute(const std::function<void()>& fn) override {
    if (offload_) offload_->begin_in_place_pass(s());
    begin_pass();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      fn();
    } catch (const std::bad_alloc&) {
      fail("out of GPU memory for the pass's temporaries");
    }
    // Issued: when the pass first waited for its results (the logits' copy), else now.
    const auto t1 = issued_.value_or(std::chrono::steady_clock::now());
    if (cudaError_t err = cudaStreamSynchronize(s()); err != cudaSuccess) fail(cuda::error_text("forward pass", err));
    if (offload_) offload_->end_cpu_share();
    collect_op_events();
    if (profile_) {
      profile_->issue_seconds += std::chrono::duration<double>(t1 - t0).count();
      profile_->pass_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++profile_->passes;
    }
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) fail(cuda::error_text("kernel launch", err));
    for (const PendingTrace& p : pending_traces_) record_routing(p.chosen, p.T, p.K);
    pending_traces_.clear();
    if (offload_) after_offloaded_pass();
    if (!failure_.empty()) return internal_error("GPU: " + failure_);
    return Status::ok();
  }

  // A decode step: recorded as a graph the second time its shape is seen, replayed after that
  // (pass_graphs.h). Op-timed profiles and routing traces run the pass as it is.
  Status execute(const std::function<void()>& fn, const PassShape& shape) override {
    using Mode = cuda::PassGraphs::Mode;
    // Offloaded experts (but for misses read in place), gpt-oss's biased ones and DeepSeek sparse
    // attention's indexer sync with the host inside the pass (host_synced_): nothing to record.
    if ((profile_ && profile_->time_ops) || (offload_ && !offload_->in_place()) || host_synced_) return execute(fn);
    std::vector<int64_t> key = shape.key;
    key.push_back(shape.kv_tokens);
    key.push_back(trace_ ? 1 : 0);  // a traced pass also copies the routing out
    // Misses read in place record the CPU share's kernels (publish, wait, add) only with a share:
    // a step recorded without one must not replay once a policy with one is set.
    key.push_back(offload_ ? (offload_->cpu_share() ? 2 : 1) : 0);
    const Mode mode = graphs_.plan(key);
    if (mode == Mode::kRun) return execute(fn);
    if (offload_) offload_->begin_in_place_pass(s());  // uploads nothing into the capture
    begin_pass();
    graphs_.begin_pass();
    kv_tokens_ = shape.kv_tokens;
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == Mode::kRecord) {
      if (std::string err = graphs_.begin_capture(s()); !err.empty()) {
        graphs_.disable();
        return execute(fn);
      }
    }
    mode_ = mode;
    try {
      fn();
    } catch (const std::bad_alloc&) {
      fail("out of GPU memory for the pass's temporaries");
    }
    mode_ = Mode::kRun;
    const std::string err = mode == Mode::kRecord ? graphs_.finish_record(s(), key) : graphs_.launch_replay(s(), key);
    if (!err.empty()) {
      graphs_.disable();
      fail(err);
    }
    const auto t1 = issued_.value_or(std::chrono::steady_clock::now());
    if (cudaError_t e = cudaStreamSynchronize(s()); e != cudaSuccess) fail(cuda::error_text("forward pass", e));
    if (offload_) offload_->end_cpu_share();
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) fail(cuda::error_text("kernel launch", e));
    if (profile_) {
      profile_->issue_seconds += std::chrono::duration<double>(t1 - t0).count();
      profile_->pass_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++profile_->passes;
      if (mode == Mode::kReplay) ++profile_->replayed_passes;
    }
    if (!failure_.empty()) return internal_error("GPU: " + failure_);
    graphs_.copy_out();
    for (const PendingTrace& p : pending_traces_) record_routing(p.chosen, p.T, p.K);
    pending_traces_.clear();
    if (offload_) after_offloaded_pass();
    if (!failure_.empty()) return internal_error("GPU: " + failure_);
    return Status::ok();
  }

  // After a synchronised pass: the CPU share's failure, the cache kept for misses read in place,
  // the stats readers see.
  void after_offloaded_pass() {
    if (std::string why = offload_->take_cpu_failure(); !why.empty()) fail(why);
    offload_->after_in_place_pass();
    offload_->publish();
  }

  // ---- Placement ----
  Status place(Matrix& m) override {
    FT_ASSIGN_OR_RETURN(std::byte* dev, weights_.take(m.bytes()));
    if (cudaError_t err = cudaMemcpy(dev, m.data, m.bytes(), cudaMemcpyHostToDevice); err != cudaSuccess) {
      cudaGetLastError();
      return internal_error(cuda::error_text("uploading a weight", err));
    }
    m.device = dev;
    return Status::ok();
  }
  Result<const float*> place(std::span<const float> v) override {
    FT_ASSIGN_OR_RETURN(std::byte* dev, weights_.take(v.size_bytes()));
    if (cudaError_t err = cudaMemcpy(dev, v.data(), v.size_bytes(), cudaMemcpyHostToDevice); err != cudaSuccess) {
      cudaGetLastError();
      return internal_error(cuda::error_text("uploading a weight", err));
    }
    return reinterpret_cast<const float*>(dev);
  }
  Status set_expert_offload(const ExpertOffloadOptions& options) override {
    FT_ASSIGN_OR_RETURN(offload_, cuda::ExpertSlots::create(options));
    return Status::ok();
  }
  bool pin_host(std::span<const std::byte> bytes) override { return offload_ && offload_->pin(bytes); }
  std::span<std::byte> host_buffer(std::size_t bytes) override {
    if (offload_) {
      if (const std::span<std::byte> pinned = offload_->pinned_buffer(bytes); !pinned.empty()) return pinned;
    }
    return Backend::host_buffer(bytes);
  }
  Status place_expert(Matrix& m) override {
    if (!offload_) return place(m);
    if (m.dtype != DType::kBF16 && !cuda::is_block_dtype(m.dtype))
      return unsupported(std::string("experts kept in host RAM must be bf16 or a GGUF block type, not ") +
                         dtype_name(m.dtype));
    return Status::ok();  // read where it is mapped: copied into a slot, or computed on the CPU
  }
  std::optional<ExpertOffloadStats> expert_offload_stats() const override {
    if (!offload_) return std::nullopt;
    return offload_->snapshot();
  }
  void set_moe_policy(const MoePolicy& policy) override {
    if (offload_) offload_->set_policy(policy);
  }
  // Both may run on a thread other than the one issuing passes (a control request, the memory
  // watcher): the device is made current there first.
  Result<int> resize_expert_cache(int slots, int floor_per_layer) override {
    if (!offload_) return Backend::resize_expert_cache(slots, floor_per_layer);
    cudaSetDevice(device_);
    return offload_->resize(slots, floor_per_layer);
  }
  std::optional<DeviceMemoryInfo> device_memory() const override {
    std::size_t free = 0, total = 0;
    cudaSetDevice(device_);
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return std::nullopt;
    }
    return DeviceMemoryInfo{free, total};
  }
  Status reserve_workspace(std::size_t bytes) override {
    if (!scratch_.reserve(bytes)) return unavailable("cannot set aside " + std::to_string(bytes >> 20) + " MiB of GPU memory for the workspace");
    return Status::ok();
  }
  const int64_t* stage(std::span<const int64_t> host) override { return upload(host.data(), host.size()); }

  // ---- Dense ----
  void embedding(const Matrix& table, std::span<const int32_t> ids, float* out) override {
    Timed timer(this, OpProfile::kEmbedding);
    const int32_t* dev_ids = upload(ids.data(), ids.size());
    if (replaying()) return;
    if (cuda::is_block_dtype(table.dtype)) {
      cuda::embedding_blocks(weight(table), table.dtype, table.row_bytes, table.cols, dev_ids, int(ids.size()), out,
                             s());
      return;
    }
    cuda::embedding(weight(table), table.dtype, table.row_bytes, table.cols, dev_ids, int(ids.size()), out, s());
  }

  void linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) override {
    const LinearOut one[] = {{&w, bias, y}};
    linears(x, T, one);
  }

  // 16-bit weights multiply the input split in two 16-bit halves (x ~= hi + lo): W hi + W lo gives
  // fp32-grade activations, the precision the CPU backends have (bf16 activations alone drift
  // ~1-2% from the fp32 logits). The input is split once for all the products.
  void linears(const float* x, std::size_t T, std::span<const LinearOut> outs) override {
    Timed timer(this, OpProfile::kLinear);
    if (T == 0 || outs.empty() || replaying()) return;
    Scratch::Frame frame(scratch_);
    const std::size_t K = std::size_t(outs[0].w->cols);
    const std::uint16_t* split[2] = {nullptr, nullptr};  // bf16, f16
    // Decode: the bf16 products read their weights once with fp32 activations, no split, all in
    // one launch.
    // fp32 weights (a GGUF's shared-expert gate) join them: a warp group a row. Block-dtype products
    // read in units go out in one launch per dtype.
    cuda::GemvOut gemv[cuda::kGemvMaxOuts];
    int n_gemv = 0;
    std::vector<std::pair<DType, std::vector<cuda::GemvOut>>> units;
    std::vector<const LinearOut*> rest;
    const bool decode = T <= std::size_t(cuda::kGemvMaxRows);
    for (const LinearOut& o : outs) {
      const DType dt = o.w->dtype;
      const std::byte* w = weight(*o.w);
      if (decode && n_gemv < cuda::kGemvMaxOuts && (dt == DType::kBF16 || dt == DType::kF32) &&
          cuda::gemv_fits(w, o.w->row_bytes, o.w->cols)) {
        gemv[n_gemv++] = {w, o.w->row_bytes, int(o.w->rows), o.bias, o.y, dt == DType::kF32};
      } else if (decode && cuda::units_fit(dt, w, o.w->row_bytes, int(o.w->cols))) {
        auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) {
          return u.first == dt && u.second.size() < std::size_t(cuda::kGemvMaxOuts);
        });
        if (it == units.end()) it = units.insert(units.end(), {dt, {}});
        it->second.push_back({w, o.w->row_bytes, int(o.w->rows), o.bias, o.y});
      } else {
        rest.push_back(&o);
      }
    }
    if (n_gemv) cuda::gemv_bf16(gemv, n_gemv, int(K), x, int(T), s());
    // The integer products read x as int8 planes, quantised once for all of them.
    const bool any_int8 =
        std::any_of(units.begin(), units.end(), [](const auto& u) { return cuda::int8_products(u.first); });
    const cuda::X8 xq = any_int8 ? quantize_x8(x, T, K) : cuda::X8{};
    for (const auto& [dt, u] : units)
      cuda::gemv_units_batch(u.data(), int(u.size()), dt, int(K), x, int(T), s(),
                             cuda::int8_products(dt) ? &xq : nullptr);
    for (const LinearOut* op : rest) {
      const LinearOut& o = *op;
      const DType dt = o.w->dtype;
      if (cuda::is_block_dtype(dt)) {
        if (!split[0] && T > std::size_t(cuda::kGemvMaxRows)) {
          auto* buf = scratch_.take<std::uint16_t>(2 * T * K);
          cuda::split_16(x, T * K, T * K, false, buf, s());
          split[0] = buf;
        }
        block_product(x, split[0], T, o);
        continue;
      }
      if (dt == DType::kF32) {
        gemm(x, T, *o.w, o.y, 0.f);
        if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(o.w->rows), s());
        continue;
      }
      const bool f16 = dt == DType::kF16;
      if (!split[f16]) {
        auto* buf = scratch_.take<std::uint16_t>(2 * T * K);
        cuda::split_16(x, T * K, T * K, f16, buf, s());
        split[f16] = buf;
      }
      if (T <= kOneGemmTokens) {
        // Few rows: the product streams the weights, so one GEMM over both halves (2T columns)
        // reads them once; the halves are added after.
        Scratch::Frame inner(scratch_);
        float* y2 = scratch_.floats(2 * T * std::size_t(o.w->rows));
        gemm(split[f16], 2 * T, *o.w, y2, 0.f);
        cuda::add_halves(y2, int(T), int(o.w->rows), o.bias, o.y, s());
      } else {
        // Many: the product is compute-bound; y = W hi, then y += W lo in the second GEMM's
        // epilogue spares a pass over a 2T-row output.
        gemm(split[f16], T, *o.w, o.y, 0.f);
        gemm(split[f16] + T * K, T, *o.w, o.y, 1.f);
        if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(o.w->rows), s());
      }
    }
  }

  void rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim, float eps,
                bool zero_centered) override {
    Timed timer(this, OpProfile::kNorm);
    if (replaying()) return;
    cuda::rms_norm(x, weight, out, int(rows), int(dim), eps, zero_centered, s());
  }
  void add_rms_norm(float* hidden, const float* delta, const float* weight, float* out, std::size_t rows,
                    std::size_t dim, float eps, bool zero_centered) override {
    Timed timer(this, OpProfile::kNorm);
    if (replaying()) return;
    cuda::add_rms_norm(hidden, delta, weight, out, int(rows), int(dim), eps, zero_centered, s());
  }
  void silu_mul(const float* gate, const float* up, float* out, std::size_t n) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::silu_mul(gate, up, out, n, s());
  }
  void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::gelu_tanh_mul(gate, up, out, n, s());
  }
  void scale(float* x, std::size_t n, float factor) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::scale(x, n, factor, s());
  }
  void softcap(float* x, std::size_t n, float cap) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::softcap(x, n, cap, s());
  }
  void mul_sigmoid(float* x, const float* gate, std::size_t n) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::mul_sigmoid(x, gate, n, s());
  }
  void scale_by_top_sigmoid(const float* x, const float* logits, std::size_t T, std::size_t width, std::size_t E,
                            float* out) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::scale_by_top_sigmoid(x, logits, int(T), int(width), int(E), out, s());
  }
  void attention_temperature(float* x, std::size_t T, std::size_t width, const int64_t* positions, float floor_scale,
                             float attn_scale) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::attention_temperature(x, int(T), int(width), positions, floor_scale, attn_scale, s());
  }
  void add(float* y, const float* x, std::size_t n) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::add(y, x, n, s());
  }
  void gather_rows(const float* src, std::span<const std::size_t> rows, std::size_t width, float* dst) override {
    std::vector<int64_t> r(rows.begin(), rows.end());
    const int64_t* dev_rows = upload(r.data(), r.size());
    if (replaying()) return;
    cuda::gather_rows(src, dev_rows, int(r.size()), int(width), dst, s());
  }
  void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                    std::size_t rows, std::size_t width) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::copy_columns(src, src_ld, repeat, dst, dst_ld, rows, width, s());
  }
  void to_host(const float* src, std::size_t n, float* dst) override {
    if (!issued_) issued_ = std::chrono::steady_clock::now();
    if (mode_ != cuda::PassGraphs::Mode::kRun) {
      // Recorded or replayed: into pinned memory with the pass, to `dst` once it is done.
      auto pinned = pass_host_.take(n * sizeof(float));
      if (!pinned) throw std::bad_alloc();
      if (mode_ == cuda::PassGraphs::Mode::kRecord)
        check(cudaMemcpyAsync(*pinned, src, n * sizeof(float), cudaMemcpyDeviceToHost, s()), "copying to the host");
      graphs_.log_copy(dst, *pinned, n * sizeof(float));
      return;
    }
    check(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, s()), "copying to the host");
    check(cudaStreamSynchronize(s()), "copying to the host");
  }

  // On the GPU: only the tokens come back (after the pass when it is recorded or replayed).
  void sample(const float* logits, std::size_t vocab, std::span<const std::size_t> rows,
              std::span<const SampleRequest> requests, std::span<int32_t* const> tokens) override {
    const std::size_t n = requests.size();
    if (n == 0) return;
    std::vector<cuda::SampleRowDev> params(n);
    for (std::size_t i = 0; i < n; ++i) {
      const SamplingParams& p = requests[i].params;
      params[i] = {int(rows[i]), p.temperature, p.top_k, p.top_p, p.min_p, p.greedy ? 1 : 0, requests[i].u};
    }
    const cuda::SampleRowDev* dev = upload(params.data(), n);
    auto* picked = scratch_.take<int32_t>(n);
    auto pinned = pass_host_.take(n * sizeof(int32_t));
    if (!pinned) throw std::bad_alloc();
    const auto* host = reinterpret_cast<const int32_t*>(*pinned);
    if (!replaying()) {
      cuda::sample_rows(logits, int(n), int(vocab), dev, picked, s());
      check(cudaMemcpyAsync(*pinned, picked, n * sizeof(int32_t), cudaMemcpyDeviceToHost, s()), "copying tokens");
    }
    if (mode_ == cuda::PassGraphs::Mode::kRun) {
      if (!issued_) issued_ = std::chrono::steady_clock::now();
      check(cudaStreamSynchronize(s()), "copying tokens");
      for (std::size_t i = 0; i < n; ++i) *tokens[i] = host[i];
      return;
    }
    for (std::size_t i = 0; i < n; ++i) graphs_.log_copy(tokens[i], host + i, sizeof(int32_t));
  }

  // ---- Attention ----
  void rope(float* x, std::size_t T, std::size_t heads, const ref::RopeSpec& spec, const float* inv_freq,
            const int64_t* positions) override {
    Timed timer(this, OpProfile::kRope);
    if (replaying()) return;
    cuda::rope(x, int(T), int(heads), spec, inv_freq, positions, s());
  }
  void split_gated_query(const float* qg, std::size_t T, std::size_t heads, std::size_t head_dim, float* q,
                         float* gate) override {
    if (replaying()) return;
    cuda::split_gated_query(qg, int(T), int(heads), int(head_dim), q, gate, s());
  }
  void kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v,
                std::span<const AttentionSeq> seqs) override {
    Timed timer(this, OpProfile::kKvWrite);
    const AttnBatch& b = attention_batch(layout, seqs);
    if (replaying()) return;
    cuda::kv_write(layout, int(layer), k, v, b.rows, b.row_seq, b.seqs, b.pages, s());
  }
  void attention_inputs(const KvLayout& layout, int64_t layer, float* q, float* k, const float* v, std::size_t T,
                        std::size_t heads, const QkNorm* norm, const ref::RopeSpec& rope, const float* inv_freq,
                        const int64_t* positions, std::span<const AttentionSeq> seqs) override {
    if (!norm || norm->per_head) {  // the kernel norms per head; OLMoE's whole-width norm composes
      Timed timer(this, OpProfile::kRope);  // norms, RoPE and the KV write, timed as one
      const AttnBatch& b = attention_batch(layout, seqs);
      if (replaying() && cuda::attention_inputs_fit(layout, int(layer), rope)) return;
      const cuda::QkNormDev dn = norm ? cuda::QkNormDev{norm->q, norm->k, norm->eps, norm->zero_centered}
                                      : cuda::QkNormDev{};
      if (!replaying() && cuda::attention_inputs(layout, int(layer), q, k, v, int(T), int(heads),
                                                 norm ? &dn : nullptr, rope, inv_freq, positions, b.row_seq,
                                                 b.seqs, b.pages, s()))
        return;
    }
    Backend::attention_inputs(layout, layer, q, k, v, T, heads, norm, rope, inv_freq, positions, seqs);
  }
  void attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                 std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt) override {
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
                          out, work, work_floats,
                          work ? zeroed_counters(split_done_, cuda::kAttnSplitCounters) : nullptr, s());
  }

  // ---- DeepSeek sparse attention ----
  bool has_sparse_attention() const override { return true; }
  void layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows, std::size_t dim,
                  float eps) override {
    Timed timer(this, OpProfile::kNorm);
    if (replaying()) return;
    cuda::layer_norm(x, weight, bias, out, int(rows), int(dim), eps, s());
  }
  // The scores on the GPU, the top-k on the host (index_rows.h: ref::top_k_positions, whose tie rule
  // is torch's on the CPU), the choices back to `selected` (device). Each chunk of scores is a
  // synchronisation, so passes with an indexer run as they are, never recorded as graphs.
  void index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                    std::span<const AttentionSeq> seqs, int32_t* selected) override {
    select_keys(layout, layer, q, w, spec, 1, seqs, selected, "DeepSeek sparse attention's indexer");
  }
  // An indexer's choice of keys one every `rate` positions (1: DSA; DeepSeek-V4's CSA entries).
  void select_keys(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                   std::size_t rate, std::span<const AttentionSeq> seqs, int32_t* selected, const std::string& who) {
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
  void sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                        std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k,
                        float* out) override {
    Timed timer(this, OpProfile::kAttention);
    const AttnBatch& b = attention_batch(layout, seqs);
    if (replaying()) return;
    if (!cuda::sparse_attention(layout, int(layer), q, b.rows, int(heads), scale, selected, int(top_k), b.row_seq,
                                b.seqs, b.pages, out, s()))
      fail("DeepSeek sparse attention over " + std::to_string(top_k) + " positions of heads " +
           std::to_string(layout.head_dim_at(layer)) + " wide does not fit the GPU's kernel");
  }

  // ---- DeepSeek-V4 ----
  // The hyper-connections, compressors and attention run in kernels of their own (v4_kernels.h);
  // the indexer's top-k and the routers' choices (sqrt-softplus scores, hash tables) are made on
  // the host, so a V4 pass synchronises in its middle and is never recorded as a graph.
  bool has_v4_ops() const override { return true; }
  void expert_glu(const ref::ExpertGlu& glu, const float* gate, const float* up, float* out, std::size_t n) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    cuda::expert_glu(gate, up, out, n, glu, s());
  }
  void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
              const HyperSpec& spec, float* x, float* post, float* comb) override {
    Timed timer(this, OpProfile::kNorm);
    if (replaying()) return;
    if (!cuda::hyper_fits(spec)) return fail(hyper_unfit(spec));
    cuda::hc_pre(h, fn, base, scale, int(T), spec, x, post, comb, s());
  }
  void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
               const HyperSpec& spec, float* h_new) override {
    Timed timer(this, OpProfile::kElementwise);
    if (replaying()) return;
    if (!cuda::hyper_fits(spec)) return fail(hyper_unfit(spec));
    cuda::hc_post(h, out, post, comb, int(T), spec, h_new, s());
  }
  void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
               const HyperSpec& spec, float* y) override {
    Timed timer(this, OpProfile::kNorm);
    if (replaying()) return;
    if (!cuda::hyper_fits(spec)) return fail(hyper_unfit(spec));
    cuda::hc_head(h, fn, base, scale, int(T), spec, y, s());
  }
  void v4_compress(const CompressorSpec& spec, const CompressorParams& params, const float* kv, const float* gate,
                   std::span<const CompressorSeq> seqs, float* entries) override {
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
                  std::to_string(spec.rope_dims) + " of " + std::to_string(spec.width) +
                  " do not fit the GPU's kernel");
    cuda::v4_compress(spec, params, kv, gate, dev_seqs, dev_rows, int(T), entries, s());
  }
  // As index_select over the compressed entries (ref::v4_index_select): the entries a row's position
  // has closed are its keys, those its sequence holds after the pass the row length of its top-k.
  void v4_index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w, const IndexerSpec& spec,
                       std::size_t rate, std::span<const AttentionSeq> seqs, int32_t* picks) override {
    select_keys(layout, layer, q, w, spec, rate, seqs, picks, "DeepSeek-V4's indexer");
  }
  void v4_attention(const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                    const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs, const int32_t* picks,
                    std::size_t top_k, float* out) override {
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
  // The routed experts of a hash-routed layer: the choices come from the host, the weights from the
  // router's scores (ref::route_weights_for), on the host too.
  void moe_chosen(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen, float* out) override {
    Timed timer(this, OpProfile::kMoe);
    Scratch::Frame frame(scratch_);
    moe_host_routed(w, x, x, T, chosen, out);
  }

  // A MoE whose router the GPU's route kernels do not score (DeepSeek-V4's sqrt-softplus) or whose
  // choices are given (`chosen`, host memory): the router's logits to the host, the choices (unless
  // given) and their weights made there by the reference's routing, then the experts as the
  // device-routed ones run (the fused kernels, the batched GEMMs, or offloaded). One
  // synchronisation a layer, so such passes are never recorded as graphs.
  void moe_host_routed(const MoeWeights& w, const float* x, const float* router_x, std::size_t T, const int32_t* chosen,
                       float* out) {
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

  // Host choices [T, K] in each token's ascending expert order, as the router kernels write
  // ChoicesByExpert, uploaded for the decode kernels (which only read them).
  cuda::ChoicesByExpert upload_by_expert(const int32_t* chosen, const float* weights, std::size_t T, std::size_t K) {
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

  // The router's spec with host copies of its device parameters (the correction bias, per-expert
  // scales), made once per layer: what the reference's routing reads on the host. Null after a failure.
  const ref::RouterSpec* host_router(const MoeWeights& w) {
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
  static std::string hyper_unfit(const HyperSpec& spec) {
    return "DeepSeek-V4's hyper-connections on the GPU take up to " + std::to_string(cuda::kHyperMaxStreams) +
           " streams, not " + std::to_string(spec.streams);
  }
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
  void moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) override {
    Timed timer(this, OpProfile::kMoe);
    const std::size_t E = w.router_spec.num_experts, K = w.router_spec.top_k;
    if (replaying()) {
      // A replayed pass is a decode step: its MoE uploads nothing; a routing trace it records is
      // copied out by the graph into the pinned buffer it had when recorded (the same take here).
      if (trace_) trace_later(nullptr, T, K);
      // Misses read in place: the recorded copy of the choices lands where it did when recorded.
      if (offload_ && offload_->in_place() && T <= kFusedMoeTokens) {
        const int layer = offload_->layer_of(w);
        offload_->note_in_place(layer, int(T * K));
        if (offload_->cpu_share()) offload_->queue_cpu_share(layer, int(T), int(K));
      }
      return;
    }
    Scratch::Frame frame(scratch_);
    if (K > 32 || E > 8192) return fail("the GPU router takes at most 8192 experts and 32 choices a token");
    // DeepSeek-V4's sqrt-softplus scores: routed on the host.
    if (w.router_spec.scoring == ref::RouterScoring::kSqrtSoftplus)
      return moe_host_routed(w, x, router_x ? router_x : x, T, nullptr, out);
    if (w.router_spec.grouped() && w.router_spec.n_group > std::size_t(cuda::kRouteMaxGroups))
      return fail("the GPU's grouped router takes at most " + std::to_string(cuda::kRouteMaxGroups) + " expert groups");
    const float* rx = router_x ? router_x : x;
    // Experts whose rows the fused kernels cannot load go expert by expert, with the choices on the
    // host.
    if (!offload_ && !expert_table(w)) return moe_expert_by_expert(w, x, rx, T, out);
    if (offload_) return moe_offloaded(w, x, rx, T, out);
    std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeRoute, true);
    const cuda::ExpertTable* table = T <= kFusedMoeTokens ? expert_table(w) : nullptr;
    const cuda::RouteSpec route = route_tokens(w, rx, T, table != nullptr);  // by expert: the down kernel's view
    const int32_t* chosen_dev = route.chosen;
    const float* weights_dev = route.weights;
    if (table) {
      // A few tokens: the choices stay on the GPU; two kernels read each chosen expert's rows.
      if (trace_) trace_later(chosen_dev, T, K);
      phase.emplace(this, OpProfile::kMoeExperts, true);
      float* h = scratch_.floats(T * K * std::size_t(table->inter));
      // Pair by pair: an expert two tokens chose is read from memory once and then from L2 (grouping
      // the pairs by expert measured no faster at 16 tokens).
      experts_decode(*table, x, T, K, chosen_dev, h, route.by_expert, out);
      phase.emplace(this, OpProfile::kMoeCombine, true);
      add_shared_expert(w, x, T, out);
      return;
    }
    // Prefill-sized: the choices are grouped by expert on the device; only each expert's row count
    // comes to the host (the layer's one synchronisation), to size the GEMMs.
    if (trace_) trace_later(chosen_dev, T, K);
    const std::span<const int32_t> counts = expert_counts(chosen_dev, T * K, E);
    if (!failure_.empty()) return;

    phase.emplace(this, OpProfile::kMoeExperts, true);  // the experts' products and their combine
    if (const cuda::ExpertTable* table = expert_table(w)) {
      experts_batched(*table, w, x, T, K, counts, chosen_dev, weights_dev, out);
    } else {
      experts_one_by_one(w, x, T, K, chosen_dev, weights_dev, out);
    }
    phase.emplace(this, OpProfile::kMoeCombine, true);
    add_shared_expert(w, x, T, out);
  }

  // Experts whose rows the fused kernels cannot load (uneven strides, unaligned rows, a dtype they do
  // not read): the router's product and top-k on the device, then expert by expert through the
  // linear products (with the biases in them) and the GLU kernel between. The choices come to the
  // host each layer, so passes with such layers are never recorded as graphs (the first pass of a
  // model, never recorded, marks it).
  void moe_expert_by_expert(const MoeWeights& w, const float* x, const float* router_x, std::size_t T, float* out) {
    if (mode_ != cuda::PassGraphs::Mode::kRun) return fail("a MoE expert by expert cannot be recorded as a graph");
    host_synced_ = true;
    std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeRoute, true);
    const std::size_t K = w.router_spec.top_k;
    const cuda::RouteSpec route = route_tokens(w, router_x, T, false);
    if (trace_) trace_later(route.chosen, T, K);
    phase.emplace(this, OpProfile::kMoeExperts, true);
    experts_one_by_one(w, x, T, K, route.chosen, route.weights, out);
    phase.emplace(this, OpProfile::kMoeCombine, true);
    add_shared_expert(w, x, T, out);
  }

  // x [T, cols] as int8 planes in this pass's scratch (the integer decode products' input).
  cuda::X8 quantize_x8(const float* x, std::size_t T, std::size_t cols) {
    auto* buf = scratch_.take<std::byte>(cuda::x8_bytes(int(T), int(cols)));
    return cuda::quantize_x8(x, int(T), int(cols), buf, s());
  }

  // A few tokens' routed experts from the device's choices: gate/up into h [T * K, inter], then
  // down and the weighted combine into out. Block experts with integer products read x and h as
  // int8 planes.
  void experts_decode(const cuda::ExpertTable& table, const float* x, std::size_t T, std::size_t K,
                      const int32_t* chosen, float* h, const cuda::ChoicesByExpert& by_expert, float* out) {
    cuda::X8 xq, hq;
    const bool gate_up_q = table.gate_up_units && cuda::int8_products(table.gate_up_dtype);
    const bool down_q = table.down_units && cuda::int8_products(table.down_dtype);
    if (gate_up_q) xq = quantize_x8(x, T, std::size_t(table.hidden));
    cuda::moe_gate_up(table, x, int(T), int(K), chosen, h, s(), gate_up_q ? &xq : nullptr);
    if (down_q) hq = quantize_x8(h, T * K, std::size_t(table.inter));
    cuda::moe_down_combine(table, h, int(T), int(K), by_expert, out, s(), down_q ? &hq : nullptr);
  }

  // The router's product and top-k for T tokens into this pass's scratch: the choices per token
  // (and, `by_expert`, in ascending expert order per token, as the down kernel adds them). Decode
  // runs the product and its top-k in one launch.
  cuda::RouteSpec route_tokens(const MoeWeights& w, const float* x, std::size_t T, bool by_expert) {
    const std::size_t E = w.router_spec.num_experts, K = w.router_spec.top_k;
    float* logits = scratch_.floats(T * E);
    cuda::RouteSpec route;
    route.E = int(E);
    route.top_k = int(K);
    route.sigmoid = w.router_spec.scoring == ref::RouterScoring::kSigmoid;
    route.renormalize = w.router_spec.renormalize;
    route.scaling = w.router_spec.scaling;
    route.grouped = w.router_spec.grouped();
    route.n_group = int(w.router_spec.n_group);
    route.topk_group = int(w.router_spec.topk_group);
    route.bias = w.router_spec.correction_bias;  // placed: in VRAM
    route.per_expert_scale = w.router_spec.per_expert_scale;
    route.chosen = scratch_.take<int32_t>(T * K);
    route.weights = scratch_.floats(T * K);
    if (by_expert)
      route.by_expert = {scratch_.take<int32_t>(T * K), scratch_.take<int32_t>(T * K), scratch_.floats(T * K)};
    // A bf16 router, or an fp32 one (GGUF keeps routers unquantised) with 16-byte rows.
    const bool f32 = w.router.dtype == DType::kF32 && w.router.row_bytes % 16 == 0 &&
                     reinterpret_cast<std::uintptr_t>(w.router.device) % 16 == 0 && w.router.cols % 4 == 0;
    if (!w.router_bias && T <= std::size_t(cuda::kGemvMaxRows) &&
        (f32 ||
         (w.router.dtype == DType::kBF16 && cuda::gemv_fits(weight(w.router), w.router.row_bytes, w.router.cols))) &&
        zeroed_counters(route_done_, 1)) {
      const cuda::GemvOut router{weight(w.router), w.router.row_bytes, int(E), nullptr, logits, f32};
      cuda::gemv_route(router, int(w.router.cols), x, int(T), route, route_done_, s());
    } else {
      linear(x, T, w.router, w.router_bias, logits);
      cuda::route_top_k(logits, int(T), route, s());
    }
    return route;
  }

  // Each expert's rows among `n` choices, counted on the device and brought to the host: the
  // layer's one synchronisation (pinned memory of this pass; empty after a failure).
  std::span<const int32_t> expert_counts(const int32_t* chosen_dev, std::size_t n, std::size_t E) {
    auto* counts_dev = scratch_.take<int32_t>(E);
    check(cudaMemsetAsync(counts_dev, 0, E * sizeof(int32_t), s()), "routing");
    cuda::moe_count(chosen_dev, int(n), counts_dev, s());
    auto counts_pinned = pass_host_.take(E * sizeof(int32_t));
    if (!counts_pinned) throw std::bad_alloc();
    check(cudaMemcpyAsync(*counts_pinned, counts_dev, E * sizeof(int32_t), cudaMemcpyDeviceToHost, s()), "routing");
    wait_mid_pass("routing");
    if (!failure_.empty()) return {};
    return {reinterpret_cast<const int32_t*>(*counts_pinned), E};
  }

  // ---- Offloaded experts ----
  // A MoE layer whose routed experts live in host RAM. The router runs here; its choices (and
  // the layer's input) come to the host, the layer's one synchronisation. Decode-sized calls then
  // split the misses: hits and fetched experts run in the GPU kernels (choices the CPU takes read
  // an all-zero expert there), the CPU computes its share meanwhile and the GPU adds it. Prefill-
  // sized calls fetch every missing expert, in rounds that fit the slots.
  void moe_offloaded(const MoeWeights& w, const float* x, const float* router_x, std::size_t T, float* out) {
    if (!offload_ready(w)) return;
    std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeRoute, true);
    const cuda::RouteSpec route = route_tokens(w, router_x, T, T <= kFusedMoeTokens);
    if (trace_) trace_later(route.chosen, T, w.router_spec.top_k);
    phase.reset();
    offloaded_experts(w, x, T, route.chosen, route.weights, route.by_expert, out);
  }

  // The slots know the offloaded layer `w` and take its experts; the split's costs are calibrated
  // (once). False after a failure.
  bool offload_ready(const MoeWeights& w) {
    cuda::ExpertSlots& o = *offload_;
    o.layer_of(w);
    if (std::string why = o.check(w); !why.empty()) {
      fail(why);
      return false;
    }
    if (!o.calibrated()) o.calibrate(w);
    return true;
  }

  // An offloaded layer's routed experts for the device's choices (and, decode-sized, the same in
  // expert order per token), then its shared expert.
  void offloaded_experts(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen_dev,
                         const float* weights_dev, const cuda::ChoicesByExpert& by_expert, float* out) {
    cuda::ExpertSlots& o = *offload_;
    const std::size_t K = w.router_spec.top_k, H = std::size_t(w.hidden);
    const int layer = o.layer_of(w);
    const bool decode = T <= kFusedMoeTokens;
    const SwiGluMatrices& first = w.experts.front();
    cuda::ExpertTable dims;
    dims.gate_up_row_bytes = first.gate.row_bytes;
    dims.down_row_bytes = first.down.row_bytes;
    dims.hidden = int(H);
    dims.inter = int(first.inter());
    dims.act = epilogue(w);
    // Choices the CPU computes read the zero expert on the GPU: no biases for them there.
    dims.act.zero_gate = o.zero(w).gate;
    dims.act.zero_down = o.zero(w).down;
    dims.gate_up_dtype = first.gate.dtype;
    dims.down_dtype = first.down.dtype;
    // slots start on 256 bytes: the rows fit wherever the first expert's do
    dims.gate_up_units = cuda::units_fit(first.gate.dtype, nullptr, first.gate.row_bytes, int(H));
    dims.down_units = cuda::units_fit(first.down.dtype, nullptr, first.down.row_bytes, int(first.inter()));
    std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeExperts, true);
    if (decode && o.in_place()) {
      decode_in_place(w, layer, dims, x, T, K, chosen_dev, by_expert, out);
    } else if (decode) {
      o.order_after_in_place_copies(s());
      decode_offloaded(w, layer, dims, x, T, K, chosen_dev, by_expert, out);
    } else {
      o.order_after_in_place_copies(s());
      prefill_offloaded(w, layer, dims, x, T, K, chosen_dev, weights_dev, out);
    }
    phase.emplace(this, OpProfile::kMoeCombine, true);
    add_shared_expert(w, x, T, out);
  }

  // Misses read in place (policy direct): the kernels read every chosen expert through the
  // layer's table (a slot, or the expert's pinned host memory over PCIe); the choices go to the
  // host for the cache to count after the pass. Nothing here waits, so the step records as a graph.
  void decode_in_place(const MoeWeights& w, int layer, cuda::ExpertTable table, const float* x, std::size_t T,
                       std::size_t K, const int32_t* chosen_dev, const cuda::ChoicesByExpert& by_expert, float* out) {
    cuda::ExpertSlots& o = *offload_;
    if (!o.knows_in_place(layer)) {
      // A layer's first in-place step (never a recorded one: a shape runs once before it records):
      // the table the pass began with has no host addresses for it yet.
      if (std::string why = o.know_in_place(w, layer); !why.empty()) return fail(why);
      o.prepare_in_place(s());
    }
    if (T * K > std::size_t(cuda::ExpertSlots::kMaxInPlaceChoices)) return fail("internal error: too many choices");
    const std::size_t E = w.experts.size();
    table.gate = o.in_place_table(layer);
    table.up = table.gate + E;
    table.down = table.gate + 2 * E;
    check(cudaMemcpyAsync(o.in_place_choices(layer), chosen_dev, T * K * sizeof(int32_t), cudaMemcpyDeviceToHost, s()),
          "routing");
    o.note_in_place(layer, int(T * K));
    // The CPU's share starts from the input and choices in host memory while the GPU computes
    // its own; the GPU waits for its output only to add it.
    const bool share = o.cpu_share();
    const cuda::ExpertSlots::InPlaceIo& io = o.in_place_io(layer);
    if (share) {
      cuda::publish_to_host(x, T * std::size_t(table.hidden), by_expert.expert, by_expert.weight, int(T * K), io.x,
                            io.chosen, io.weights, io.in, o.step_device(), s());
      o.queue_cpu_share(layer, int(T), int(K));
    }
    float* h = scratch_.floats(T * K * std::size_t(table.inter));
    experts_decode(table, x, T, K, chosen_dev, h, by_expert, out);
    if (share) {
      cuda::wait_host_flag_at(io.out, o.step_device(), s());
      cuda::add(out, io.y, T * std::size_t(table.hidden), s());
    }
  }

  void decode_offloaded(const MoeWeights& w, int layer, cuda::ExpertTable table, const float* x, std::size_t T,
                        std::size_t K, const int32_t* chosen_dev, const cuda::ChoicesByExpert& by_expert, float* out) {
    cuda::ExpertSlots& o = *offload_;
    const std::size_t E = w.experts.size(), H = std::size_t(table.hidden), I = std::size_t(table.inter);
    // The choices (in expert order per token, as the down kernel adds them) and the input, to the host.
    auto pinned = pass_host_.take(T * K * 8 + T * H * 4);
    if (!pinned) throw std::bad_alloc();
    auto* chosen = reinterpret_cast<int32_t*>(*pinned);
    auto* weights = reinterpret_cast<float*>(*pinned + T * K * 4);
    auto* x_host = reinterpret_cast<float*>(*pinned + T * K * 8);
    check(cudaMemcpyAsync(chosen, by_expert.expert, T * K * 4, cudaMemcpyDeviceToHost, s()), "routing");
    check(cudaMemcpyAsync(weights, by_expert.weight, T * K * 4, cudaMemcpyDeviceToHost, s()), "routing");
    check(cudaMemcpyAsync(x_host, x, T * H * 4, cudaMemcpyDeviceToHost, s()), "routing");
    wait_mid_pass("routing");
    if (!failure_.empty()) return;
    o.settle();
    // Hits, and the misses with their token counts.
    ExpertCache& cache = o.cache();
    cache.begin_step();
    std::vector<int> tokens(E, 0);
    for (std::size_t i = 0; i < T * K; ++i) ++tokens[std::size_t(chosen[i])];
    std::vector<cuda::ExpertPtrs> where(E, o.zero(w));
    std::vector<SplitMiss> misses;
    for (std::size_t e = 0; e < E; ++e) {
      if (!tokens[e]) continue;
      if (std::optional<int> slot = cache.lookup(layer, int(e))) {
        where[e] = o.slot(*slot, w);
      } else {
        misses.push_back({int(e), tokens[e]});
      }
    }
    // Misses the cache admits (used more often than a slot's expert) are fetched into it under
    // every policy but cpu: they pay off as later hits. The rest split between transient slots
    // (fetched for this layer only) and the CPU.
    const std::size_t bytes = cuda::ExpertSlots::expert_bytes(w);
    const MoePolicy& policy = o.options().policy;
    std::vector<SplitMiss> rest;
    int committed = 0;
    for (const SplitMiss& m : misses) {
      if (policy.kind != MoePolicy::Kind::kCpu) {
        if (std::optional<ExpertCache::Admitted> a = cache.admit(layer, m.expert, ExpertCache::Admission::kIfHotter)) {
          o.fetch(w, m.expert, a->slot);
          where[std::size_t(m.expert)] = o.slot(a->slot, w);
          ++committed;
          continue;
        }
      }
      rest.push_back(m);
    }
    const SplitPlan plan = plan_split(policy, o.model().costs(), rest, bytes, o.transient_slots(), committed);
    std::vector<bool> on_cpu(E, false);
    for (int e : plan.cpu) on_cpu[std::size_t(e)] = true;
    for (std::size_t i = 0; i < plan.fetch.size(); ++i) {
      const int e = plan.fetch[i], slot = o.transient_slot(int(i));
      o.fetch(w, e, slot);
      where[std::size_t(e)] = o.slot(slot, w);
    }
    const bool fetched = committed > 0 || !plan.fetch.empty();
    const bool any_cpu = std::find(on_cpu.begin(), on_cpu.end(), true) != on_cpu.end();
    o.fetched_into(s(), any_cpu);
    // The GPU's share: the kernels read each choice's expert from the step's table.
    std::vector<const std::byte*> gate(E), up(E), down(E);
    for (std::size_t e = 0; e < E; ++e) {
      gate[e] = where[e].gate;
      up[e] = where[e].up;
      down[e] = where[e].down;
    }
    table.gate = upload(gate.data(), E);
    table.up = upload(up.data(), E);
    table.down = upload(down.data(), E);
    float* h = scratch_.floats(T * K * I);
    // The kernels take the choices per token in the router's order (gate/up) and by expert (down).
    experts_decode(table, x, T, K, chosen_dev, h, by_expert, out);
    if (!any_cpu) return;
    // The CPU's share, on the CPU experts' threads while the GPU runs its own; the GPU waits for
    // its flag and adds the output straight from pinned host memory, so this thread goes on
    // issuing the next layer's work meanwhile.
    auto mine_host = pass_host_.take(T * K * 4);
    auto y_host = pass_host_.take(T * H * 4);
    if (!mine_host || !y_host) throw std::bad_alloc();
    auto* mine = reinterpret_cast<int32_t*>(*mine_host);
    std::size_t cpu_experts = 0;
    for (std::size_t i = 0; i < T * K; ++i) mine[i] = on_cpu[std::size_t(chosen[i])] ? chosen[i] : -1;
    for (bool c : on_cpu) cpu_experts += c ? 1 : 0;
    float* y = reinterpret_cast<float*>(*y_host);
    const unsigned seq = o.next_cpu_seq();
    const MoeWeights& on_cpu_w = o.for_cpu(layer);  // here: layer_of may grow the layer list meanwhile
    o.cpu().submit([&o, &on_cpu_w, layer, x_host, T, K, mine, weights, y, seq, cpu_experts, bytes, fetched] {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        o.cpu().run(on_cpu_w, x_host, T, K, mine, weights, y);
      } catch (const std::exception& e) {
        o.cpu_failed(std::string("the CPU experts failed: ") + e.what());  // the pass reports it at its end
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      o.model().observe_cpu(cpu_experts * bytes, secs, fetched);
      ExpertOffloadStats& st = o.stats();
      st.cpu_computed += cpu_experts;
      st.layer_cpu_computed[std::size_t(layer)] += cpu_experts;
      st.cpu_bytes += cpu_experts * bytes;
      st.cpu_seconds += secs;
      o.signal(seq);  // last: the GPU (and through it the next layer) goes on after this
    });
    cuda::wait_host_flag(o.cpu_flag(), seq, s());
    cuda::add(out, y, T * H, s());
  }

  void prefill_offloaded(const MoeWeights& w, int layer, const cuda::ExpertTable& dims, const float* x, std::size_t T,
                         std::size_t K, const int32_t* chosen_dev, const float* weights_dev, float* out) {
    cuda::ExpertSlots& o = *offload_;
    const std::size_t E = w.experts.size();
    const std::span<const int32_t> counts = expert_counts(chosen_dev, T * K, E);
    if (!failure_.empty()) return;
    o.settle();
    std::vector<int32_t>& active = o.last_active(layer);
    active.clear();
    for (std::size_t e = 0; e < E; ++e)
      if (counts[e] > 0) active.push_back(int32_t(e));
    // Rounds of at most half the cache slots other layers' floors leave: a round's copies run
    // while the round before computes (ExpertSlots::begin_round).
    ExpertCache& cache = o.cache();
    const int spare = cache.slots() - cache.floor_per_layer() * (cache.layers() - 1);
    const std::size_t round = std::size_t(std::max(1, spare / 2));
    const Resolve resolve = [&](std::span<const int32_t> experts) {
      o.begin_round();
      std::vector<std::optional<int>> slots(experts.size());
      for (std::size_t i = 0; i < experts.size(); ++i) slots[i] = cache.lookup(layer, experts[i]);  // hits first
      std::vector<cuda::ExpertPtrs> where;
      for (std::size_t i = 0; i < experts.size(); ++i) {
        if (!slots[i]) {
          std::optional<ExpertCache::Admitted> a = cache.admit(layer, experts[i]);
          if (!a) {  // the round before (or a prefetch that guessed wrong) holds the rest: wait for it
            o.copy_after_all(s());
            a = cache.admit(layer, experts[i]);
          }
          if (!a) {
            fail("internal error: no expert slot for a prefill round");
            return std::vector<cuda::ExpertPtrs>{};
          }
          o.fetch(w, experts[i], a->slot);
          slots[i] = a->slot;
        }
        where.push_back(o.slot(*slots[i], w));
      }
      o.fetched_into(s(), false);
      return where;
    };
    experts_batched(dims, w, x, T, K, counts, chosen_dev, weights_dev, out, round, resolve, [&] { o.end_round(s()); });
    // A chunk this size touches most experts of every layer: the next layer's (those its last
    // chunk used, or all) cross PCIe while this one computes, as a round of its own (as many as
    // the slots the last two rounds leave), so the copies run on.
    const MoeWeights* next = o.next_layer(layer);
    if (!next || T * K < 2 * E) return;
    const int next_id = layer + 1;
    std::vector<int32_t> wanted = o.last_active(next_id);
    if (wanted.empty())
      for (int e = 0; e < int(next->experts.size()); ++e) wanted.push_back(e);
    // At most a round's worth, so the next layer's first round finds slots for what was not
    // guessed.
    o.begin_round();
    std::size_t fetched = 0;
    for (const int32_t e : wanted) {
      if (fetched >= round) break;
      if (cache.find(next_id, e)) continue;
      std::optional<ExpertCache::Admitted> a = cache.admit(next_id, e, ExpertCache::Admission::kAlways, false);
      if (!a) break;
      o.fetch(*next, e, a->slot);
      ++fetched;
    }
    o.end_round(s());
  }

  // ---- Gated DeltaNet ----
  void deltanet_unfuse(const ref::DeltaNetDims& dims, const float* qkvz, const float* ba, std::size_t T, float* qkv,
                       float* z, float* b, float* a) override {
    if (replaying()) return;
    cuda::deltanet_unfuse(dims, qkvz, ba, int(T), qkv, z, b, a, s());
  }
  void deltanet(const ref::DeltaNetDims& dims, const DeltaNetParams& params, const float* qkv, const float* z,
                const float* b, const float* a, std::span<const DeltaNetSeq> seqs, float* out) override {
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

 private:
  cudaStream_t s() const { return stream_->get(); }

  void begin_pass() {
    pass_device_.reset();
    pass_host_.reset();
    ++pass_;
    failure_.clear();
    pending_traces_.clear();
    issued_.reset();
  }
  // Replaying a recorded pass: the ops do their host side (uploads) and enqueue nothing.
  bool replaying() const { return mode_ == cuda::PassGraphs::Mode::kReplay; }

  void fail(std::string what) {
    if (failure_.empty()) failure_ = std::move(what);
  }
  void check(cudaError_t err, const char* what) {
    if (err != cudaSuccess) fail(cuda::error_text(what, err));
  }

  static const std::byte* weight(const Matrix& m) {
    if (!m.device) {
      std::fprintf(stderr, "freetoken: internal error: a weight was not placed on the GPU\n");
      std::abort();
    }
    return m.device;
  }

  // Waits inside a pass for the GPU to reach this point (the host needs a result to go on: a
  // layer's expert counts, the choices, an indexer's scores). The GPU's queue runs dry meanwhile,
  // so the profile counts these waits (sync_seconds).
  void wait_mid_pass(const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaStreamSynchronize(s()), what);
    if (!profile_) return;
    profile_->sync_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++profile_->syncs;
  }

  // Host values -> this pass's device memory (through pinned memory, asynchronously).
  template <typename T>
  const T* upload(const T* host, std::size_t n) {
    const std::size_t bytes = std::max<std::size_t>(n, 1) * sizeof(T);
    auto pinned = pass_host_.take(bytes);
    auto dev = pass_device_.take(bytes);
    if (!pinned || !dev) throw std::bad_alloc();
    if (n) std::memcpy(*pinned, host, n * sizeof(T));
    if (mode_ != cuda::PassGraphs::Mode::kRun) graphs_.log_upload(*pinned, *dev, bytes);
    if (!replaying()) check(cudaMemcpyAsync(*dev, *pinned, bytes, cudaMemcpyHostToDevice, s()), "uploading pass data");
    return reinterpret_cast<const T*>(*dev);
  }

  // A product with weights in a GGUF block dtype. Decode-sized: one kernel reads the blocks and
  // dots them with the fp32 rows. Larger: tiles of rows are decoded into bf16 planes W ~= Wh + Wl,
  // and with x ~= xh + xl (the split, `xs`: hi rows then lo rows) y = Wh xh + Wh xl + Wl xh, three
  // GEMMs accumulating in fp32: the products of the dequantised weights to ~2^-16.
  void block_product(const float* x, const std::uint16_t* xs, std::size_t T, const LinearOut& o) {
    const Matrix& w = *o.w;
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols);
    if (T <= std::size_t(cuda::kGemvMaxRows)) {
      cuda::gemv_blocks(weight(w), w.dtype, w.row_bytes, int(R), int(K), x, int(T), o.bias, o.y, s());
      return;
    }
    Scratch::Frame frame(scratch_);
    const std::size_t tile = std::max<std::size_t>(64, std::min(R, tile_bytes() / (4 * K)));
    auto* hi = scratch_.take<std::uint16_t>(2 * tile * K);
    std::uint16_t* lo = hi + tile * K;
    for (std::size_t r0 = 0; r0 < R; r0 += tile) {
      const std::size_t n = std::min(tile, R - r0);
      cuda::dequant_split_rows(weight(w) + r0 * w.row_bytes, w.dtype, w.row_bytes, int(n), int(K), hi, lo, s());
      gemm_bf16(xs, T, K, hi, n, o.y + r0, R, 0.f);
      gemm_bf16(xs + T * K, T, K, hi, n, o.y + r0, R, 1.f);
      gemm_bf16(xs, T, K, lo, n, o.y + r0, R, 1.f);
    }
    if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(R), s());
  }

  // Bytes of decoded bf16 planes a prefill-sized block product may hold at once: up to
  // kBlockTileBytes, and at most half of what the workspace still has free (larger tiles mean fewer
  // launches and GEMM calls, which the host issues one by one).
  std::size_t tile_bytes() const { return std::min(kBlockTileBytes, scratch_.available() / 2); }

  // y [T, ldy] (columns [0, n)) = x [T, K] w^T + beta y for a bf16 w [n, K] in device memory.
  void gemm_bf16(const std::uint16_t* x, std::size_t T, std::size_t K, const std::uint16_t* w, std::size_t n, float* y,
                 std::size_t ldy, float beta) {
    const float one = 1.f;
    const GemmTimer timer(this, {int64_t(n), int64_t(T), int64_t(K), 0, int64_t(ldy), beta != 0 ? 1 : 0});
    const cublasStatus_t st =
        cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(T), int(K), &one, w, CUDA_R_16BF, int(K), x,
                     CUDA_R_16BF, int(K), &beta, y, CUDA_R_32F, int(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) fail(std::string("cublasGemmEx: ") + cublas_status_text(st));
  }

  // y [T, w.rows] = x [T, w.cols] w^T + beta y: column-major C^T[rows, T] = W[cols, rows]^T X^T[cols, T].
  void gemm(const void* x, std::size_t T, const Matrix& w, float* y, float beta) {
    const float one = 1.f;
    const std::size_t elem = dtype_size(w.dtype);
    const int m = int(w.rows), n = int(T), k = int(w.cols), lda = int(w.row_bytes / elem);
    const cudaDataType_t type = w.dtype == DType::kBF16 ? CUDA_R_16BF : w.dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
    const GemmTimer timer(this, {m, n, k, -int64_t(type) - 1, lda, beta != 0 ? 1 : 0});
    const cublasStatus_t st =
        cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, weight(w), type, lda, x, type, k, &beta, y,
                     CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) fail(std::string("cublasGemmEx: ") + cublas_status_text(st));
  }

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
  // adds (glu_split, moe_combine_split). counts: each expert's rows. Offloaded experts go in
  // rounds of at most `round_experts` experts, each made resident by `resolve` before its GEMMs.
  static constexpr std::size_t kSlotRows = 64;  // x 2 halves: 128 columns, the GEMM kernels' tile
  void experts_batched(const cuda::ExpertTable& dims, const MoeWeights& w, const float* x, std::size_t T, std::size_t K,
                       std::span<const int32_t> counts, const int32_t* chosen_dev, const float* weights_dev, float* out,
                       std::size_t round_experts = SIZE_MAX, const Resolve& resolve = nullptr,
                       const RoundDone& round_done = nullptr) {
    const std::size_t E = w.experts.size(), H = std::size_t(dims.hidden), I = std::size_t(dims.inter);
    constexpr std::size_t C = kSlotRows;
    struct Round {
      std::size_t row0 = 0, slots = 0;
      std::vector<int32_t> experts, slot_counts;
    };
    std::vector<Round> rounds;
    std::vector<int32_t> row0(E, 0);  // expert -> its first padded row
    std::size_t R = 0;                // padded rows in all
    for (std::size_t e = 0; e < E; ++e) {
      if (counts[e] <= 0) continue;
      if (rounds.empty() || rounds.back().experts.size() >= round_experts) rounds.push_back({R, 0, {}, {}});
      Round& r = rounds.back();
      const std::size_t n = (std::size_t(counts[e]) + C - 1) / C;
      row0[e] = int32_t(R);
      R += n * C;
      r.slots += n;
      r.experts.push_back(int32_t(e));
      r.slot_counts.push_back(int32_t(n));
    }
    auto* cursor = scratch_.take<int32_t>(E);
    auto* padded = scratch_.take<int64_t>(R);
    auto* rows = scratch_.take<int32_t>(T * K);
    float* sorted_weights = scratch_.floats(T * K);
    check(cudaMemsetAsync(cursor, 0, E * sizeof(int32_t), s()), "grouping");
    check(cudaMemsetAsync(padded, 0xff, R * sizeof(int64_t), s()), "grouping");  // -1: a padding row
    cuda::moe_scatter(chosen_dev, weights_dev, int(T), int(K), upload(row0.data(), E), cursor, padded, rows,
                      sorted_weights, s());
    // The GEMMs' inputs are gathered and split (and GLU'd) in one pass each, straight into the
    // slots' layout: no fp32 copy of the gathered rows or of the GLU output. The products (y, g,
    // u) are fp32 in the same layout, two parts a row.
    Scratch::Frame frame(scratch_);
    float* y = scratch_.floats(2 * R * H);
    float* g = scratch_.floats(2 * R * I);
    float* u = scratch_.floats(2 * R * I);
    auto* xs = scratch_.take<std::uint16_t>(2 * R * H);
    auto* hs = scratch_.take<std::uint16_t>(2 * R * I);
    cuda::gather_split(x, padded, int(R), int(H), int(C), xs, s());
    for (const Round& r : rounds) {
      std::vector<cuda::ExpertPtrs> where;
      if (resolve) {
        where = resolve(r.experts);
        if (where.size() != r.experts.size()) return;  // failed (the pass reports it)
      } else {
        for (int32_t e : r.experts) {
          const SwiGluMatrices& m = w.experts[std::size_t(e)];
          where.push_back({m.gate.device, m.up.device, m.down.device});
        }
      }
      // Slot by slot: its expert's matrices, and the expert (for the biases).
      std::vector<const void*> gate, up, down;
      std::vector<int32_t> slot_experts;
      for (std::size_t j = 0; j < r.experts.size(); ++j) {
        for (int32_t k = 0; k < r.slot_counts[j]; ++k) {
          gate.push_back(where[j].gate);
          up.push_back(where[j].up);
          down.push_back(where[j].down);
          slot_experts.push_back(r.experts[j]);
        }
      }
      const std::size_t rows_here = r.slots * C;
      {
        const std::uint16_t* in = xs + 2 * r.row0 * H;
        const Timed timer(this, OpProfile::kMoeGemms, true);
        split_gemms(gate, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, 2 * C * H, C,
                    g + 2 * r.row0 * I, 2 * C * I);
        split_gemms(up, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, 2 * C * H, C,
                    u + 2 * r.row0 * I, 2 * C * I);
      }
      const int32_t* experts_dev = dims.act.biased() ? upload(slot_experts.data(), slot_experts.size()) : nullptr;
      cuda::glu_split(g + 2 * r.row0 * I, u + 2 * r.row0 * I, int(rows_here), int(I), dims.act, experts_dev, int(C),
                      hs + 2 * r.row0 * I, s());
      {
        const Timed timer(this, OpProfile::kMoeGemms, true);
        split_gemms(down, dims.down_dtype, dims.down_row_bytes, int(H), int(I), hs + 2 * r.row0 * I, 2 * C * I, C,
                    y + 2 * r.row0 * H, 2 * C * H);
      }
      cuda::add_expert_bias(y + 2 * r.row0 * H, int(rows_here), int(H), dims.act.down_bias, experts_dev, int(C), s());
      if (round_done) round_done();
    }
    cuda::moe_combine_split(y, rows, sorted_weights, int(T), int(K), int(H), int(C), out, s());
  }

  // Experts the batched kernels do not take (biases, uneven strides, unaligned rows): the choices come to the
  // host, which groups the tokens by expert; each expert with tokens runs its SwiGLU as GEMMs over
  // its rows.
  void experts_one_by_one(const MoeWeights& w, const float* x, std::size_t T, std::size_t K, const int32_t* chosen_dev,
                          const float* weights_dev, float* out) {
    const std::size_t E = w.experts.size(), H = std::size_t(w.hidden);
    std::vector<int32_t> chosen(T * K);
    std::vector<float> weights(T * K);
    check(cudaMemcpyAsync(chosen.data(), chosen_dev, chosen.size() * 4, cudaMemcpyDeviceToHost, s()), "routing");
    check(cudaMemcpyAsync(weights.data(), weights_dev, weights.size() * 4, cudaMemcpyDeviceToHost, s()), "routing");
    wait_mid_pass("routing");
    if (!failure_.empty()) return;

    // Rows of the grouped input, expert by expert (tokens ascending within one).
    std::vector<int32_t> count(E + 1, 0);
    for (int32_t e : chosen) ++count[std::size_t(e) + 1];
    for (std::size_t e = 0; e < E; ++e) count[e + 1] += count[e];
    std::vector<int64_t> token_of_row(T * K);
    std::vector<int32_t> row_of_choice(T * K);
    std::vector<int32_t> fill(count.begin(), count.end() - 1);
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t k = 0; k < K; ++k) {
        const int32_t row = fill[std::size_t(chosen[t * K + k])]++;
        token_of_row[std::size_t(row)] = int64_t(t);
        row_of_choice[t * K + k] = row;
      }
    }
    // Each token's choices in ascending expert order: the order the CPU backends add them in.
    std::vector<std::pair<int32_t, std::size_t>> order(K);
    std::vector<int32_t> rows(K);
    std::vector<float> ws(K);
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t k = 0; k < K; ++k) order[k] = {chosen[t * K + k], k};
      std::sort(order.begin(), order.end());
      for (std::size_t k = 0; k < K; ++k) {
        rows[k] = row_of_choice[t * K + order[k].second];
        ws[k] = weights[t * K + order[k].second];
      }
      std::copy(rows.begin(), rows.end(), row_of_choice.begin() + std::ptrdiff_t(t * K));
      std::copy(ws.begin(), ws.end(), weights.begin() + std::ptrdiff_t(t * K));
    }
    Scratch::Frame frame(scratch_);
    float* xg = scratch_.floats(T * K * H);
    float* y = scratch_.floats(T * K * H);
    cuda::gather_rows(x, upload(token_of_row.data(), token_of_row.size()), int(T * K), int(H), xg, s());
    for (std::size_t e = 0; e < E; ++e) {
      const std::size_t r0 = std::size_t(count[e]), n = std::size_t(count[e + 1]) - r0;
      if (n == 0) continue;
      if (w.plain_experts()) {
        swiglu(w.experts[e], xg + r0 * H, n, y + r0 * H);
      } else {
        biased_expert(w, e, xg + r0 * H, n, y + r0 * H);
      }
    }
    cuda::moe_combine(y, upload(row_of_choice.data(), row_of_choice.size()), upload(weights.data(), weights.size()),
                      int(T), int(K), int(H), out, s());
  }

  // For each slot j of `ws` (its expert's matrix): C_j [2n, m] = X_j [2n, k] W_j^T, X_j the slot's
  // rows as bf16 halves (x ~= hi + lo: n hi rows at b + j b_stride, then n lo rows), so C_j's first
  // n rows are the products of the high halves and the next n those of the low ones (a row's value
  // is their sum). bf16 weights: one batched GEMM over both halves. GGUF blocks: decoded a few
  // experts at a time into bf16 planes W ~= Wh + Wl (dequant_split_rows, as block_product), then
  // Wh [hi; lo], and Wl hi added into the high parts: two batched GEMMs. Consecutive slots of one
  // expert share its decoded planes.
  void split_gemms(const std::vector<const void*>& ws, DType dtype, std::size_t row_bytes, int m, int k,
                   const std::uint16_t* b, std::size_t b_stride, std::size_t n, float* c, std::size_t c_stride) {
    if (dtype == DType::kBF16) {
      batched_gemm(ws.data(), row_bytes, m, k, b, b_stride, 2 * n, c, c_stride, false, ws.size());
      return;
    }
    std::vector<std::size_t> runs;  // the first slot of each run of one expert's slots
    for (std::size_t j = 0; j < ws.size(); ++j)
      if (j == 0 || ws[j] != ws[j - 1]) runs.push_back(j);
    runs.push_back(ws.size());
    const std::size_t experts = runs.size() - 1;
    Scratch::Frame frame(scratch_);
    const std::size_t plane = std::size_t(m) * std::size_t(k);
    const std::size_t per = std::clamp<std::size_t>(tile_bytes() / (4 * plane), 1, experts);
    auto* hi = scratch_.take<std::uint16_t>(2 * per * plane);
    std::uint16_t* lo = hi + per * plane;
    for (std::size_t e0 = 0; e0 < experts; e0 += per) {
      const std::size_t ne = std::min(per, experts - e0), j0 = runs[e0], j1 = runs[e0 + ne];
      std::vector<const void*> src(ne), his, los;
      for (std::size_t i = 0; i < ne; ++i) {
        src[i] = ws[runs[e0 + i]];
        for (std::size_t j = runs[e0 + i]; j < runs[e0 + i + 1]; ++j) {
          his.push_back(hi + i * plane);
          los.push_back(lo + i * plane);
        }
      }
      // One launch decodes the sub-batch: the host issuing a launch per expert set the pace.
      cuda::dequant_split_matrices(reinterpret_cast<const std::byte* const*>(upload(src.data(), ne)), int(ne), dtype,
                                   row_bytes, m, k, hi, lo, s());
      const std::uint16_t* bj = b + j0 * b_stride;
      float* cj = c + j0 * c_stride;
      const std::size_t plain = std::size_t(k) * 2;
      batched_gemm(his.data(), plain, m, k, bj, b_stride, 2 * n, cj, c_stride, false, j1 - j0);
      batched_gemm(los.data(), plain, m, k, bj, b_stride, n, cj, c_stride, true, j1 - j0);
    }
  }

  // For each of `count` problems j: C_j [n, m] = B_j [n, k] W_j^T (+ C_j when `accumulate`) with
  // W_j bf16 [m, k] (row stride row_bytes) at ws[j], B_j bf16 at b + j b_stride and C_j fp32 at
  // c + j c_stride.
  void batched_gemm(const void* const* ws, std::size_t row_bytes, int m, int k, const std::uint16_t* b,
                    std::size_t b_stride, std::size_t n, float* c, std::size_t c_stride, bool accumulate,
                    std::size_t count) {
    std::vector<const void*> bs(count);
    std::vector<void*> cs(count);
    for (std::size_t j = 0; j < count; ++j) {
      bs[j] = b + j * b_stride;
      cs[j] = c + j * c_stride;
    }
    const float one = 1.f, beta = accumulate ? 1.f : 0.f;
    const void* const* a = upload(ws, count);
    const void* const* bp = upload(bs.data(), count);
    void* const* cp = const_cast<void* const*>(upload(cs.data(), count));
    const GemmTimer timer(this, {m, int64_t(n), k, int64_t(count), int64_t(row_bytes), accumulate ? 1 : 0});
    if (cuda::LtBatchedGemm* lt = lt_batched()) {
      if (lt->run(a, int(row_bytes / 2), bp, cp, m, int(n), k, int(count), accumulate, s()) == CUBLAS_STATUS_SUCCESS)
        return;
      cudaGetLastError();  // a shape it has no plan for: the batched call below takes it
    }
    const cublasStatus_t st = cublasGemmBatchedEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, m, int(n), k, &one, a, CUDA_R_16BF,
                                                  int(row_bytes / 2), bp, CUDA_R_16BF, k, &beta, cp, CUDA_R_32F, m,
                                                  int(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) fail(std::string("cublasGemmBatchedEx: ") + cublas_status_text(st));
  }

  // The cuBLASLt path of batched_gemm (unless FT_CUDA_GEMM=batched), made on first use; null when
  // off or when it could not start (then the batched call serves every product).
  cuda::LtBatchedGemm* lt_batched() {
    if (!lt_tried_) {
      lt_tried_ = true;
      std::string why;
      if (cuda::lt_batched_gemm_enabled() && !(lt_ = cuda::LtBatchedGemm::create(why)))
        std::fprintf(stderr, "freetoken: cuBLASLt: %s; the batched cuBLAS calls serve instead\n", why.c_str());
    }
    return lt_.get();
  }
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
  void add_shared_expert(const MoeWeights& w, const float* x, std::size_t T, float* out) {
    if (!w.has_shared) return;
    Scratch::Frame frame(scratch_);
    const std::size_t H = std::size_t(w.hidden);
    float* shared = scratch_.floats(T * H);
    swiglu(w.shared, x, T, shared);
    if (!w.shared_gated) return add(out, shared, T * H);
    float* gate = scratch_.floats(T);
    linear(x, T, w.shared_gate, nullptr, gate);
    cuda::add_sigmoid_scaled(shared, gate, int(T), int(H), out, s());
  }

  // What follows the routed experts' products: the family's GLU and its biases (in VRAM).
  static cuda::ExpertEpilogue epilogue(const MoeWeights& w) {
    cuda::ExpertEpilogue a = cuda::glu_epilogue(w.glu);
    a.gate_bias = w.gate_bias;
    a.up_bias = w.up_bias;
    a.down_bias = w.down_bias;
    return a;
  }

  // The device table of a MoE layer's experts for the fused few-token path, built once per layer
  // (kept with the weights); null when the layer's experts do not fit it (not bf16, uneven
  // strides, unaligned).
  const cuda::ExpertTable* expert_table(const MoeWeights& w) {
    if (auto it = tables_.find(&w); it != tables_.end()) return it->second.get();
    std::unique_ptr<cuda::ExpertTable> table;
    const SwiGluMatrices& first = w.experts.front();
    bool fits = w.router_spec.top_k <= 32;
    std::vector<const std::byte*> gate, up, down;
    for (const SwiGluMatrices& e : w.experts) {
      for (const Matrix* m : {&e.gate, &e.up, &e.down}) {
        // bf16 rows the vector loads can read, or a GGUF block dtype (read a byte at a time).
        fits = fits && m->device &&
               (m->dtype == DType::kBF16 ? cuda::gemv_fits(m->device, m->row_bytes, m->cols)
                                         : cuda::is_block_dtype(m->dtype) && m->cols % 32 == 0);
      }
      fits = fits && e.gate.row_bytes == first.gate.row_bytes && e.up.row_bytes == first.gate.row_bytes &&
             e.down.row_bytes == first.down.row_bytes && e.gate.dtype == first.gate.dtype &&
             e.up.dtype == first.gate.dtype && e.down.dtype == first.down.dtype;
      gate.push_back(e.gate.device);
      up.push_back(e.up.device);
      down.push_back(e.down.device);
    }
    if (fits) {
      table = std::make_unique<cuda::ExpertTable>();
      table->gate = place_pointers(gate);
      table->up = place_pointers(up);
      table->down = place_pointers(down);
      fits = table->gate && table->up && table->down;
      table->gate_up_row_bytes = first.gate.row_bytes;
      table->down_row_bytes = first.down.row_bytes;
      table->hidden = int(w.hidden);
      table->inter = int(first.inter());
      table->act = epilogue(w);
      table->gate_up_dtype = first.gate.dtype;
      table->down_dtype = first.down.dtype;
      table->gate_up_units = table->down_units = true;
      for (const SwiGluMatrices& e : w.experts) {
        table->gate_up_units = table->gate_up_units &&
                               cuda::units_fit(e.gate.dtype, e.gate.device, e.gate.row_bytes, int(e.gate.cols)) &&
                               cuda::units_fit(e.up.dtype, e.up.device, e.up.row_bytes, int(e.up.cols));
        table->down_units =
            table->down_units && cuda::units_fit(e.down.dtype, e.down.device, e.down.row_bytes, int(e.down.cols));
      }
    }
    if (!fits) table.reset();
    return (tables_[&w] = std::move(table)).get();
  }
  const std::byte* const* place_pointers(const std::vector<const std::byte*>& ptrs) {
    auto dev = weights_.take(ptrs.size() * sizeof(void*));
    if (!dev || cudaMemcpy(*dev, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice) != cudaSuccess)
      return nullptr;
    return reinterpret_cast<const std::byte* const*>(*dev);
  }

  // `n` device counters at zero, set up once into `slot`, by which the blocks of a launch know which
  // of them finished last (gemv_route's routing block, a split decode attention's merging block);
  // they are zero again between launches. Null if they cannot be had (the callers then take a path
  // without them).
  unsigned* zeroed_counters(unsigned*& slot, std::size_t n) {
    if (slot) return slot;
    auto dev = weights_.take(n * sizeof(unsigned));
    if (!dev || cudaMemset(*dev, 0, n * sizeof(unsigned)) != cudaSuccess) return nullptr;
    return slot = reinterpret_cast<unsigned*>(*dev);
  }

  // Routing a trace asked for, copied out without stalling the pass: recorded when it ends.
  void trace_later(const int32_t* chosen_dev, std::size_t T, std::size_t K) {
    auto pinned = pass_host_.take(T * K * sizeof(int32_t));
    if (!pinned) throw std::bad_alloc();
    if (!replaying())
      check(cudaMemcpyAsync(*pinned, chosen_dev, T * K * sizeof(int32_t), cudaMemcpyDeviceToHost, s()), "routing");
    pending_traces_.push_back({reinterpret_cast<const int32_t*>(*pinned), T, K});
  }

  // Routed expert e of a gpt-oss MoE: biased gate and up products, the GLU, the biased down product.
  void biased_expert(const MoeWeights& w, std::size_t e, const float* x, std::size_t T, float* out) {
    const SwiGluMatrices& m = w.experts[e];
    Scratch::Frame frame(scratch_);
    const std::size_t I = std::size_t(m.inter()), n = T * I;
    float* g = scratch_.floats(n);
    float* u = scratch_.floats(n);
    const LinearOut gate_up[] = {{&m.gate, w.gate_bias ? w.gate_bias + e * I : nullptr, g},
                                 {&m.up, w.up_bias ? w.up_bias + e * I : nullptr, u}};
    linears(x, T, gate_up);
    cuda::expert_glu(g, u, g, n, w.glu, s());
    linear(g, T, m.down, w.down_bias ? w.down_bias + e * std::size_t(w.hidden) : nullptr, out);
  }

  void swiglu(const SwiGluMatrices& m, const float* x, std::size_t T, float* out) {
    Scratch::Frame frame(scratch_);
    const std::size_t n = T * std::size_t(m.inter());
    float* g = scratch_.floats(n);
    float* u = scratch_.floats(n);
    const LinearOut gate_up[] = {{&m.gate, nullptr, g}, {&m.up, nullptr, u}};
    linears(x, T, gate_up);
    cuda::silu_mul(g, u, g, n, s());
    linear(g, T, m.down, nullptr, out);
  }

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
  const AttnBatch& attention_batch(const KvLayout& layout, std::span<const AttentionSeq> seqs) {
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
    attn_ = {seqs.data(), seqs.size(), pass_, int(row_seq.size()), max_ctx, upload(row_seq.data(), row_seq.size()),
             upload(dev.data(), dev.size()), upload(pages.data(), pages.size())};
    return attn_;
  }

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
  unsigned* route_done_ = nullptr;  // gemv_route's counter (device)
  unsigned* split_done_ = nullptr;  // split decode attention's counters (device)
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

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options) {
  FT_ASSIGN_OR_RETURN(CudaDeviceInfo info, query_cuda_device(options.device));
  if (info.compute_major < 8)
    return unsupported("GPU " + info.name + " (sm_" + std::to_string(info.compute_major * 10 + info.compute_minor) +
                       ") is too old: the CUDA backend needs sm_80 or newer (bf16 tensor cores)");
  if (cudaError_t err = cudaSetDevice(options.device); err != cudaSuccess) {
    cudaGetLastError();
    return unavailable(cuda::error_text("cudaSetDevice", err));
  }
  FT_ASSIGN_OR_RETURN(std::shared_ptr<cuda::Stream> stream, cuda::Stream::create());
  cublasHandle_t blas = nullptr;
  if (cublasStatus_t st = cublasCreate(&blas); st != CUBLAS_STATUS_SUCCESS)
    return unavailable(std::string("cuBLAS: ") + cublas_status_text(st));
  cublasSetStream(blas, stream->get());
  // fp32 weights stay fp32 (no TF32): the reference-grade path for tiny tensors and tests.
  cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);
  const std::string name = "cuda:" + std::to_string(options.device) + " " + info.name + " (sm_" +
                           std::to_string(info.compute_major * 10 + info.compute_minor) + ")";
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(name, options.device, std::move(stream), blas));
}

}  // namespace ft::engine

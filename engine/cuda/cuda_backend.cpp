// The CUDA backend's passes (run as they are, recorded as graphs, replayed), the placement of
// weights, and the factory. The class and the other areas' files: cuda_backend.h.
#include "cuda_backend.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "ft/common/log.h"

namespace ft::engine {

cudaEvent_t CudaBackend::op_event() {
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

void CudaBackend::collect_op_events() {
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

void CudaBackend::size_workspace(bool decode_step) {
  if (!offload_ || !offload_->options().lend_workspace) return;
  const std::size_t peak = scratch_.take_peak();
  if (last_pass_decode_) decode_peak_ = std::max(decode_peak_, peak);
  last_pass_decode_ = decode_step;
  if (!decode_step) {
    decode_steps_ = 0;
    if (scratch_.lent()) {
      offload_->recall();
      scratch_.reclaim_tail();
    }
    return;
  }
  if (scratch_.lent() || ++decode_steps_ < kLendAfterSteps) return;
  // Steps recorded as graphs so far took at most decode_peak_: what they address stays kept.
  const std::span<std::byte> tail = scratch_.lend_tail(std::max(kDecodeWorkspace, 4 * decode_peak_));
  if (!tail.empty() && offload_->lend(tail) == 0) scratch_.reclaim_tail();
}

Status CudaBackend::execute(const std::function<void()>& fn) {
  size_workspace(std::exchange(decode_step_, false));
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
  note_workspace_growth();
  if (offload_) after_offloaded_pass();
  if (!failure_.empty()) return internal_error("GPU: " + failure_);
  return Status::ok();
}

Status CudaBackend::execute(const std::function<void()>& fn, const PassShape& shape) {
  using Mode = cuda::PassGraphs::Mode;
  // Offloaded experts (but for misses read in place), gpt-oss's biased ones and DeepSeek sparse
  // attention's indexer sync with the host inside the pass (host_synced_): nothing to record.
  if ((profile_ && profile_->time_ops) || (offload_ && !offload_->in_place()) || host_synced_) {
    decode_step_ = true;
    return execute(fn);
  }
  std::vector<int64_t> key = shape.key;
  key.push_back(shape.kv_tokens);
  key.push_back(trace_ ? 1 : 0);  // a traced pass also copies the routing out
  // Misses read in place record the CPU share's kernels (publish, wait, add) only with a share:
  // a step recorded without one must not replay once a policy with one is set.
  key.push_back(offload_ ? (offload_->cpu_share() ? 2 : 1) : 0);
  const Mode mode = graphs_.plan(key);
  if (mode == Mode::kRun) {
    decode_step_ = true;
    return execute(fn);
  }
  size_workspace(true);
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
  note_workspace_growth();
  if (offload_) after_offloaded_pass();
  if (!failure_.empty()) return internal_error("GPU: " + failure_);
  return Status::ok();
}

void CudaBackend::after_offloaded_pass() {
  if (std::string why = offload_->take_cpu_failure(); !why.empty()) fail(why);
  offload_->after_in_place_pass();
  offload_->publish();
}

Status CudaBackend::place(Matrix& m) {
  FT_ASSIGN_OR_RETURN(std::byte * dev, weights_.take(m.bytes()));
  if (cudaError_t err = cudaMemcpy(dev, m.data, m.bytes(), cudaMemcpyHostToDevice); err != cudaSuccess) {
    cudaGetLastError();
    return internal_error(cuda::error_text("uploading a weight", err));
  }
  m.device = dev;
  return Status::ok();
}

Result<const float*> CudaBackend::place(std::span<const float> v) {
  FT_ASSIGN_OR_RETURN(std::byte * dev, weights_.take(v.size_bytes()));
  if (cudaError_t err = cudaMemcpy(dev, v.data(), v.size_bytes(), cudaMemcpyHostToDevice); err != cudaSuccess) {
    cudaGetLastError();
    return internal_error(cuda::error_text("uploading a weight", err));
  }
  return reinterpret_cast<const float*>(dev);
}

Status CudaBackend::set_expert_offload(const ExpertOffloadOptions& options) {
  FT_ASSIGN_OR_RETURN(offload_, cuda::ExpertSlots::create(options));
  return Status::ok();
}

std::span<std::byte> CudaBackend::host_buffer(std::size_t bytes) {
  if (offload_) {
    if (const std::span<std::byte> pinned = offload_->pinned_buffer(bytes); !pinned.empty()) return pinned;
  }
  return Backend::host_buffer(bytes);
}

Status CudaBackend::place_expert(Matrix& m) {
  if (!offload_) return place(m);
  if (m.dtype != DType::kBF16 && !cuda::is_block_dtype(m.dtype))
    return unsupported(std::string("experts kept in host RAM must be bf16 or a GGUF block type, not ") +
                       dtype_name(m.dtype));
  return Status::ok();  // read where it is mapped: copied into a slot, or computed on the CPU
}

std::optional<ExpertOffloadStats> CudaBackend::expert_offload_stats() const {
  if (!offload_) return std::nullopt;
  ExpertOffloadStats stats = offload_->snapshot();
  stats.workspace_overflow_bytes = workspace_overflow_;
  return stats;
}

Result<int> CudaBackend::resize_expert_cache(int slots, int floor_per_layer) {
  if (!offload_) return Backend::resize_expert_cache(slots, floor_per_layer);
  cudaSetDevice(device_);
  Result<int> now = offload_->resize(slots, floor_per_layer);  // recalls lent slots first
  if (offload_->lent_slots() == 0) scratch_.reclaim_tail();
  decode_steps_ = 0;
  return now;
}

std::optional<CudaBackend::DeviceMemoryInfo> CudaBackend::device_memory() const {
  std::size_t free = 0, total = 0;
  cudaSetDevice(device_);
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return DeviceMemoryInfo{free, total};
}

Status CudaBackend::reserve_workspace(std::size_t bytes) {
  if (!scratch_.reserve(bytes))
    return unavailable("cannot set aside " + std::to_string(bytes >> 20) + " MiB of GPU memory for the workspace");
  workspace_reserved_ = scratch_.capacity();
  return Status::ok();
}

Result<std::size_t> CudaBackend::resize_workspace(std::size_t bytes) {
  cudaSetDevice(device_);
  if (bytes == scratch_.capacity() && !scratch_.lent()) return bytes;
  // The lent tail's slots go back to the workspace first; then nothing may still read it (the
  // last pass has synchronised; the copies and CPU share are waited for by the recall) and the
  // decode steps' recordings, which address it, are dropped.
  if (offload_ && scratch_.lent()) offload_->recall();
  scratch_.reclaim_tail();
  if (cudaError_t err = cudaStreamSynchronize(s()); err != cudaSuccess)
    return internal_error(cuda::error_text("the pass before a workspace resize", err));
  graphs_.clear();
  decode_steps_ = 0;
  const std::size_t before = scratch_.capacity();
  scratch_ = Scratch(memory_);  // the old block goes back to the device before the new one is asked for
  if (!scratch_.reserve(bytes) && !scratch_.reserve(before))
    return unavailable("cannot set aside " + std::to_string(bytes >> 20) + " MiB of GPU memory for the workspace");
  workspace_reserved_ = scratch_.capacity();
  workspace_overflow_ = 0;
  return workspace_reserved_;
}

void CudaBackend::note_workspace_growth() {
  const std::size_t held = scratch_.capacity();
  if (workspace_reserved_ == 0 || held <= workspace_reserved_ + workspace_overflow_) return;
  workspace_overflow_ = held - workspace_reserved_;
  FT_WARN("a forward pass's temporaries outgrew the GPU workspace by "
          << (workspace_overflow_ >> 20) << " MiB, outside the memory budget (shorter passes stay inside it)");
}

void CudaBackend::begin_pass() {
  pass_device_.reset();
  pass_host_.reset();
  ++pass_;
  failure_.clear();
  pending_traces_.clear();
  issued_.reset();
}

const std::byte* CudaBackend::weight(const Matrix& m) {
  if (!m.device) {
    std::fprintf(stderr, "freetoken: internal error: a weight was not placed on the GPU\n");
    std::abort();
  }
  return m.device;
}

void CudaBackend::wait_mid_pass(const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  check(cudaStreamSynchronize(s()), what);
  if (!profile_) return;
  profile_->sync_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++profile_->syncs;
}

const std::byte* const* CudaBackend::place_pointers(const std::vector<const std::byte*>& ptrs) {
  auto dev = weights_.take(ptrs.size() * sizeof(void*));
  if (!dev || cudaMemcpy(*dev, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice) != cudaSuccess)
    return nullptr;
  return reinterpret_cast<const std::byte* const*>(*dev);
}

unsigned* CudaBackend::zeroed_counters(unsigned*& slot, std::size_t n) {
  if (slot) return slot;
  auto dev = weights_.take(n * sizeof(unsigned));
  if (!dev || cudaMemset(*dev, 0, n * sizeof(unsigned)) != cudaSuccess) return nullptr;
  return slot = reinterpret_cast<unsigned*>(*dev);
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options) {
  FT_ASSIGN_OR_RETURN(CudaDeviceInfo info, query_cuda_device(options.device));
  if (info.compute_major < 8)
    return unsupported("GPU " + info.name + " (sm_" + std::to_string(info.compute_major * 10 + info.compute_minor) +
                       ") is too old: the CUDA backend needs sm_80 or newer (bf16 tensor cores)");
  if (cudaError_t err = cudaSetDevice(options.device); err != cudaSuccess) {
    cudaGetLastError();
    return unavailable(cuda::error_text("cudaSetDevice", err));
  }
  if (const char* sync = std::getenv("FT_CUDA_SYNC")) {  // a measuring aid: spin|yield|block
    const unsigned flags = std::strcmp(sync, "spin") == 0    ? cudaDeviceScheduleSpin
                           : std::strcmp(sync, "yield") == 0 ? cudaDeviceScheduleYield
                           : std::strcmp(sync, "block") == 0 ? cudaDeviceScheduleBlockingSync
                                                             : cudaDeviceScheduleAuto;
    if (cudaSetDeviceFlags(flags) != cudaSuccess) cudaGetLastError();
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

#include "pass_graphs.h"

#include <cstdlib>
#include <cstring>

#include "device_memory.h"

namespace ft::engine::cuda {

PassGraphs::PassGraphs() {
  const char* env = std::getenv("FT_CUDA_GRAPHS");
  enabled_ = !(env && std::strcmp(env, "0") == 0);
}

PassGraphs::~PassGraphs() {
  for (auto& [key, rec] : recordings_) cudaGraphExecDestroy(rec.exec);
}

PassGraphs::Mode PassGraphs::plan(const std::vector<int64_t>& key) {
  if (!enabled_) return Mode::kRun;
  if (recordings_.count(key)) return Mode::kReplay;
  if (seen_.size() > 16 * kMaxRecordings) seen_.clear();
  return ++seen_[key] >= 2 ? Mode::kRecord : Mode::kRun;
}

void PassGraphs::clear() {
  for (auto& [k, r] : recordings_) cudaGraphExecDestroy(r.exec);
  recordings_.clear();
  seen_.clear();
}

void PassGraphs::begin_pass() {
  uploads_.clear();
  copies_.clear();
}

void PassGraphs::log_upload(const void* pinned, const void* dev, std::size_t bytes) {
  uploads_.push_back({pinned, dev, bytes});
}

void PassGraphs::log_copy(void* dst, const void* pinned, std::size_t bytes) { copies_.push_back({dst, pinned, bytes}); }

std::string PassGraphs::begin_capture(cudaStream_t s) {
  // Relaxed: the pass may allocate (a pinned arena growing), which the stricter modes refuse.
  if (cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed); err != cudaSuccess) {
    cudaGetLastError();
    return error_text("recording a decode step", err);
  }
  return {};
}

std::string PassGraphs::finish_record(cudaStream_t s, const std::vector<int64_t>& key) {
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(s, &graph);
  if (err != cudaSuccess || !graph) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    return error_text("recording a decode step", err != cudaSuccess ? err : cudaErrorStreamCaptureInvalidated);
  }
  Recording rec;
  err = cudaGraphInstantiate(&rec.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return error_text("instantiating a decode step's graph", err);
  }
  rec.uploads = uploads_;
  rec.copies = copies_;
  if (recordings_.size() >= kMaxRecordings) clear();
  const cudaGraphExec_t exec = rec.exec;
  recordings_.emplace(key, std::move(rec));
  err = cudaGraphLaunch(exec, s);
  if (err != cudaSuccess) return error_text("launching a decode step's graph", err);
  return {};
}

std::string PassGraphs::launch_replay(cudaStream_t s, const std::vector<int64_t>& key) {
  const auto it = recordings_.find(key);
  if (it == recordings_.end()) return "internal error: no recording to replay";
  const Recording& rec = it->second;
  bool same = uploads_ == rec.uploads && copies_.size() == rec.copies.size();
  for (std::size_t i = 0; same && i < copies_.size(); ++i)
    same = copies_[i].pinned == rec.copies[i].pinned && copies_[i].bytes == rec.copies[i].bytes;
  if (!same) {
    cudaGraphExecDestroy(rec.exec);
    recordings_.erase(it);
    enabled_ = false;
    return "internal error: a decode step's buffers differ from its recording (graphs are off from now on)";
  }
  if (cudaError_t err = cudaGraphLaunch(rec.exec, s); err != cudaSuccess)
    return error_text("launching a decode step's graph", err);
  return {};
}

void PassGraphs::copy_out() const {
  for (const Copy& c : copies_) std::memcpy(c.dst, c.pinned, c.bytes);
}

}  // namespace ft::engine::cuda

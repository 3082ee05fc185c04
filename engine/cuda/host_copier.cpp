#include "host_copier.h"

#include <algorithm>
#include <cstring>

#include "device_memory.h"

namespace ft::engine::cuda {
namespace {

void check(const char* what, cudaError_t err) {
  if (err != cudaSuccess) fatal_gpu_error(what, err);
}

}  // namespace

struct HostCopier::Fence final : CopyFence {
  void wait() const override {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  void finish() {
    {
      std::lock_guard lock(mu);
      done = true;
    }
    cv.notify_all();
  }
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  bool done = false;
};

HostCopier::HostCopier(cudaStream_t compute) : compute_(compute) {
  check("cudaStreamCreate", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  for (int b = 0; b < 2; ++b) {
    void* p = nullptr;
    check("cudaHostAlloc (copy bounce buffer)", cudaHostAlloc(&p, kBounceBytes, cudaHostAllocDefault));
    bounce_[b] = static_cast<std::byte*>(p);
    check("cudaEventCreate", cudaEventCreateWithFlags(&filled_[b], cudaEventDisableTiming));
  }
  thread_ = std::thread([this] { run(); });
}

HostCopier::~HostCopier() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
  for (int b = 0; b < 2; ++b) {
    cudaEventDestroy(filled_[b]);
    cudaFreeHost(bounce_[b]);
  }
  cudaStreamDestroy(stream_);
}

Result<std::shared_ptr<const CopyFence>> HostCopier::copy(void* dst, const std::byte* src, std::size_t n,
                                                          std::function<void()> on_read) {
  Job job{nullptr, dst, src, n, std::make_shared<Fence>(), std::move(on_read)};
  if (cudaError_t err = cudaEventCreateWithFlags(&job.ready, cudaEventDisableTiming); err != cudaSuccess) {
    cudaGetLastError();
    return unavailable(error_text("cudaEventCreate", err));
  }
  check("cudaEventRecord", cudaEventRecord(job.ready, compute_));
  std::shared_ptr<const CopyFence> fence = job.fence;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(job));
  }
  work_.notify_one();
  return fence;
}

void HostCopier::wait_for_reads(const std::byte* p, std::size_t n) {
  const auto reads = [&](const Job& j) { return j.src < p + n && p < j.src + j.n; };
  std::unique_lock lock(mu_);
  progress_.wait(lock,
                 [&] { return (!active_ || !reads(*active_)) && std::none_of(queue_.begin(), queue_.end(), reads); });
}

void HostCopier::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopped, and nothing left to copy
    Job job = std::move(queue_.front());
    queue_.pop_front();
    active_ = &job;
    lock.unlock();
    copy_one(job);
    lock.lock();
    active_ = nullptr;
    progress_.notify_all();
    lock.unlock();
    job.fence->finish();
    lock.lock();
  }
}

// Piece i goes into bounce buffer i % 2 on the copy stream while piece i - 1 is moved out.
void HostCopier::copy_one(const Job& job) {
  check("cudaStreamWaitEvent", cudaStreamWaitEvent(stream_, job.ready, 0));
  const std::size_t pieces = (job.n + kBounceBytes - 1) / kBounceBytes;
  const auto piece_bytes = [&](std::size_t i) { return std::min(kBounceBytes, job.n - i * kBounceBytes); };
  const auto fill = [&](std::size_t i) {
    const int b = int(i % 2);
    check("cudaMemcpyAsync D2H (checkpoint copy)",
          cudaMemcpyAsync(bounce_[b], job.src + i * kBounceBytes, piece_bytes(i), cudaMemcpyDeviceToHost, stream_));
    check("cudaEventRecord", cudaEventRecord(filled_[b], stream_));
  };
  if (pieces > 0) fill(0);
  for (std::size_t i = 0; i < pieces; ++i) {
    const int b = int(i % 2);
    check("cudaEventSynchronize (checkpoint copy)", cudaEventSynchronize(filled_[b]));
    if (i + 1 < pieces) fill(i + 1);  // the other buffer, moved out in the previous round
    std::memcpy(static_cast<std::byte*>(job.dst) + i * kBounceBytes, bounce_[b], piece_bytes(i));
  }
  cudaEventDestroy(job.ready);
  if (job.on_read) job.on_read();
}

}  // namespace ft::engine::cuda

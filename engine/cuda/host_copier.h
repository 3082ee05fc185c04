// Copies from GPU memory into ordinary (pageable) host memory without stalling the thread that
// asks: the asking thread records where the bytes are ready on the backend's stream and queues the
// copy; a thread of its own moves each copy through page-locked bounce buffers (a copy stream
// fills one at the link's speed while the thread moves the previous one out with memcpy) and then
// marks the copy's fence. Why not page-locked destinations: page-locking memory takes the driver
// ~0.5 ms a MB and stalls the threads that launch kernels meanwhile; checkpoints of a long prefill
// need hundreds of MB of new destinations, while two bounce buffers serve any number of copies.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ft/engine/memory.h"

namespace ft::engine::cuda {

class HostCopier {
 public:
  // Copies are ordered after the work queued on `compute` when they are asked for.
  explicit HostCopier(cudaStream_t compute);
  ~HostCopier();  // finishes the queued copies
  HostCopier(const HostCopier&) = delete;
  HostCopier& operator=(const HostCopier&) = delete;

  // Queues [src, src + n) -> dst (host memory, alive and unread until the fence passes).
  // `on_read` (optional) runs on the copier's thread once the source has been read, before the
  // fence passes: a staging copy's device memory goes back for reuse.
  Result<std::shared_ptr<const CopyFence>> copy(void* dst, const std::byte* src, std::size_t n,
                                                std::function<void()> on_read = {});
  // Returns once no queued copy still has to read device memory in [p, p + n): before that memory
  // is rewritten (a page zeroed for reuse).
  void wait_for_reads(const std::byte* p, std::size_t n);

 private:
  struct Fence;
  struct Job {
    cudaEvent_t ready;  // on the backend's stream: the bytes are there
    void* dst;
    const std::byte* src;
    std::size_t n;
    std::shared_ptr<Fence> fence;
    std::function<void()> on_read;
  };
  void run();
  void copy_one(const Job& job);

  static constexpr std::size_t kBounceBytes = 8u << 20;
  cudaStream_t compute_;
  cudaStream_t stream_ = nullptr;  // the copies' own
  std::byte* bounce_[2] = {};      // page-locked
  cudaEvent_t filled_[2] = {};

  std::mutex mu_;
  std::condition_variable work_, progress_;
  std::deque<Job> queue_;
  const Job* active_ = nullptr;  // being copied (its source still read)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ft::engine::cuda

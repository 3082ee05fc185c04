// GPU memory for the CUDA backend: the Memory the state layer and scratch use (allocation, copies
// ordered on the backend's stream), and the bump arenas that hold weights for the model's life and
// per-pass uploads until the pass ends.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ft/engine/memory.h"
#include "host_copier.h"

namespace ft::engine::cuda {

std::string error_text(const char* what, cudaError_t err);
// Prints "freetoken: fatal GPU error in <what>: <err>" and aborts: for a failure the process cannot
// go on from (the device's memory or stream is lost).
[[noreturn]] void fatal_gpu_error(const char* what, cudaError_t err);

// A stream owned by a value (the Memory and the backend share it through a shared_ptr).
class Stream {
 public:
  static Result<std::shared_ptr<Stream>> create();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  Stream() = default;
  cudaStream_t stream_ = nullptr;
};

class DeviceMemory final : public Memory {
 public:
  explicit DeviceMemory(std::shared_ptr<Stream> stream);
  bool is_host() const override { return false; }
  Result<std::byte*> allocate(std::size_t n) override;
  void free(std::byte* p, std::size_t n) override;
  void zero(std::byte* p, std::size_t n) override;
  void copy(std::byte* dst, const std::byte* src, std::size_t n) override;
  void to_host(void* dst, const std::byte* src, std::size_t n) override;
  void from_host(std::byte* dst, const void* src, std::size_t n) override;
  // Queued on a thread of its own (HostCopier), after the backend's stream's work so far: the next
  // pass runs while the bytes cross PCIe, and `dst` may be pageable memory.
  std::shared_ptr<const CopyFence> to_host_async(void* dst, const std::byte* src, std::size_t n) override;
  // A device copy of the bytes (on the stream, no wait), then to_host_async of that copy; the copy's
  // memory is reused once read. Up to kSnapshotBytes of such copies at once (beyond the placement
  // plan's budget); past that, a plain to_host.
  std::shared_ptr<const CopyFence> snapshot_to_host(void* dst, const std::byte* src, std::size_t n) override;
  static constexpr std::size_t kSnapshotBytes = 256u << 20;
  // Host RAM: to_host_async's destinations need not be page-locked (HostCopier says why).
  std::shared_ptr<Memory> staging_memory() override;
  cudaStream_t stream() const { return stream_->get(); }
  ~DeviceMemory() override;

 private:
  void sync(const char* what, cudaError_t launched);
  HostCopier& started_copier();
  std::byte* take_snapshot_buffer(std::size_t n);  // null: none free and the cap reached
  void give_back_snapshot_buffer(std::byte* p, std::size_t n);
  std::shared_ptr<Stream> stream_;
  std::mutex snapshot_mu_;
  std::multimap<std::size_t, std::byte*> free_snapshots_;  // by size
  std::vector<std::byte*> snapshots_;                      // every one made
  std::size_t snapshot_bytes_ = 0;                         // their total
  std::mutex copier_mu_;
  std::unique_ptr<HostCopier> copier_;  // made on the first to_host_async
  HostCopier* copier();                 // null until then
};

// Page-locked host memory (cudaHostAlloc), the source of asynchronous uploads.
class PinnedMemory final : public HostVisibleMemory {
 public:
  Result<std::byte*> allocate(std::size_t n) override;
  void free(std::byte* p, std::size_t n) override;
};

// Bump allocation from chunks of a Memory: take() until reset(), which keeps the chunks.
class Arena {
 public:
  Arena(std::shared_ptr<Memory> memory, std::size_t chunk_bytes) : memory_(std::move(memory)), chunk_(chunk_bytes) {}
  Result<std::byte*> take(std::size_t bytes);
  void reset();
  std::size_t bytes_held() const;

 private:
  std::shared_ptr<Memory> memory_;
  std::size_t chunk_;
  std::vector<MemoryBlock> chunks_;
  std::size_t current_ = 0;  // chunk being filled
  std::size_t used_ = 0;     // bytes used in it
};

}  // namespace ft::engine::cuda

#include "device_memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ft::engine::cuda {

std::string error_text(const char* what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

Result<std::shared_ptr<Stream>> Stream::create() {
  std::shared_ptr<Stream> s(new Stream());  // private constructor: make_shared cannot reach it
  if (cudaError_t err = cudaStreamCreateWithFlags(&s->stream_, cudaStreamNonBlocking); err != cudaSuccess) {
    cudaGetLastError();
    return unavailable(error_text("cudaStreamCreate", err));
  }
  return s;
}

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}

// Copies and fills of state happen between passes (snapshots, restores, page reuse); a failure
// there means the device is gone, which the engine cannot recover from.
void DeviceMemory::sync(const char* what, cudaError_t launched) {
  cudaError_t err = launched == cudaSuccess ? cudaStreamSynchronize(stream()) : launched;
  if (err != cudaSuccess) fatal_gpu_error(what, err);
}

void fatal_gpu_error(const char* what, cudaError_t err) {
  std::fprintf(stderr, "freetoken: fatal GPU error in %s\n", error_text(what, err).c_str());
  std::abort();
}

Result<std::byte*> DeviceMemory::allocate(std::size_t n) {
  void* p = nullptr;
  if (cudaError_t err = cudaMalloc(&p, std::max<std::size_t>(n, 256)); err != cudaSuccess) {
    cudaGetLastError();
    return unavailable("cannot allocate " + std::to_string((n + (1 << 20) - 1) >> 20) + " MiB of GPU memory (" +
                       cudaGetErrorString(err) + ")");
  }
  auto* bytes = static_cast<std::byte*>(p);
  zero(bytes, n);
  return bytes;
}

void DeviceMemory::free(std::byte* p, std::size_t n) {
  if (HostCopier* c = copier()) c->wait_for_reads(p, n);
  cudaFree(p);
}

HostCopier* DeviceMemory::copier() {
  std::lock_guard lock(copier_mu_);
  return copier_.get();
}

void DeviceMemory::zero(std::byte* p, std::size_t n) {
  if (HostCopier* c = copier()) c->wait_for_reads(p, n);  // a page reused while a checkpoint copies it out
  sync("cudaMemset", cudaMemsetAsync(p, 0, n, stream()));
}

HostCopier& DeviceMemory::started_copier() {
  std::lock_guard lock(copier_mu_);
  if (!copier_) copier_ = std::make_unique<HostCopier>(stream());
  return *copier_;
}

std::shared_ptr<const CopyFence> DeviceMemory::to_host_async(void* dst, const std::byte* src, std::size_t n) {
  auto fence = started_copier().copy(dst, src, n);
  if (fence.is_ok()) return std::move(fence).value();
  to_host(dst, src, n);  // no event to order it by: a synchronous copy is still right
  return nullptr;
}

std::shared_ptr<const CopyFence> DeviceMemory::snapshot_to_host(void* dst, const std::byte* src, std::size_t n) {
  std::byte* staging = n > 0 ? take_snapshot_buffer(n) : nullptr;
  if (!staging) {
    to_host(dst, src, n);
    return nullptr;
  }
  // Ordered after the pass that wrote src and before the next one, which may rewrite it at once.
  if (cudaError_t err = cudaMemcpyAsync(staging, src, n, cudaMemcpyDeviceToDevice, stream()); err != cudaSuccess) {
    fatal_gpu_error("cudaMemcpyAsync D2D (state snapshot)", err);
  }
  auto fence = started_copier().copy(dst, staging, n, [this, staging, n] { give_back_snapshot_buffer(staging, n); });
  if (fence.is_ok()) return std::move(fence).value();
  to_host(dst, staging, n);
  give_back_snapshot_buffer(staging, n);
  return nullptr;
}

std::byte* DeviceMemory::take_snapshot_buffer(std::size_t n) {
  std::lock_guard lock(snapshot_mu_);
  if (auto it = free_snapshots_.find(n); it != free_snapshots_.end()) {
    std::byte* p = it->second;
    free_snapshots_.erase(it);
    return p;
  }
  if (snapshot_bytes_ + n > kSnapshotBytes) return nullptr;
  void* p = nullptr;
  if (cudaMalloc(&p, n) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  snapshots_.push_back(static_cast<std::byte*>(p));
  snapshot_bytes_ += n;
  return static_cast<std::byte*>(p);
}

void DeviceMemory::give_back_snapshot_buffer(std::byte* p, std::size_t n) {
  std::lock_guard lock(snapshot_mu_);
  free_snapshots_.emplace(n, p);
}

DeviceMemory::~DeviceMemory() {
  copier_.reset();  // its queued copies finish first: they read the snapshot buffers
  for (std::byte* p : snapshots_) cudaFree(p);
}

void DeviceMemory::copy(std::byte* dst, const std::byte* src, std::size_t n) {
  sync("cudaMemcpy D2D", cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream()));
}

void DeviceMemory::to_host(void* dst, const std::byte* src, std::size_t n) {
  sync("cudaMemcpy D2H", cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream()));
}

void DeviceMemory::from_host(std::byte* dst, const void* src, std::size_t n) {
  sync("cudaMemcpy H2D", cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream()));
}

DeviceMemory::DeviceMemory(std::shared_ptr<Stream> stream) : stream_(std::move(stream)) {}

std::shared_ptr<Memory> DeviceMemory::staging_memory() { return host_memory(); }

Result<std::byte*> PinnedMemory::allocate(std::size_t n) {
  void* p = nullptr;
  if (cudaError_t err = cudaHostAlloc(&p, std::max<std::size_t>(n, 1), cudaHostAllocDefault); err != cudaSuccess) {
    cudaGetLastError();
    return unavailable("cannot allocate " + std::to_string(n >> 20) + " MiB of pinned host memory (" +
                       cudaGetErrorString(err) + ")");
  }
  std::memset(p, 0, n);
  return static_cast<std::byte*>(p);
}

void PinnedMemory::free(std::byte* p, std::size_t) { cudaFreeHost(p); }

Result<std::byte*> Arena::take(std::size_t bytes) {
  constexpr std::size_t kAlign = 256;  // cuBLAS and vector loads want aligned operands
  bytes = (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  while (current_ < chunks_.size() && used_ + bytes > chunks_[current_].size()) {
    ++current_;
    used_ = 0;
  }
  if (current_ == chunks_.size()) {
    FT_ASSIGN_OR_RETURN(MemoryBlock block, MemoryBlock::allocate(memory_, std::max(chunk_, bytes)));
    chunks_.push_back(std::move(block));
    used_ = 0;
  }
  std::byte* p = chunks_[current_].data() + used_;
  used_ += bytes;
  return p;
}

void Arena::reset() {
  current_ = 0;
  used_ = 0;
}

std::size_t Arena::bytes_held() const {
  std::size_t n = 0;
  for (const MemoryBlock& c : chunks_) n += c.size();
  return n;
}

}  // namespace ft::engine::cuda

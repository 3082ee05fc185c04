// The memory a backend computes in: host RAM or a GPU's. The KV pool, the sequence state, the
// checkpoint code and the scratch allocator go through this interface, so the same code keeps state
// in either place; only the GPU backend's implementation differs (engine/cuda/).
#pragma once

#include <cstddef>
#include <memory>

#include "ft/common/result.h"

namespace ft::engine {

// The end of an asynchronous copy: wait() returns once its bytes are in place (any thread, any
// number of times).
class CopyFence {
 public:
  virtual ~CopyFence() = default;
  virtual void wait() const = 0;
};

class Memory {
 public:
  virtual ~Memory() = default;
  // True when the CPU can read and write the bytes directly (plain pointers).
  virtual bool is_host() const = 0;
  // n zero-filled bytes, page-aligned. On the host this is reserved address space that the kernel
  // commits as it is first touched, so large reservations cost nothing until used.
  virtual Result<std::byte*> allocate(std::size_t n) = 0;
  virtual void free(std::byte* p, std::size_t n) = 0;
  // These return when the bytes are in place (ordered after the backend's work already queued).
  virtual void zero(std::byte* p, std::size_t n) = 0;
  virtual void copy(std::byte* dst, const std::byte* src, std::size_t n) = 0;  // both in this memory
  virtual void to_host(void* dst, const std::byte* src, std::size_t n) = 0;
  virtual void from_host(std::byte* dst, const void* src, std::size_t n) = 0;
  // to_host that may return before the bytes land (ordered after the backend's work already
  // queued; a later zero() or free() of memory it reads waits for it, so a page reused meanwhile is
  // copied as it was): the fence says when they have. `dst` must stay alive and unread until then.
  // Null: the bytes are in place already (the default, a plain to_host).
  virtual std::shared_ptr<const CopyFence> to_host_async(void* dst, const std::byte* src, std::size_t n) {
    to_host(dst, src, n);
    return nullptr;
  }
  // to_host_async of bytes the backend's next work rewrites in place (a linear-attention state the
  // next pass updates): [src, src + n) is read as it is now, and the source may change as soon as
  // this returns. A GPU's memory copies it on the device first and moves that copy out beside the
  // next pass. Null: the bytes are in place already (the default, a plain to_host).
  virtual std::shared_ptr<const CopyFence> snapshot_to_host(void* dst, const std::byte* src, std::size_t n) {
    to_host(dst, src, n);
    return nullptr;
  }
  // Host memory (is_host) for buffers that to_host_async fills and that are kept and reused (the KV
  // pool's page mirrors): a GPU's gives host RAM. Null: the memory is the host's own, nothing to copy.
  virtual std::shared_ptr<Memory> staging_memory() { return nullptr; }
};

// Memory the CPU reads directly (host RAM, page-locked host memory): zeroing and copies are
// memset/memcpy; subclasses say how it is allocated.
class HostVisibleMemory : public Memory {
 public:
  bool is_host() const override { return true; }
  void zero(std::byte* p, std::size_t n) override;
  void copy(std::byte* dst, const std::byte* src, std::size_t n) override;
  void to_host(void* dst, const std::byte* src, std::size_t n) override;
  void from_host(std::byte* dst, const void* src, std::size_t n) override;
};

// Host RAM (anonymous mappings for allocate()); one shared instance.
std::shared_ptr<Memory> host_memory();

// A block of a Memory, freed when the value goes (moved, never copied).
class MemoryBlock {
 public:
  MemoryBlock() = default;
  static Result<MemoryBlock> allocate(std::shared_ptr<Memory> memory, std::size_t bytes);
  ~MemoryBlock() { reset(); }
  MemoryBlock(MemoryBlock&& o) noexcept { *this = std::move(o); }
  MemoryBlock& operator=(MemoryBlock&& o) noexcept;
  MemoryBlock(const MemoryBlock&) = delete;
  MemoryBlock& operator=(const MemoryBlock&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  Memory* memory() const { return memory_.get(); }
  template <typename T>
  T* as() const { return reinterpret_cast<T*>(data_); }
  void reset();

 private:
  std::shared_ptr<Memory> memory_;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ft::engine

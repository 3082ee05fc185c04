// The memory a backend computes in: host RAM or a GPU's. The KV pool, the sequence state, the
// checkpoint code and the scratch allocator go through this interface, so the same code keeps state
// in either place; only the GPU backend's implementation differs (engine/cuda/).
#pragma once

#include <cstddef>
#include <memory>

#include "ft/common/result.h"

namespace ft::engine {

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
  // Host memory (is_host) that to_host copies land in fastest, for buffers kept and reused: a GPU's
  // page-locked memory, where a pageable destination goes through the driver's bounce buffer and
  // its fresh pages fault in as the copy writes them (~1 GB/s measured for checkpoint pages, 55 GB/s
  // page-locked). Null: any host memory will do.
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

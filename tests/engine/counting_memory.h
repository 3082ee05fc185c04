// Host memory that counts the blocks it hands out and takes back, and remembers where each went:
// for tests of what a pool or reservation asks of the memory underneath it.
#pragma once

#include <vector>

#include "ft/engine/memory.h"

namespace ft::engine {

class CountingMemory final : public HostVisibleMemory {
 public:
  Result<std::byte*> allocate(std::size_t n) override {
    ++allocations;
    auto p = host_memory()->allocate(n);
    if (p.is_ok()) blocks.push_back(*p);
    return p;
  }
  void free(std::byte* p, std::size_t n) override {
    ++frees;
    host_memory()->free(p, n);
  }
  int allocations = 0, frees = 0;
  std::vector<std::byte*> blocks;  // every block handed out, in order
};

}  // namespace ft::engine

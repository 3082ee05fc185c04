// Where a row sits in the MoE's slot layout (kernels.h: rows in slots of slot_rows, each slot's
// high parts, then its low ones), for the kernels that read or write it. Device code; include from
// .cu files only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::engine::cuda {

// Where row r's high half starts, how far after it its low one is, and its slot.
struct SplitPlace {
  std::size_t hi;
  std::size_t lo_step;
  int64_t slot;
};
__device__ __forceinline__ SplitPlace split_place(int64_t r, int width, int slot_rows) {
  const int64_t slot = r / slot_rows, within = r % slot_rows;
  return {std::size_t(2 * slot * slot_rows + within) * std::size_t(width), std::size_t(slot_rows) * std::size_t(width),
          slot};
}

}  // namespace ft::engine::cuda

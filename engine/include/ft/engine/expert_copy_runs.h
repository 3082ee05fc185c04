// Copies of experts into GPU cache slots, grouped into runs that can cross PCIe as one strided
// copy a matrix. An expert crosses as three copies (gate, up, down) of ~1 MB each for a Q4_K_M
// model, and copies that size run at ~87% of the bus's rate for large ones (docs/perf-notes.md:
// 47.9 GB/s at 0.88 MB against 55.0 at 1 GiB on an H100). A GGUF file stacks a layer's experts in
// one tensor a matrix, so experts e, e+1, ... lie one after another in host memory; where they go
// into slots the same distance apart, cudaMemcpy2DAsync moves each matrix of the whole run at once.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ft::engine {

// One expert's copy: its three matrices in host memory (sizes in bytes) and where each goes.
struct ExpertCopy {
  const std::byte* src[3] = {};
  std::size_t bytes[3] = {};
  std::byte* dst[3] = {};
};

// A run of copies [first, first + count) of the list: copy first + i reads src + i * bytes and
// writes dst + i * dst_pitch, matrix by matrix.
struct ExpertCopyRun {
  std::size_t first = 0, count = 0;
  std::size_t dst_pitch = 0;  // 0 when count is 1
};

// The list in order, cut where the next copy does not continue the run: each of its matrices
// must start where the previous copy's ends in host memory (same sizes), and land the run's pitch
// further on the GPU (the same pitch for all three; a pitch shorter than a matrix would overlap).
std::vector<ExpertCopyRun> expert_copy_runs(std::span<const ExpertCopy> copies);

}  // namespace ft::engine

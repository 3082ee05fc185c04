// The parallel part of write_synthetic_model: every tensor's bytes generated and written with
// pwrite into files that already exist at their final size, by a pool of worker threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/random_checkpoint.h"

namespace ft::engine::synthetic {

// How a tensor's values are stored: bf16 draws of its init; FP8 E4M3 codes (random, magnitudes at
// most 1.875, no NaN: the scale tensor beside it gives them the init's spread); one fp32 value
// repeated (an FP8 weight's scales); random bytes (MXFP4 blocks: every E2M1 pair is a value); or
// one byte repeated (MXFP4's E8M0 scales).
enum class Encoding { kBf16, kFp8Codes, kF32Constant, kRandomBytes, kU8Constant };
std::size_t encoding_bytes(Encoding e);  // per value: 2, 1, 4, 1, 1
// The root mean square of the kFp8Codes values: an FP8 weight of spread sigma has scales sigma / it.
float fp8_codes_rms();

// Where one tensor's data goes: an open, writable file descriptor and the byte offset there.
struct TensorTarget {
  int fd = -1;
  uint64_t offset = 0;
  const std::string* path = nullptr;  // for error messages
  Encoding encoding = Encoding::kBf16;
  float constant = 0;  // kF32Constant's value, kU8Constant's byte
};

// Splits the tensors into (tensor, kBlockElements block) items and fills them on `threads` worker
// threads (a tbb::task_arena). `progress(done, total)` runs on the calling thread about every
// 200 ms and once at the end. The first write error stops the remaining items and is returned.
Status fill_tensors(const std::vector<PlannedTensor>& tensors, const std::vector<TensorTarget>& targets, uint64_t seed,
                    int threads, const std::function<void(uint64_t, uint64_t)>& progress);

// Runs fill(i, done) for every item i < n_items on `threads` worker threads (0: all), each adding
// the bytes it wrote to `done`; progress(done, total) as fill_tensors. The first error stops the
// remaining items and is returned.
Status parallel_fill(std::size_t n_items, int threads, uint64_t total,
                     const std::function<void(uint64_t, uint64_t)>& progress,
                     const std::function<Status(std::size_t, std::atomic<uint64_t>&)>& fill);

// kIo when the filesystem holding `dir` has less than `need` bytes free, saying how much each is.
Status check_free_space(const std::filesystem::path& dir, uint64_t need);

// Writes all n bytes at `offset` of `fd` (retrying short writes); kIo naming `path`.
Status pwrite_all(int fd, const void* data, std::size_t n, uint64_t offset, const std::string& path);

}  // namespace ft::engine::synthetic

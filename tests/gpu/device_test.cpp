// The GPU this process can use, or why none.
#include "ft/engine/device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "ft/engine/cuda_ops.h"
#include "ft/engine/memory.h"
#include "ft/engine/ops.h"
#include "gpu_test_util.h"

namespace ft::engine {
namespace {

TEST(CudaDevice, ReportsItselfOrWhyNot) {
  auto dev = query_cuda_device();
  if (!built_with_cuda()) {
    ASSERT_FALSE(dev);
    EXPECT_NE(dev.status().message().find("no CUDA support"), std::string::npos);
    GTEST_SKIP() << "built without CUDA";
  }
  if (!dev) GTEST_SKIP() << "no GPU: " << dev.status().message();
  EXPECT_GT(dev->total_bytes, 0u);
  EXPECT_GE(dev->compute_major, 7);
}

// The probes bench prints beside its bounds: pinned copies, and a kernel reading pinned memory in
// place. Both cross the same link, so neither can be far faster than the other; a read the
// compiler dropped would report terabytes a second. Built without CUDA, each says why not.
TEST(CudaDevice, TheLinkProbesMeasureTheSameLink) {
  if (!built_with_cuda()) {
    EXPECT_FALSE(measure_mapped_read_gbps(1 << 20));
    GTEST_SKIP() << "built without CUDA";
  }
  FT_REQUIRE_GPU();
  auto copy = measure_host_to_device_gbps(std::size_t(256) << 20);
  auto read = measure_mapped_read_gbps(std::size_t(256) << 20);
  ASSERT_TRUE(copy) << copy.status().to_string();
  ASSERT_TRUE(read) << read.status().to_string();
  EXPECT_GT(*read, 1.0);
  EXPECT_LT(*read, 2 * *copy);
  std::printf("[ pinned copy %.1f GB/s, read in place %.1f GB/s ]\n", *copy, *read);
}

// A CUDA backend's memory (the backend kept alive with it).
struct GpuMemory {
  std::unique_ptr<Backend> backend;
  std::shared_ptr<Memory> memory;
};

Result<GpuMemory> gpu_memory() {
  BackendOptions options;
  options.kind = BackendKind::kCuda;
  FT_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, make_backend(options));
  std::shared_ptr<Memory> memory = backend->memory();
  return GpuMemory{std::move(backend), std::move(memory)};
}

// A checkpoint's page copy to the host runs beside the next pass (a thread of its own, bounce
// buffers, a copy stream): the bytes are the page as the backend's queued work left it, and a
// zero() issued right after (a page reused) waits for the copy instead of racing it.
TEST(CudaDevice, CopiesToTheHostRunAsideAndAReusedPageWaitsForThem) {
  FT_REQUIRE_GPU();
  auto gpu = gpu_memory();
  ASSERT_TRUE(gpu) << gpu.status().to_string();
  const std::shared_ptr<Memory>& memory = gpu->memory;
  std::shared_ptr<Memory> staging = memory->staging_memory();
  ASSERT_TRUE(staging);
  constexpr std::size_t kBytes = (64u << 20) + 12292;  // pieces of the bounce buffers, and a tail
  std::vector<std::uint32_t> pattern(kBytes / 4);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = std::uint32_t(i * 2654435761u);
  auto device = MemoryBlock::allocate(memory, kBytes);
  auto host = MemoryBlock::allocate(staging, kBytes);
  ASSERT_TRUE(device && host);
  for (int round = 0; round < 4; ++round) {
    memory->from_host(device->data(), pattern.data(), kBytes);
    std::shared_ptr<const CopyFence> fence = memory->to_host_async(host->data(), device->data(), kBytes);
    ASSERT_TRUE(fence) << "a GPU's copy to the host is asynchronous";
    memory->zero(device->data(), kBytes);
    fence->wait();
    ASSERT_EQ(std::memcmp(host->data(), pattern.data(), kBytes), 0) << "round " << round;
    std::memset(host->data(), 0, kBytes);
  }
}

// A linear-attention state is rewritten by the next pass as soon as the checkpoint is taken: the
// snapshot copies it on the device first, so the host gets the bytes of the moment it was asked.
TEST(CudaDevice, ASnapshotToTheHostKeepsTheBytesOfItsMomentWhileTheSourceIsRewritten) {
  FT_REQUIRE_GPU();
  auto gpu = gpu_memory();
  ASSERT_TRUE(gpu) << gpu.status().to_string();
  const std::shared_ptr<Memory>& memory = gpu->memory;
  constexpr std::size_t kBytes = (20u << 20) + 4100;  // several bounce-buffer pieces and a tail
  auto device = MemoryBlock::allocate(memory, kBytes);
  ASSERT_TRUE(device);
  std::vector<std::uint32_t> now(kBytes / 4), next(kBytes / 4), got(kBytes / 4);
  for (int round = 0; round < 4; ++round) {  // later rounds reuse the device copies' memory
    for (std::size_t i = 0; i < now.size(); ++i) {
      now[i] = std::uint32_t((i + std::size_t(round)) * 2654435761u);
      next[i] = ~now[i];
    }
    memory->from_host(device->data(), now.data(), kBytes);
    std::shared_ptr<const CopyFence> fence = memory->snapshot_to_host(got.data(), device->data(), kBytes);
    ASSERT_TRUE(fence) << "a GPU's snapshot is asynchronous";
    memory->from_host(device->data(), next.data(), kBytes);  // the next pass, at once
    fence->wait();
    ASSERT_EQ(std::memcmp(got.data(), now.data(), kBytes), 0) << "round " << round;
  }
}

}  // namespace
}  // namespace ft::engine

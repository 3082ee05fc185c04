// Measures payload compression choices (none / LZ4 / ZSTD) through the real store on data shaped
// like model state: bf16 attention KV and fp32 recurrent state. Results: docs/perf-notes.md,
// "Checkpoint store". Run: ft_store_bench_tests --gtest_filter='StoreCompressionBench.*'
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <random>

#include "ft/store/rocksdb_store.h"
#include "store_test_util.h"
#include "test_support.h"

namespace ft::store {
namespace {

std::uint16_t to_bf16(float f) {  // round to nearest even, as the engine's casts do
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// Keys: per-channel scales spread over ~2 orders of magnitude with a few outlier channels (as in
// real K caches); values: unit-ish Gaussian. Layout [kv=2][heads][tokens][head_dim].
StateChunk kv_chunk(std::uint32_t layer, std::uint64_t heads, std::uint64_t tokens, std::uint64_t dim, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::lognormal_distribution<float> scale(0.f, 1.f);
  std::vector<float> k_scale(heads * dim);
  for (auto& s : k_scale) s = scale(rng) * ((rng() % 64 == 0) ? 20.f : 1.f);
  StateChunk c{layer, ChunkKind::kAttentionKv, DType::kBf16, {2, heads, tokens, dim}, {}};
  c.data.resize(2 * heads * tokens * dim * 2);
  auto* out = reinterpret_cast<std::uint16_t*>(c.data.mutable_data());
  std::size_t i = 0;
  for (int kv = 0; kv < 2; ++kv)
    for (std::uint64_t h = 0; h < heads; ++h)
      for (std::uint64_t t = 0; t < tokens; ++t)
        for (std::uint64_t d = 0; d < dim; ++d) out[i++] = to_bf16(normal(rng) * (kv == 0 ? k_scale[h * dim + d] : 0.5f));
  return c;
}

StateChunk recurrent_chunk(std::uint32_t layer, std::uint64_t heads, std::uint64_t dim, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 0.05f);
  StateChunk c{layer, ChunkKind::kRecurrent, DType::kF32, {heads, dim, dim}, {}};
  c.data.resize(heads * dim * dim * 4);
  auto* out = reinterpret_cast<float*>(c.data.mutable_data());
  for (std::size_t i = 0; i < heads * dim * dim; ++i) out[i] = normal(rng);
  return c;
}

std::uint64_t stored_bytes(const std::filesystem::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto ext = e.path().extension();
    if (ext == ".sst" || ext == ".blob") n += e.file_size();
  }
  return n;
}

// Process CPU seconds, all threads (RocksDB compresses on its background threads). Reported next
// to wall time because on a slow or shared disk the wall time is mostly fsync and IO waits.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void measure(const char* data_name, const std::vector<ModelState>& states) {
  std::uint64_t raw = 0;
  for (const auto& s : states) raw += s.payload_bytes();
  for (auto [name, c] : {std::pair{"none", Compression::kNone}, {"lz4", Compression::kLz4}, {"zstd", Compression::kZstd}}) {
    test::TempDir dir;
    StoreOptions o = testing::small_options(dir.path());
    o.compression = c;
    double cpu0 = cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    {
      auto store = RocksDbStore::open(o);
      ASSERT_TRUE(store.is_ok()) << store.status().to_string();
      for (std::size_t i = 0; i < states.size(); ++i) {
        ASSERT_TRUE((*store)->save(testing::key("t", 1, i), states[i]).is_ok());
      }
      (*store)->flush();  // memtables to blob files: compression happens here
    }
    const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double write_cpu = cpu_seconds() - cpu0;
    const std::uint64_t disk = stored_bytes(dir.path());
    auto store = RocksDbStore::open(o);
    ASSERT_TRUE(store.is_ok());
    for (std::size_t i = 0; i < states.size(); ++i) ASSERT_TRUE(testing::read_all(**store, testing::key("t", 1, i)).is_ok());
    cpu0 = cpu_seconds();  // second pass: page cache warm, so this is the decode cost
    t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < states.size(); ++i) ASSERT_TRUE(testing::read_all(**store, testing::key("t", 1, i)).is_ok());
    const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double read_cpu = cpu_seconds() - cpu0;
    const double mb = static_cast<double>(raw) / 1e6;
    std::cout << std::fixed << std::setprecision(3) << "| " << data_name << " | " << name << " | "
              << static_cast<double>(disk) / static_cast<double>(raw) << " | " << std::setprecision(1)
              << write_cpu * 1e3 / mb << " | " << write_s * 1e3 / mb << " | " << read_cpu * 1e3 / mb << " | "
              << read_s * 1e3 / mb << " |\n";
  }
}

TEST(StoreCompressionBench, LZ4VsZstdVsNoneOnModelState) {
  std::mt19937 rng(7);
  std::vector<ModelState> kv, recurrent;
  for (std::uint32_t i = 0; i < 4; ++i) {  // 4 checkpoints x 4 MiB of bf16 KV (4 KV heads, 2k tokens, d=128)
    ModelState s = testing::make_state(testing::model(1), 2048, {}, 0);
    s.chunks.push_back(kv_chunk(i, 4, 2048, 128, rng));
    kv.push_back(std::move(s));
  }
  for (std::uint32_t i = 0; i < 2; ++i) {  // 2 checkpoints x 2 MiB of fp32 recurrent state
    ModelState s = testing::make_state(testing::model(1), 2048, {}, 0);
    s.chunks.push_back(recurrent_chunk(i, 32, 128, rng));
    recurrent.push_back(std::move(s));
  }
  std::cout << "| data | compression | stored/raw | write CPU ms/MB | write wall ms/MB | read CPU ms/MB | "
               "read wall ms/MB |\n|---|---|---|---|---|---|---|\n";
  measure("bf16 KV", kv);
  measure("fp32 recurrent", recurrent);
}

}  // namespace
}  // namespace ft::store

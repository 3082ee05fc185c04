// Tunables of the checkpoint store, as plain structs. Each field states its unit and default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>

#include "ft/store/checkpoint_format.h"

namespace ft::store {

enum class Compression { kNone, kLz4, kZstd };

struct StoreOptions {
  // Directory of the RocksDB database; created if missing. No default: required.
  std::filesystem::path path;
  // Bytes (headers + payloads, before compression; a KV page held by several checkpoints once) kept
  // on disk; the cheapest-to-lose unpinned checkpoints are evicted beyond it. Default 64 GiB.
  std::uint64_t byte_budget = 64ull << 30;
  // Bytes of host RAM the RAM tier of a TieredStore may hold. Default 8 GiB.
  std::uint64_t ram_budget = 8ull << 30;
  // Bytes per stored blob piece; chunks larger than this are split. Default 4 MiB.
  std::uint32_t piece_bytes = kDefaultPieceBytes;
  // Bytes written per RocksDB WriteBatch while saving one checkpoint; bigger saves are several
  // batches, fenced by a pending marker (see rocksdb_store.cpp). Default 32 MiB.
  std::uint64_t write_batch_bytes = 32ull << 20;
  // Compression of chunk payloads. Default none: bf16 KV barely compresses, see
  // docs/perf-notes.md "Checkpoint store". Headers always use LZ4.
  Compression compression = Compression::kNone;
  // fsync the WAL on every save. Default false: the WAL is always on, so a killed process loses
  // nothing; only an OS crash or power cut can lose the last few saves (a cache may lose those).
  bool sync_writes = false;
  // Saves pending in the write-behind queue before the oldest unpinned one is dropped. Default 16.
  std::size_t async_queue_depth = 16;
  // Payload bytes pending in the write-behind queue before dropping, as above (a KV page several
  // pending saves hold, once). Default 4 GiB.
  std::uint64_t async_queue_bytes = 4ull << 30;
  // Recompute cost in eviction: each token of a checkpoint counts as this many milliseconds of
  // recency, so at equal last use the longer checkpoint is kept. Default 5 ms/token (a 32k-token
  // checkpoint outlives an empty one used 160 s later).
  double eviction_ms_per_token = 5.0;
  // Wall clock in milliseconds since the epoch. Default (empty): std::chrono::system_clock.
  // Tests inject a fake clock.
  std::function<std::int64_t()> clock_ms;
};

}  // namespace ft::store

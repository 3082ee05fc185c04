// For `bench restore`: lets the RocksDB database behind a checkpoint store finish the background
// compactions that a freshly saved checkpoint sets off, so that they are measured on their own
// instead of disturbing the restore timings.
#pragma once

#include <cstdint>
#include <filesystem>

#include "ft/common/result.h"

namespace ft::cli {

struct SettleReport {
  double seconds = 0;                 // until the last poll (every 0.1 s) that saw a compaction
  std::uint64_t bytes_written = 0;    // by this process meanwhile (/proc/self/io write_bytes)
};

// Opens the (closed) database at `dir` with the options it was last opened with, takes and
// releases a snapshot, as every store read does, and waits (at most `timeout_s`) until RocksDB has
// no compaction pending or running.
Result<SettleReport> settle_rocksdb(const std::filesystem::path& dir, double timeout_s);

}  // namespace ft::cli

// Why this exists: after a checkpoint is saved and flushed, the first snapshot released (every
// RocksDbStore read takes one) lets RocksDB mark the bottommost SSTs for compaction (reason
// "BottommostFiles", to zero their sequence numbers); with blob garbage collection on, those
// compactions relocate the blobs the SSTs reference, i.e. rewrite most of the payload once more.
// Measured in docs/perf-notes.md "Checkpoint restore".
#include "bench_rocksdb_settle.h"

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/options_util.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ft::cli {
namespace {

std::uint64_t process_write_bytes() {
  std::ifstream in("/proc/self/io");
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value) {
    if (name == "write_bytes:") return value;
  }
  return 0;
}

bool busy(rocksdb::DB& db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs) {
  std::uint64_t v = 0;
  if (db.GetIntProperty(rocksdb::DB::Properties::kNumRunningCompactions, &v) && v > 0) return true;
  if (db.GetIntProperty(rocksdb::DB::Properties::kNumRunningFlushes, &v) && v > 0) return true;
  for (auto* cf : cfs) {
    if (db.GetIntProperty(cf, rocksdb::DB::Properties::kCompactionPending, &v) && v > 0) return true;
  }
  return false;
}

}  // namespace

Result<SettleReport> settle_rocksdb(const std::filesystem::path& dir, double timeout_s) {
  rocksdb::ConfigOptions config;
  rocksdb::DBOptions db_opt;
  std::vector<rocksdb::ColumnFamilyDescriptor> cf_descs;
  rocksdb::Status s = rocksdb::LoadLatestOptions(config, dir.string(), &db_opt, &cf_descs);
  if (!s.ok()) return io_error("loading the options of " + dir.string() + ": " + s.ToString());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(db_opt, dir.string(), cf_descs, &handles, &raw);
  if (!s.ok()) return io_error("opening " + dir.string() + ": " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::uint64_t w0 = process_write_bytes();
  db->ReleaseSnapshot(db->GetSnapshot());
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  int idle_polls = 0;  // a compaction may be scheduled just after the previous one ends
  double last_busy = 0;
  while (idle_polls < 5 && elapsed() < timeout_s) {
    if (busy(*db, handles)) {
      idle_polls = 0;
      last_busy = elapsed();
    } else {
      ++idle_polls;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  SettleReport r;
  r.seconds = last_busy;
  r.bytes_written = process_write_bytes() - w0;
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  db->Close();
  if (idle_polls < 5) return unavailable("RocksDB was still compacting after " + std::to_string(timeout_s) + " s");
  return r;
}

}  // namespace ft::cli

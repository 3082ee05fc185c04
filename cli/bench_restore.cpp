// bench restore: is restoring a checkpoint from disk bound by the disk, and how much faster than
// recomputing the prefix is it?
//
// The checkpoint has the real state shapes of Qwen3.5/3.6-MoE-35B-A3B (40 layers; every 4th is
// full attention with 2 KV heads x 256, the rest Gated DeltaNet with a [32,128,128] recurrent state
// and a causal-conv state), in fp32, random bytes (the store does not look at values; random bytes
// do not compress, like real KV, see docs/perf-notes.md). Steps:
//   1. save it to a fresh RocksDbStore and flush; let RocksDB finish the compactions the save sets
//      off (bench_rocksdb_settle.h), reporting what they wrote; reopen the store (a restart);
//   2. cold restore: fsync + POSIX_FADV_DONTNEED every file of the database (the page cache holds
//      none of it; checked with mincore), then lookup_header + read_chunks into a preallocated
//      buffer, checksums verified by the store as on every restore;
//   3. the disk's sequential read: a file of the same size, written, fsynced, dropped from the page
//      cache, read() in 8 MiB blocks straight into the same buffer (the best a restore could do);
//   4. warm: (2) and (3) again with the files left in the page cache.
// Cold restore and disk read alternate, three rounds, so both see the same machine: medians; warm
// figures are the best of three. CPU time per wall second tells a CPU-bound restore from an
// IO-bound one.
#include "bench_restore.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bench_rocksdb_settle.h"
#include "bench_work_dir.h"
#include "ft/store/rocksdb_store.h"

namespace ft::cli {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kCmd[] = "bench restore";
constexpr std::size_t kReadBlock = 8u << 20;  // 8 MiB per read() of the disk baseline
constexpr int kRounds = 3;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds of this process (all threads). A restore runs on the calling thread, so cpu/wall
// near 1 means it was bound by the CPU (checksums, copies), well below 1 that it waited for IO.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Qwen3.5/3.6-MoE-35B-A3B state layout (config.json of the HF release).
struct StateShape {
  int layers = 40;
  int full_attention_interval = 4;  // layer i is full attention when (i + 1) % 4 == 0
  std::uint64_t kv_heads = 2, head_dim = 256;
  std::uint64_t v_heads = 32, k_heads = 16, k_head_dim = 128, v_head_dim = 128, conv_kernel = 4;

  bool full_attention(int layer) const { return (layer + 1) % full_attention_interval == 0; }
  std::uint64_t conv_dim() const { return 2 * k_heads * k_head_dim + v_heads * v_head_dim; }
};

// splitmix64: incompressible filler, cheap enough for a GB.
void fill_random(std::span<std::byte> data, std::uint64_t seed) {
  std::uint64_t s = seed;
  for (std::size_t i = 0; i < data.size(); i += 8) {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(data.data() + i, &z, std::min<std::size_t>(8, data.size() - i));
  }
}

// fp32 state after `tokens` tokens: per full-attention layer K and V [2, N, kv_heads, head_dim];
// per DeltaNet layer the recurrent state [v_heads, k_head_dim, v_head_dim] and the conv state
// [conv_dim, conv_kernel - 1] (the engine's layout; HF caches conv_kernel columns).
store::ModelState make_state(const StateShape& m, std::uint64_t tokens) {
  store::ModelState st;
  st.tokens = tokens;
  st.model = {0x7177656e33356d6full, 0x6f652d33352d6133ull};
  auto add = [&](int layer, store::ChunkKind kind, std::vector<std::uint64_t> shape) {
    store::StateChunk c;
    c.layer = static_cast<std::uint32_t>(layer);
    c.kind = kind;
    c.dtype = store::DType::kF32;
    std::uint64_t elems = 1;
    for (auto d : shape) elems *= d;
    c.shape = std::move(shape);
    c.data.resize(elems * 4);
    fill_random({c.data.mutable_data(), c.data.size()}, 1000 + st.chunks.size());
    st.chunks.push_back(std::move(c));
  };
  for (int l = 0; l < m.layers; ++l) {
    if (m.full_attention(l)) {
      add(l, store::ChunkKind::kAttentionKv, {2, tokens, m.kv_heads, m.head_dim});
    } else {
      add(l, store::ChunkKind::kRecurrent, {m.v_heads, m.k_head_dim, m.v_head_dim});
      add(l, store::ChunkKind::kConv, {m.conv_dim(), m.conv_kernel - 1});
    }
  }
  return st;
}

// A file descriptor that closes itself.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

std::vector<fs::path> files_under(const fs::path& p) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return {p};
  for (const auto& e : fs::recursive_directory_iterator(p, ec)) {
    if (e.is_regular_file(ec)) out.push_back(e.path());
  }
  return out;
}

// Writes back and evicts every file under `p` from the page cache; false if one could not be
// opened (then a "cold" figure would be a lie). A file RocksDB deleted meanwhile is no matter.
bool drop_page_cache(const fs::path& p) {
  for (const fs::path& f : files_under(p)) {
    Fd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.fd < 0 && errno == ENOENT) continue;
    if (fd.fd < 0) return false;
    ::fsync(fd.fd);  // dirty pages cannot be dropped
    ::posix_fadvise(fd.fd, 0, 0, POSIX_FADV_DONTNEED);
  }
  return true;
}

// Fraction of the bytes under `p` resident in the page cache (mincore), to confirm a drop worked.
double resident_fraction(const fs::path& p) {
  const long page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t total = 0, resident = 0;
  for (const fs::path& f : files_under(p)) {
    Fd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat sb{};
    if (fd.fd < 0 || ::fstat(fd.fd, &sb) != 0 || sb.st_size == 0) continue;
    const std::size_t len = static_cast<std::size_t>(sb.st_size);
    void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd.fd, 0);
    if (m == MAP_FAILED) continue;
    std::vector<unsigned char> vec((len + page - 1) / page);
    if (::mincore(m, len, vec.data()) == 0) {
      for (unsigned char v : vec) resident += (v & 1);
      total += vec.size();
    }
    ::munmap(m, len);
  }
  return total ? double(resident) / double(total) : 0.0;
}

const char* fs_name(const fs::path& p) {
  struct statfs s{};
  if (::statfs(p.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case TMPFS_MAGIC: return "tmpfs";
    case EXT4_SUPER_MAGIC: return "ext2/3/4";
    case XFS_SUPER_MAGIC: return "xfs";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
    case NFS_SUPER_MAGIC: return "nfs";
    default: return "other";
  }
}

std::string device_of(const fs::path& p) {
  struct stat sb{};
  if (::stat(p.c_str(), &sb) != 0) return "?";
  return std::to_string(major(sb.st_dev)) + ":" + std::to_string(minor(sb.st_dev));
}

// Where the store goes without --dir: the temp dir unless it is tmpfs (RAM, not a disk); then next
// to the binary, i.e. the build tree on the repository's disk.
fs::path default_base_dir(std::string* why) {
  const fs::path tmp = fs::temp_directory_path();
  if (std::string(fs_name(tmp)) != "tmpfs") {
    *why = "temp dir, not tmpfs";
    return tmp;
  }
  std::error_code ec;
  *why = tmp.string() + " is tmpfs, so next to the binary instead";
  return fs::read_symlink("/proc/self/exe", ec).parent_path();
}

struct Timing {
  double seconds = 0;
  double cpu = 0;  // CPU seconds spent meanwhile
};

struct Restore {
  Timing t;
  Status status;
};

// lookup_header + read_chunks into `buf`, each chunk at its offset in header order.
Restore time_restore(store::RocksDbStore& st, const store::StoreKey& key, std::vector<std::byte>& buf) {
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  auto header = st.lookup_header(key);
  if (!header.is_ok()) return {{}, header.status()};
  std::vector<std::uint64_t> offset(header->chunks.size());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < offset.size(); ++i) {
    offset[i] = total;
    total += header->chunks[i].bytes;
  }
  if (total > buf.size()) return {{}, internal_error("restore buffer too small")};
  Status s = st.read_chunks(key, *header, [&](const store::ChunkPiece& p) {
    std::memcpy(buf.data() + offset[p.chunk_index] + p.offset, p.bytes.data(), p.bytes.size());
    return Status::ok();
  });
  return {{seconds_since(t0), cpu_seconds() - c0}, std::move(s)};
}

Status write_file(const fs::path& path, const std::vector<std::byte>& data) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.fd < 0) return io_error("creating " + path.string() + ": " + std::strerror(errno));
  for (std::size_t off = 0; off < data.size();) {
    const ssize_t n = ::write(fd.fd, data.data() + off, std::min(kReadBlock, data.size() - off));
    if (n <= 0) return io_error("writing " + path.string() + ": " + std::strerror(errno));
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.fd) != 0) return io_error("fsync " + path.string() + ": " + std::strerror(errno));
  return Status::ok();
}

// Sequential read() of the whole file in 8 MiB blocks into `buf`; seconds < 0 on error.
Timing time_read_file(const fs::path& path, std::vector<std::byte>& buf) {
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return {-1, 0};
  for (std::size_t off = 0;;) {
    const ssize_t n = ::read(fd.fd, buf.data() + off, std::min(kReadBlock, buf.size() - off));
    if (n < 0) return {-1, 0};
    if (n == 0) break;
    off += static_cast<std::size_t>(n);
  }
  return {seconds_since(t0), cpu_seconds() - c0};
}

// The median run by wall time (cold figures), or the fastest (warm figures: the others were
// disturbed by something else on the machine).
Timing median(std::vector<Timing> v) {
  std::sort(v.begin(), v.end(), [](const Timing& a, const Timing& b) { return a.seconds < b.seconds; });
  return v[v.size() / 2];
}
Timing best(const std::vector<Timing>& v) {
  return *std::min_element(v.begin(), v.end(), [](const Timing& a, const Timing& b) { return a.seconds < b.seconds; });
}

std::string runs(const std::vector<Timing>& v) {
  std::ostringstream os;
  for (const Timing& x : v) os << (os.tellp() > 0 ? " " : "") << std::fixed << std::setprecision(3) << x.seconds;
  return os.str();
}

Result<std::vector<double>> parse_rates(const std::string& list) {
  std::vector<double> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !(v > 0)) {
      return invalid_argument("--prefill-tok-s expects positive numbers separated by commas, got '" + list + "'");
    }
    out.push_back(v);
  }
  if (out.empty()) return invalid_argument("--prefill-tok-s is empty");
  return out;
}

double gb(std::uint64_t bytes) { return double(bytes) / 1e9; }

}  // namespace

int bench_restore(const Args& args) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as soon as it is measured
  const int tokens = args.has("tokens") ? args.get_int("tokens") : 30000;
  if (tokens < 1) return usage_error(kCmd, "--tokens must be positive");
  auto rates = parse_rates(args.get("prefill-tok-s"));
  if (!rates.is_ok()) return usage_error(kCmd, rates.status().message());

  std::string why = "--dir";
  const fs::path base = args.has("dir") ? fs::path(args.get("dir")) : default_base_dir(&why);
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return usage_error(kCmd, "--dir " + base.string() + " is not a directory");
  WorkDir work(base, "bench-restore");
  if (args.has("keep")) work.keep();
  if (work.path().empty()) return runtime_error(kCmd, "cannot create a directory in " + base.string());
  const fs::path store_dir = work.path() / "store", file = work.path() / "disk-read.bin";

  const StateShape shape;
  store::ModelState state = make_state(shape, std::uint64_t(tokens));
  const std::uint64_t bytes = state.payload_bytes();
  const std::uint64_t kv_per_token = std::uint64_t(shape.layers / shape.full_attention_interval) * 2 *
                                     shape.kv_heads * shape.head_dim * 4;
  const std::uint64_t fixed = bytes - kv_per_token * std::uint64_t(tokens);
  std::printf("bench restore: Qwen3.5/3.6-MoE-35B-A3B state after %d tokens, fp32, %zu chunks\n", tokens,
              state.chunks.size());
  std::printf("  state        %.3f GB fp32 (bf16 would be %.3f GB): KV %llu B/token x %d + DeltaNet %.1f MB fixed\n",
              gb(bytes), gb(bytes / 2), static_cast<unsigned long long>(kv_per_token), tokens, fixed / 1e6);
  std::printf("  dir          %s (%s; %s, device %s)\n", work.path().c_str(), why.c_str(), fs_name(work.path()),
              device_of(work.path()).c_str());
  if (std::string(fs_name(work.path())) == "tmpfs") {
    std::printf("  warning      %s is tmpfs: this measures RAM, not a disk\n", work.path().c_str());
  }

  store::StoreOptions opt;
  opt.path = store_dir;
  opt.byte_budget = std::numeric_limits<std::uint64_t>::max();
  const store::StoreKey key{"bench", state.model, {0x5265, 0x73746f7265}};
  {
    auto st = store::RocksDbStore::open(opt);
    if (!st.is_ok()) return runtime_error(kCmd, st.status().to_string());
    const auto t0 = Clock::now();
    if (Status s = (*st)->save(key, state); !s.is_ok()) return runtime_error(kCmd, s.to_string());
    (*st)->flush();
    const double save_s = seconds_since(t0);
    if ((*st)->degraded() || !(*st)->contains(key)) return runtime_error(kCmd, "the save did not persist (see the log)");
    std::printf("  save         %.2f s (%.2f GB/s, save + flush; WAL on)\n", save_s, gb(bytes) / save_s);
  }
  state = {};  // the restores below fill `buf`; keep one copy of the state in memory, not two
  auto settled = settle_rocksdb(store_dir, 600);
  if (!settled.is_ok()) return runtime_error(kCmd, settled.status().to_string());
  std::printf("  settle       %.2f s, %.3f GB written: the first read after the save lets RocksDB compact the\n"
              "               bottommost files, and blob GC rewrites the blobs they hold; waited for, not timed below\n",
              settled->seconds, gb(settled->bytes_written));
  auto t_open = Clock::now();
  auto opened = store::RocksDbStore::open(opt);
  if (!opened.is_ok()) return runtime_error(kCmd, opened.status().to_string());
  store::RocksDbStore& st = **opened;
  std::printf("  reopen       %.3f s\n", seconds_since(t_open));

  std::vector<std::byte> buf(bytes);
  std::memset(buf.data(), 0, buf.size());  // fault the pages in before timing anything
  std::vector<Timing> cold, disk, warm, warm_disk;
  double resident_store = 0, resident_file = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (!drop_page_cache(store_dir)) return runtime_error(kCmd, "cannot open the store's files to drop them from the page cache");
    resident_store = std::max(resident_store, resident_fraction(store_dir));
    const Restore r = time_restore(st, key, buf);
    if (!r.status.is_ok()) return runtime_error(kCmd, "restore failed: " + r.status.to_string());
    cold.push_back(r.t);
    if (round == 0) {  // the disk baseline file: the restored bytes, same size
      if (Status s = write_file(file, buf); !s.is_ok()) return runtime_error(kCmd, s.to_string());
    }
    drop_page_cache(file);
    resident_file = std::max(resident_file, resident_fraction(file));
    disk.push_back(time_read_file(file, buf));
    if (disk.back().seconds < 0) return runtime_error(kCmd, "reading " + file.string() + ": " + std::strerror(errno));
  }
  for (int round = 0; round < kRounds; ++round) {  // the files are in the page cache now
    const Restore r = time_restore(st, key, buf);
    if (!r.status.is_ok()) return runtime_error(kCmd, "restore failed: " + r.status.to_string());
    warm.push_back(r.t);
    warm_disk.push_back(time_read_file(file, buf));
  }

  const Timing c = median(cold), d = median(disk), w = best(warm), wd = best(warm_disk);
  auto gbs = [&](const Timing& t) { return gb(bytes) / t.seconds; };
  auto busy = [](const Timing& t) { return t.cpu / t.seconds; };
  std::printf("  page cache   after the drops at most %.1f%% of the store and %.1f%% of the file were resident\n",
              100 * resident_store, 100 * resident_file);
  std::printf("  cold restore %.3f s = %.2f GB/s, cpu %.2f of wall (median of %d: %s s; lookup_header + read_chunks, checksums verified)\n",
              c.seconds, gbs(c), busy(c), kRounds, runs(cold).c_str());
  std::printf("  disk read    %.3f s = %.2f GB/s, cpu %.2f of wall (median of %d: %s s; read() 8 MiB blocks, same size)\n",
              d.seconds, gbs(d), busy(d), kRounds, runs(disk).c_str());
  std::printf("  ratio        cold restore / disk read = %.2f\n", gbs(c) / gbs(d));
  std::printf("  warm restore %.3f s = %.2f GB/s, cpu %.2f of wall (best of %d: %s s; files in the page cache)\n",
              w.seconds, gbs(w), busy(w), kRounds, runs(warm).c_str());
  std::printf("  warm read    %.3f s = %.2f GB/s (best of %d: %s s; the same file from the page cache)\n", wd.seconds,
              gbs(wd), kRounds, runs(warm_disk).c_str());
  auto versus = [](double recompute_s, double restore_s) {
    char buf[32];
    if (restore_s <= recompute_s) std::snprintf(buf, sizeof buf, "%.1fx faster", recompute_s / restore_s);
    else std::snprintf(buf, sizeof buf, "%.1fx slower", restore_s / recompute_s);
    return std::string(buf);
  };
  for (double rate : *rates) {
    const double recompute_s = double(tokens) / rate;
    std::printf("  recompute    %d tokens at %.0f tok/s = %.2f s: cold restore %s, warm restore %s\n", tokens, rate,
                recompute_s, versus(recompute_s, c.seconds).c_str(), versus(recompute_s, w.seconds).c_str());
  }
  if (busy(c) > 0.8) {
    std::printf("  note         the cold restore kept a CPU busy: it is bound by checksums and copies, not by the disk\n");
  }
  if (args.has("keep")) std::printf("  kept         %s\n", work.path().c_str());
  return 0;
}

}  // namespace ft::cli

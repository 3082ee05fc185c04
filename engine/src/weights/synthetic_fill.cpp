#include "weights/synthetic_fill.h"

#include <sys/statvfs.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <numeric>

#include "ops/block_fields.h"
#include "weights/synthetic_values.h"

namespace ft::engine::synthetic {
namespace {

// Values are generated into a 128 KiB buffer and written while it is still in the L2 cache.
constexpr std::size_t kChunkElements = 64 * 1024;

struct WorkItem {
  std::size_t tensor;
  uint64_t block;
};

// Codes with bit 6 clear: exponent field 0..7, so |value| <= 1.875 and never the NaN 0x7f.
constexpr std::uint8_t kFp8CodeMask = 0xBF;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::size_t encoding_bytes(Encoding e) { return e == Encoding::kBf16 ? 2 : e == Encoding::kF32Constant ? 4 : 1; }

float fp8_codes_rms() {
  double sum = 0;
  for (unsigned c = 0; c <= kFp8CodeMask; ++c) {
    if ((c & kFp8CodeMask) != c) continue;
    const double v = std::bit_cast<float>(e4m3_bits(c));
    sum += v * v;
  }
  return float(std::sqrt(sum / 128.0));  // 128 codes: 64 magnitudes, both signs
}

Status pwrite_all(int fd, const void* data, std::size_t n, uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return io_error("cannot write " + path + ": " + std::strerror(w < 0 ? errno : EIO));
    p += w;
    n -= std::size_t(w);
    offset += uint64_t(w);
  }
  return Status::ok();
}

Status check_free_space(const std::filesystem::path& dir, uint64_t need) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return io_error("cannot stat " + dir.string() + ": " + std::strerror(errno));
  const uint64_t available = uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
  if (available >= need) return Status::ok();
  char text[96];
  std::snprintf(text, sizeof text, ": the model needs %.1f GB, %.1f GB is free", double(need) / 1e9,
                double(available) / 1e9);
  return io_error("not enough space in " + dir.string() + text);
}

namespace {

// The first error any worker saw; later items are skipped once there is one.
class FirstError {
 public:
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void set(Status s) {
    std::lock_guard lock(mu_);
    if (!failed_.exchange(true)) status_ = std::move(s);
  }
  Status get() const {
    std::lock_guard lock(mu_);
    return status_;
  }

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  Status status_;
};

}  // namespace

Status fill_tensors(const std::vector<PlannedTensor>& tensors, const std::vector<TensorTarget>& targets, uint64_t seed,
                    int threads, const std::function<void(uint64_t, uint64_t)>& progress) {
  if (targets.size() != tensors.size()) return internal_error("fill_tensors: one target per tensor expected");

  // One lookup table per distinct (scale, offset): every expert matrix of a width shares one.
  std::map<std::pair<double, double>, std::vector<bf16_t>> tables;
  std::vector<const bf16_t*> table_of(tensors.size(), nullptr);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorInit& init = tensors[i].init;
    if (init.kind != TensorInit::Kind::kNormal) continue;
    auto [it, inserted] = tables.try_emplace({init.scale, init.offset});
    if (inserted) it->second = normal_table(init.scale, init.offset);
    table_of[i] = it->second.data();
  }

  // Items in file order, so each file fills roughly front to back.
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(targets[a].fd, targets[a].offset) < std::pair(targets[b].fd, targets[b].offset);
  });
  std::vector<WorkItem> items;
  uint64_t total = 0;
  for (std::size_t i : order) {
    const uint64_t n = uint64_t(tensors[i].numel());
    for (uint64_t b = 0; b * kBlockElements < n; ++b) items.push_back({i, b});
    total += encoding_bytes(targets[i].encoding) * n;
  }

  tbb::enumerable_thread_specific<std::vector<bf16_t>> buffers([] { return std::vector<bf16_t>(kChunkElements); });
  auto fill_item = [&](std::size_t i, std::atomic<uint64_t>& done) -> Status {
    const WorkItem& item = items[i];
    const PlannedTensor& t = tensors[item.tensor];
    const TensorTarget& target = targets[item.tensor];
    const uint64_t first = item.block * kBlockElements;
    const uint64_t end = std::min(uint64_t(t.numel()), first + kBlockElements);
    std::vector<bf16_t>& buf = buffers.local();
    if (target.encoding != Encoding::kBf16) {  // codes, bytes or a constant, through the same 128 KiB buffer
      uint64_t state = block_seed(seed, t.name, item.block);
      const std::size_t per = encoding_bytes(target.encoding), chunk = 2 * kChunkElements / per;
      auto* bytes = reinterpret_cast<std::uint8_t*>(buf.data());
      for (uint64_t at = first; at < end; at += chunk) {
        const std::size_t count = std::size_t(std::min<uint64_t>(chunk, end - at));
        if (target.encoding == Encoding::kFp8Codes || target.encoding == Encoding::kRandomBytes) {
          const uint64_t mask = target.encoding == Encoding::kFp8Codes ? 0xBFBFBFBFBFBFBFBFull : ~0ull;
          for (std::size_t k = 0; k < count; k += 8) {
            const uint64_t r = splitmix64(state) & mask;
            std::memcpy(bytes + k, &r, std::min<std::size_t>(8, count - k));
          }
        } else if (target.encoding == Encoding::kU8Constant) {
          std::memset(bytes, int(target.constant), count);
        } else {
          for (std::size_t k = 0; k < count; ++k) std::memcpy(bytes + 4 * k, &target.constant, 4);
        }
        FT_RETURN_IF_ERROR(pwrite_all(target.fd, bytes, per * count, target.offset + per * at, *target.path));
        done.fetch_add(per * count, std::memory_order_relaxed);
      }
      return Status::ok();
    }
    BlockGenerator gen(t.init, table_of[item.tensor], block_seed(seed, t.name, item.block));
    for (uint64_t at = first; at < end; at += kChunkElements) {
      const std::size_t count = std::size_t(std::min<uint64_t>(kChunkElements, end - at));
      gen.fill(buf.data(), count);
      FT_RETURN_IF_ERROR(pwrite_all(target.fd, buf.data(), 2 * count, target.offset + 2 * at, *target.path));
      done.fetch_add(2 * count, std::memory_order_relaxed);
    }
    return Status::ok();
  };
  return parallel_fill(items.size(), threads, total, progress, fill_item);
}

Status parallel_fill(std::size_t n_items, int threads, uint64_t total,
                     const std::function<void(uint64_t, uint64_t)>& progress,
                     const std::function<Status(std::size_t, std::atomic<uint64_t>&)>& fill) {
  std::atomic<uint64_t> done{0};
  FirstError error;
  const int n_threads = threads > 0 ? threads : tbb::info::default_concurrency();
  auto run = [&] {
    tbb::task_arena arena(n_threads);
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n_items, 1), [&](const auto& range) {
        for (std::size_t i = range.begin(); i != range.end() && !error.failed(); ++i) {
          if (Status s = fill(i, done); !s) error.set(std::move(s));
        }
      });
    });
  };
  // The workers run off this thread so that progress is reported from it, as the header promises.
  std::future<void> workers = std::async(std::launch::async, run);
  while (workers.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
    if (progress) progress(done.load(std::memory_order_relaxed), total);
  }
  workers.get();
  if (error.failed()) return error.get();
  if (progress) progress(total, total);
  return Status::ok();
}

}  // namespace ft::engine::synthetic

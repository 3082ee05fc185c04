// `freetoken device`: what accelerator this process can use, or why none; with --hold, a process
// that takes GPU memory the way another application would (to see a server give way).
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "commands.h"
#include "ft/engine/cuda_ops.h"
#include "ft/engine/device.h"

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

double free_gib(int index) {
  auto info = engine::query_cuda_device(index);
  return info ? double(info->free_bytes) / double(1ull << 30) : 0.0;
}

// Takes `gib` of GPU memory in 256 MiB steps, a step the GPU refuses tried again every 50 ms (as
// long as `patience` allows: a server giving memory back makes room), holds it for `hold_s`, then
// lets it go. Prints each GiB as it comes.
int hold(int index, double gib, double hold_s, double patience_s) {
  constexpr std::size_t kStep = std::size_t(256) << 20;
  const auto want = std::size_t(gib * double(1ull << 30));
  std::vector<engine::cuda::DeviceBuffer> held;
  std::size_t got = 0;
  const auto t0 = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  double last_print = -1;
  while (got < want) {
    auto b = engine::cuda::DeviceBuffer::allocate(std::min(kStep, want - got));
    if (!b) {
      if (seconds() > patience_s) {
        std::printf("device: held %.2f GiB of %.2f after %.1f s; the GPU has no more (%.2f GiB free)\n",
                    double(got) / double(1ull << 30), gib, seconds(), free_gib(index));
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    got += std::min(kStep, want - got);
    held.push_back(std::move(b).value());
    if (double(got) / double(1ull << 30) >= last_print + 1 || got == want) {
      last_print = double(got) / double(1ull << 30);
      std::printf("device: [%.2f s] holding %.2f GiB, %.2f GiB free\n", seconds(), last_print, free_gib(index));
      std::fflush(stdout);
    }
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(hold_s));
  held.clear();
  std::printf("device: [%.2f s] let go; %.2f GiB free\n", seconds(), free_gib(index));
  return 0;
}

int run_device(const Args& args) {
  if (args.has("hold")) {
    const double gib = args.get_double("hold");
    const double hold_s = args.get_double("seconds");
    if (!(gib > 0) || !(hold_s >= 0)) return usage_error("device", "--hold takes GiB > 0 and --seconds S >= 0");
    if (auto info = engine::query_cuda_device(args.get_int("index")); !info)
      return runtime_error("device", info.status().message());
    return hold(args.get_int("index"), gib, hold_s, args.get_double("patience"));
  }
  auto info = engine::query_cuda_device(args.get_int("index"));
  if (!info) {
    std::printf("cuda: unavailable: %s\n", info.status().message().c_str());
    return args.has("require") ? 1 : 0;
  }
  std::printf("cuda: device %d: %s (sm_%d%d), %.1f GiB total, %.1f GiB free, driver %d, runtime %d\n",
              info->index, info->name.c_str(), info->compute_major, info->compute_minor,
              info->total_bytes / 1073741824.0, info->free_bytes / 1073741824.0,
              info->driver_version, info->runtime_version);
  return 0;
}

}  // namespace

const Command kDeviceCommand = {
    "device",
    "show the CUDA device this process would use, or why there is none",
    "freetoken device [--index N] [--require]\n"
    "freetoken device --hold GiB [--seconds S] [--patience S]   take GPU memory as another application would",
    {{"index", "N", "CUDA device index", "0"},
     {"require", "", "exit 1 when no device is usable", ""},
     {"hold", "GiB", "take this much GPU memory, 256 MiB at a time, then hold it", ""},
     {"seconds", "S", "with --hold: how long to hold it before letting go", "30"},
     {"patience", "S", "with --hold: how long to keep retrying a step the GPU refuses", "10"}},
    0,
    run_device,
};

}  // namespace ft::cli

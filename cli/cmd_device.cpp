// `freetoken device`: what accelerator this process can use, or why none.
#include <cstdio>

#include "commands.h"
#include "ft/engine/device.h"

namespace ft::cli {
namespace {

int run_device(const Args& args) {
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
    "freetoken device [--index N] [--require]",
    {{"index", "N", "CUDA device index", "0"},
     {"require", "", "exit 1 when no device is usable", ""}},
    0,
    run_device,
};

}  // namespace ft::cli

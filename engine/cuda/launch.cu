// launch.h's host side: which devices take programmatic dependent launches, and the measuring aid
// that leaves kernels out.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "launch.h"

namespace ft::engine::cuda {

bool pdl_supported() {
  // Per device: 0 not asked yet, 1 no, 2 yes. FT_CUDA_PDL=0 turns it off (to measure what it
  // brings, or to rule it out when a result looks wrong).
  static std::atomic<int> known[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  int v = known[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    const char* env = std::getenv("FT_CUDA_PDL");
    const bool off = env && std::strcmp(env, "0") == 0;
    v = major >= 9 && !off ? 2 : 1;
    known[dev].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

namespace {

struct LeaveOut {
  std::string name;
  long grid_x = -1;  // any grid
};

struct LaunchAid {
  std::vector<LeaveOut> leave_out;
  bool trace = false;
  bool on() const { return trace || !leave_out.empty(); }
};

const LaunchAid& launch_aid() {
  static const LaunchAid aid = [] {
    LaunchAid a;
    const char* trace = std::getenv("FT_CUDA_TRACE_LAUNCHES");
    a.trace = trace && *trace && std::strcmp(trace, "0") != 0;
    const char* list = std::getenv("FT_CUDA_LEAVE_OUT");
    std::string rest = list ? list : "";
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      std::string item = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      if (item.empty()) continue;
      LeaveOut l;
      if (const std::size_t at = item.find('@'); at != std::string::npos) {
        l.grid_x = std::strtol(item.c_str() + at + 1, nullptr, 10);
        item.resize(at);
      }
      l.name = item;
      a.leave_out.push_back(l);
    }
    return a;
  }();
  return aid;
}

}  // namespace

bool launch_left_out(const void* kernel, dim3 grid, dim3 block) {
  const LaunchAid& aid = launch_aid();
  if (!aid.on()) return false;
  const char* name = nullptr;
  if (cudaFuncGetName(&name, kernel) != cudaSuccess || name == nullptr) name = "?";
  bool out = false;
  for (const LeaveOut& l : aid.leave_out)
    out = out || (std::strstr(name, l.name.c_str()) && (l.grid_x < 0 || l.grid_x == long(grid.x)));
  if (aid.trace)
    std::fprintf(stderr, "launch %s grid %u,%u,%u block %u%s\n", name, grid.x, grid.y, grid.z, block.x,
                 out ? " (left out)" : "");
  return out;
}

}  // namespace ft::engine::cuda

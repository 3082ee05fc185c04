// expert_copy_runs.h: copies of experts into slots, grouped into strided runs.
#include "ft/engine/expert_copy_runs.h"

namespace ft::engine {
namespace {

// Whether b continues a run ending in a whose slots are `pitch` apart (0: the run's second copy
// sets the pitch).
bool continues(const ExpertCopy& a, const ExpertCopy& b, std::size_t& pitch) {
  if (b.dst[0] <= a.dst[0]) return false;
  const std::size_t d = std::size_t(b.dst[0] - a.dst[0]);
  if (pitch != 0 && d != pitch) return false;
  for (int m = 0; m < 3; ++m) {
    if (b.bytes[m] != a.bytes[m] || b.src[m] != a.src[m] + a.bytes[m]) return false;
    if (b.dst[m] != a.dst[m] + d || d < a.bytes[m]) return false;
  }
  pitch = d;
  return true;
}

}  // namespace

std::vector<ExpertCopyRun> expert_copy_runs(std::span<const ExpertCopy> copies) {
  std::vector<ExpertCopyRun> runs;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (!runs.empty()) {
      ExpertCopyRun& r = runs.back();
      if (continues(copies[i - 1], copies[i], r.dst_pitch)) {
        ++r.count;
        continue;
      }
    }
    runs.push_back({i, 1, 0});
  }
  return runs;
}

}  // namespace ft::engine

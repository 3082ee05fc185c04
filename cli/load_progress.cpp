#include "load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Printer {
  Clock::time_point start = Clock::now(), last = start;
  bool tty = ::isatty(STDERR_FILENO) == 1;
  bool drawn = false;

  void operator()(std::uint64_t placed, std::uint64_t total, bool done) {
    const auto now = Clock::now();
    const double secs = std::chrono::duration<double>(now - start).count();
    const double gb = double(placed) / 1e9, rate = secs > 0 ? gb / secs : 0;
    if (done) {
      // A load that took a moment is not worth a line in a script's stderr.
      if (!tty && secs < 2) return;
      std::fprintf(stderr, "%sloaded %.2f GB of weights in %.1f s (%.2f GB/s)\n", tty && drawn ? "\r\033[K" : "", gb,
                   secs, rate);
      return;
    }
    if (now - last < (tty ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000))) return;
    last = now;
    const double left = total > placed && rate > 0 ? double(total - placed) / 1e9 / rate : 0;
    const int pct = total ? int(std::min<std::uint64_t>(100, placed * 100 / total)) : 0;
    std::fprintf(stderr, "%sloading weights: %.2f of %.2f GB (%d%%), %.2f GB/s, about %.0f s left%s",
                 tty ? "\r\033[K" : "", gb, double(total) / 1e9, pct, rate, left, tty ? "" : "\n");
    drawn = true;
  }
};

}  // namespace

std::function<void(std::uint64_t, std::uint64_t, bool)> load_progress_printer() {
  auto p = std::make_shared<Printer>();
  return [p](std::uint64_t placed, std::uint64_t total, bool done) { (*p)(placed, total, done); };
}

}  // namespace ft::cli

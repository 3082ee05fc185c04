// The CPU's share of the uncached experts under `--moe-policy direct:auto`: a hill climb on the
// measured time of decode steps. The best share depends on what no model on the host sees well
// (how fast the GPU's kernels pull host memory while the CPU reads it too, the CPU's rate at a
// layer's few experts, the hit rate of the moment), so it is found by trying: a window of steps
// at the current share, then a step of the share up or down, kept when the steps got faster,
// reversed (and halved, down to a floor) when they did not. It never stops probing, so it follows
// the optimum when the cache warms up or the machine's load changes.
#pragma once

namespace ft::engine {

class ShareTuner {
 public:
  struct Options {
    // Measured best shares on 16-core hosts: 0.65 with an H200, 1 with an H100 whose kernels read
    // host memory at ~14 GB/s (docs/perf-notes.md).
    double start = 0.6;      // the share tried first
    double step = 0.15;      // the first move
    double min_step = 0.05;  // moves never get smaller
    double max_share = 1.0;  // at most this much of the misses on the CPU (1: all of them)
    int window = 6;          // steps timed at each share
    double margin = 0.01;    // a move is kept only when it gains more than this fraction
  };
  ShareTuner() : ShareTuner(Options{}) {}
  explicit ShareTuner(const Options& o);

  double share() const { return current_; }
  // One decode step of `shape` (what makes steps comparable: its tokens) took `seconds` at share().
  // A step of another shape than the window's starts the window again (and its reference).
  void observe(int shape, double seconds);

 private:
  void move_from_reference();

  Options o_;
  double current_, reference_, step_;
  double reference_time_ = -1;  // mean step time at reference_; < 0: not measured for this shape
  int dir_ = 1;
  int shape_ = -1, count_ = 0;
  double sum_ = 0;
};

}  // namespace ft::engine

// direct:auto's hill climb (share_tuner.h) against step times from a known curve: where the GPU's
// part shrinks and the CPU's grows with the share, the step is the slower of the two.
#include "ft/engine/share_tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace ft::test {
namespace {

using engine::ShareTuner;

// A step at share q: the misses split between the GPU (gpu_s for all of them) and the CPU (cpu_s
// for all of them), the slower side sets the pace; noise of +-2%.
struct Machine {
  double gpu_s, cpu_s, fixed_s = 0.003;
  std::mt19937 rng{7};
  double step(double q) {
    std::uniform_real_distribution<double> noise(0.98, 1.02);
    return (fixed_s + std::max((1 - q) * gpu_s, q * cpu_s)) * noise(rng);
  }
  double best() const { return gpu_s / (gpu_s + cpu_s); }
};

double run(ShareTuner& t, Machine& m, int steps, int shape = 1) {
  for (int i = 0; i < steps; ++i) t.observe(shape, m.step(t.share()));
  return t.share();
}

TEST(ShareTuner, ClimbsToTheBalanceOfGpuAndCpuAndStaysNearIt) {
  for (const auto& [gpu_s, cpu_s] : {std::pair{0.020, 0.012}, std::pair{0.010, 0.030}, std::pair{0.015, 0.015}}) {
    Machine m{gpu_s, cpu_s};
    ShareTuner t;
    run(t, m, 400);
    SCOPED_TRACE("optimum " + std::to_string(m.best()));
    // From here on it keeps probing one move (>= 0.05) either side of where it settled.
    double worst = 0;
    for (int i = 0; i < 200; ++i) {
      t.observe(1, m.step(t.share()));
      worst = std::max(worst, std::abs(t.share() - m.best()));
    }
    EXPECT_LT(worst, 0.16);
  }
}

TEST(ShareTuner, FollowsTheOptimumWhenTheMachineChanges) {
  Machine m{0.020, 0.010};  // optimum 0.67
  ShareTuner t;
  run(t, m, 400);
  EXPECT_GT(t.share(), 0.5);
  m.cpu_s = 0.060;  // the CPU got busy: optimum 0.25
  run(t, m, 600);
  EXPECT_LT(t.share(), 0.4);
}

// A GPU that reads host memory slowly (its kernels' in-place reads, one H100 host): every miss on
// the CPU is best, and the climb gets there.
TEST(ShareTuner, GivesTheCpuEveryMissWhenTheGpusReadsAreSlow) {
  Machine slow_reads{0.5, 0.010};  // the balance at 0.98: above the last move below 1
  ShareTuner t;
  double highest = 0;
  for (int i = 0; i < 400; ++i) {
    t.observe(1, slow_reads.step(t.share()));
    highest = std::max(highest, t.share());
  }
  EXPECT_EQ(highest, 1.0);
  EXPECT_GE(t.share(), 0.9);
}

TEST(ShareTuner, StaysWithinItsBoundsAndRestartsAtANewShape) {
  Machine gpu_bound{0.050, 0.001};  // the more on the CPU the better: the bound holds
  ShareTuner::Options o;
  o.max_share = 0.8;
  ShareTuner t(o);
  for (int i = 0; i < 500; ++i) {
    t.observe(1, gpu_bound.step(t.share()));
    ASSERT_LE(t.share(), 0.8);
    ASSERT_GE(t.share(), 0.0);
  }
  EXPECT_GE(t.share(), 0.7);
  // Steps of another shape are not compared with these: the next window re-measures where it is.
  const double before = t.share();
  t.observe(8, 1.0);
  EXPECT_LE(std::abs(t.share() - before), 0.1);
  Machine cpu_bound{0.001, 0.050};  // nothing on the CPU is best
  run(t, cpu_bound, 600, 8);
  EXPECT_LE(t.share(), 0.1);
}

}  // namespace
}  // namespace ft::test

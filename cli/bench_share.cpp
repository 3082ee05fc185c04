// `freetoken bench share`: an offloaded layer's CPU share as the engine runs it, without a GPU. The
// CPU experts (CpuExperts::run, one token) compute k of a layer's bf16 experts, then the calling
// thread spins for a gap (the GPU's dense work between two layers, when the share waits for its
// next input), again and again over distinct experts so the weights stream from DRAM. Timed for
// k = 1 .. --k: the line through t(k) splits a call's time into a fixed cost a layer (the
// workers' wake-up for each parallel loop, the input's preparation) and an expert's rate. With
// FT_CPU_WARM set, the workers are woken at each gap's start (CpuExperts::warm).
#include "bench_share.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "ft/engine/cpu_experts.h"
#include "ft/engine/host_expert_layer.h"
#include "line_fit.h"

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double us_per_call = 0;
  engine::CpuMoePhases phases;  // the timed calls'
};

// Calls of k experts (the next k of the layer, cycling), each followed by `gap_us` of spinning,
// for `seconds`; the mean time of a call, gaps excluded.
Timing time_calls(engine::CpuExperts& cpu, const engine::MoeWeights& w, int k, double gap_us, double seconds) {
  static const bool warm = std::getenv("FT_CPU_WARM") != nullptr;
  const int E = int(w.experts.size()), K = int(w.router_spec.top_k);
  std::vector<float> x(std::size_t(w.hidden)), out(x.size());
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.f, 1.f);
  for (float& v : x) v = n(rng);
  std::vector<int32_t> chosen(std::size_t(K), -1);
  std::vector<float> weights(std::size_t(K), 1.f / float(K));
  int next = 0;
  engine::CpuMoePhases* phases = nullptr;
  const auto call = [&] {
    for (int j = 0; j < K; ++j) chosen[std::size_t(j)] = j < k ? (next + j) % E : -1;
    next = (next + k) % E;
    cpu.run(w, x.data(), 1, std::size_t(K), chosen.data(), weights.data(), out.data(), phases);
  };
  for (int i = 0; i < 8; ++i) call();  // threads up, first touches
  Timing t;
  phases = &t.phases;
  double busy = 0;
  long calls = 0;
  const auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
    const auto c0 = Clock::now();
    call();
    const auto c1 = Clock::now();
    busy += std::chrono::duration<double>(c1 - c0).count();
    ++calls;
    if (warm) cpu.warm(std::chrono::microseconds(long(2 * gap_us) + 100));
    while (std::chrono::duration<double, std::micro>(Clock::now() - c1).count() < gap_us) {
    }
  }
  t.us_per_call = busy / double(std::max(calls, 1L)) * 1e6;
  return t;
}

}  // namespace

int bench_share(const Args& args) {
  const std::string cmd = "bench share";
  const int hidden = args.get_int("hidden"), inter = args.get_int("inter");
  const int max_k = args.has("k") ? args.get_int("k") : 8;
  const double gap_us = args.has("gap-us") ? args.get_double("gap-us") : 50;
  const double seconds = args.has("seconds") ? args.get_double("seconds") : 1;
  const int threads =
      args.has("threads") ? int(args.get_int("threads")) : std::max(1, int(std::thread::hardware_concurrency()) - 1);
  if (hidden < 1 || inter < 1 || max_k < 1 || max_k > 32 || threads < 1 || !(seconds > 0) || gap_us < 0)
    return usage_error(cmd, "--hidden, --inter, --threads and --seconds must be positive, --k 1..32, --gap-us >= 0");
  constexpr int kExperts = 128;  // a Qwen3-30B-A3B layer: more than any last-level cache
  Result<engine::HostExpertLayer> layer = engine::make_host_expert_layer(kExperts, hidden, inter, max_k);
  if (!layer) return runtime_error(cmd, layer.status().message());
  const double expert_bytes = double(layer->w.experts.front().bytes());
  std::printf("bench share: %d CPU threads, %d bf16 experts of %d x %d (%.1f MiB each), one token, a %.0f us gap\n",
              threads, kExperts, hidden, inter, expert_bytes / 1048576.0, gap_us);
  engine::CpuExperts cpu(threads);
  LineFit fit;
  std::string line, phase_line;
  for (int k = 1; k <= max_k; k = k < 4 ? k + 1 : k * 2) {
    const Timing t = time_calls(cpu, layer->w, k, gap_us, seconds);
    char part[64];
    std::snprintf(part, sizeof part, " %d: %.0f us (%.1f GB/s),", k, t.us_per_call,
                  double(k) * expert_bytes / t.us_per_call / 1e3);
    line += part;
    fit.add(k, t.us_per_call);
    const engine::CpuMoePhases& p = t.phases;
    const double n = double(std::max<std::uint64_t>(p.calls, 1)), loops = p.gate_up + p.down;
    std::snprintf(part, sizeof part, " %d: %.0f/%.0f/%.0f/%.0f us (%.0f%%),", k, p.prepare / n * 1e6,
                  p.gate_up / n * 1e6, p.down / n * 1e6, p.finish / n * 1e6,
                  loops > 0 ? 100 * p.busy / (loops * p.threads) : 0.0);
    phase_line += part;
  }
  line.pop_back();
  phase_line.pop_back();
  const double slope = fit.slope(), fixed = fit.intercept();
  std::printf("  a call by its experts:%s\n", line.c_str());
  std::printf("  its phases (before the loops / gate-up / down / after; threads busy in the loops):%s\n",
              phase_line.c_str());
  std::printf("  fit: %.0f us a call + %.0f us an expert (%.1f GB/s)\n", fixed, slope,
              slope > 0 ? expert_bytes / slope / 1e3 : 0.0);
  return 0;
}

}  // namespace ft::cli

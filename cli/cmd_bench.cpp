// `freetoken bench <what>`: micro-benchmarks that print figures for docs/perf-notes.md. Each
// benchmark is one entry of kBenchmarks below (dispatch on the first positional argument); flags
// are shared by all of them, and each says in its help which benchmark reads it.
//
//   bench expert   the CPU MoE expert kernel (engine/expert_kernels.h) streaming many experts from
//                  DRAM, next to this machine's memcpy and read bandwidth at the same thread count.
//   bench restore  restoring a Qwen3.5-MoE-35B-A3B-sized checkpoint from the on-disk checkpoint
//                  store, next to the disk's read bandwidth and the recompute time (bench_restore.cpp).
//   bench decode   a model's decode steps (batch B) against the bandwidth bound (bench_model.cpp).
//   bench prefill  a model's prefill of a long prompt, tok/s and TFLOP/s (bench_model.cpp).
//   bench load     `serve` under many sessions of replayed agent traffic, optionally with its
//                  engine killed every few seconds (bench_load.cpp).
//   bench agentic  replayed agent turns' decode speed beside the same prompts sent as new
//                  conversations (bench_agentic.cpp).
#include <sys/resource.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_agentic.h"
#include "bench_load.h"
#include "bench_model.h"
#include "bench_restore.h"
#include "bench_share.h"
#include "commands.h"
#include "data_dirs.h"
#include "ft/engine/cpu_experts.h"
#include "ft/engine/device.h"
#include "ft/engine/expert_kernels.h"
#include "ft/engine/offload_bandwidth.h"

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of this process (all threads), seconds. cpu / wall / threads well below 1 means the
// threads were not running: a contended machine, whose figures are not the hardware's.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Page-aligned, uninitialised heap memory (touch it before timing anything).
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using AlignedBuffer = std::unique_ptr<T[], FreeDeleter>;

template <typename T>
AlignedBuffer<T> alloc_aligned(std::size_t count) {
  constexpr std::size_t kAlign = 4096;
  const std::size_t bytes = (count * sizeof(T) + kAlign - 1) / kAlign * kAlign;
  return AlignedBuffer<T>(static_cast<T*>(std::aligned_alloc(kAlign, std::max(bytes, kAlign))));
}

// splitmix64: cheap, decent, seedable per chunk so parallel fills are deterministic.
std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Runs fn(begin, end) over [0, n) split into `parts` equal contiguous pieces, one per thread of the
// current arena (static partitioning: each thread streams its own region).
template <typename Fn>
void split_static(std::size_t n, int parts, const Fn& fn) {
  tbb::parallel_for(
      tbb::blocked_range<int>(0, parts, 1),
      [&](const tbb::blocked_range<int>& r) {
        for (int p = r.begin(); p != r.end(); ++p) fn(n * p / parts, n * (p + 1) / parts);
      },
      tbb::static_partitioner());
}

struct Bandwidth {
  double copy_gbs = 0;  // bytes copied per second (each byte is read once and written once)
  double read_gbs = 0;  // bytes read per second by a plain summing loop
  double copy_busy = 0, read_busy = 0;  // CPU seconds per wall second while measuring
};

// Multi-threaded memcpy of `bytes` (and a read-only pass over the source) in `arena`; each figure
// is the mean over repetitions after one warm-up, for at least `min_seconds` and 3 repetitions.
Bandwidth measure_bandwidth(tbb::task_arena& arena, int threads, std::size_t bytes, double min_seconds) {
  const std::size_t words = bytes / sizeof(std::uint64_t);
  auto src = alloc_aligned<std::uint64_t>(words), dst = alloc_aligned<std::uint64_t>(words);
  if (!src || !dst) return {};
  Bandwidth bw;
  arena.execute([&] {
    split_static(words, threads, [&](std::size_t b, std::size_t e) {  // first touch, per thread
      std::uint64_t s = b;
      for (std::size_t i = b; i < e; ++i) src[i] = splitmix64(s);
      std::memset(dst.get() + b, 0, (e - b) * sizeof(std::uint64_t));
    });
    auto copy = [&] {
      split_static(words, threads, [&](std::size_t b, std::size_t e) {
        std::memcpy(dst.get() + b, src.get() + b, (e - b) * sizeof(std::uint64_t));
      });
    };
    std::atomic<std::uint64_t> sink{0};
    auto read = [&] {
      split_static(words, threads, [&](std::size_t b, std::size_t e) {
        std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        std::size_t i = b;
        for (; i + 4 <= e; i += 4) {
          a0 += src[i];
          a1 += src[i + 1];
          a2 += src[i + 2];
          a3 += src[i + 3];
        }
        for (; i < e; ++i) a0 += src[i];
        sink.fetch_add(a0 + a1 + a2 + a3, std::memory_order_relaxed);
      });
    };
    auto time_it = [&](auto&& op, double& busy) {
      op();  // warm-up
      int reps = 0;
      const double cpu0 = cpu_seconds();
      const auto t0 = Clock::now();
      while (reps < 3 || seconds_since(t0) < min_seconds) {
        op();
        ++reps;
      }
      const double wall = seconds_since(t0);
      busy = (cpu_seconds() - cpu0) / wall;
      return double(reps) * double(words * sizeof(std::uint64_t)) / wall / 1e9;
    };
    bw.copy_gbs = time_it(copy, bw.copy_busy);
    bw.read_gbs = time_it(read, bw.read_busy);
  });
  return bw;
}

// ---- bench expert -------------------------------------------------------------------------------

int bench_expert(const Args& args) {
  const std::string cmd = "bench expert";
  const int hidden = args.get_int("hidden"), inter = args.get_int("inter");
  const int tokens = args.has("tokens") ? args.get_int("tokens") : 1;  // --tokens' default is per benchmark
  const int threads = args.has("threads") ? args.get_int("threads") : tbb::info::default_concurrency();
  const double seconds = args.has("seconds") ? args.get_double("seconds") : 2;  // --seconds' default is per benchmark
  const int copy_mib = args.get_int("copy-mib");
  int experts = args.get_int("experts");
  if (hidden < 1 || inter < 1 || tokens < 1 || threads < 1 || experts < 0 || copy_mib < 1 || !(seconds > 0)) {
    return usage_error(cmd, "--hidden, --inter, --tokens, --threads, --copy-mib and --seconds must be positive");
  }
  engine::CpuIsa isa = engine::best_cpu_isa();
  if (const std::string name = args.get("isa"); name != "auto") {
    if (!engine::parse_cpu_isa(name.c_str(), &isa)) {
      return usage_error(cmd, "--isa must be auto, scalar, avx2, avx512 or avx512bf16, got '" + name + "'");
    }
    if (!engine::cpu_isa_supported(isa)) return runtime_error(cmd, "this CPU cannot run the " + name + " path");
  }

  const std::size_t H = std::size_t(hidden), I = std::size_t(inter), T = std::size_t(tokens);
  const std::size_t expert_elems = 3 * H * I, expert_bytes = expert_elems * sizeof(engine::bf16_t);
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (experts == 0) {  // auto: at least 64 experts and 4x the last-level cache, so reads hit DRAM
    experts = int(std::max<std::size_t>(64, (4 * std::size_t(std::max(l3, 0L)) + expert_bytes - 1) / expert_bytes));
  }
  const std::size_t working_set = expert_bytes * std::size_t(experts);

  std::printf("bench expert: path %s, %d threads, hidden %zu, inter %zu, tokens %zu\n",
              engine::cpu_isa_name(isa), threads, H, I, T);
  std::printf("  cpu          %s; last-level cache %.0f MiB\n",
              engine::cpu_isa_supported(engine::CpuIsa::kAvx512Bf16) ? "avx512bf16"
              : engine::cpu_isa_supported(engine::CpuIsa::kAvx512)   ? "avx512 (no bf16)"
              : engine::cpu_isa_supported(engine::CpuIsa::kAvx2)     ? "avx2"
                                                                     : "baseline x86-64",
              double(std::max(l3, 0L)) / 1048576.0);

  tbb::task_arena arena(threads);

  // 1) The machine's bandwidth at this thread count: the ceiling for a weight-streaming kernel.
  const Bandwidth bw = measure_bandwidth(arena, threads, std::size_t(copy_mib) << 20, std::min(seconds, 1.0));
  if (bw.copy_gbs == 0) return runtime_error(cmd, "cannot allocate 2 x " + std::to_string(copy_mib) + " MiB");
  std::printf("  memcpy       %d MiB: %.2f GB/s copied (%.2f GB/s read+write); cpu busy %.2f of %d\n",
              copy_mib, bw.copy_gbs, 2 * bw.copy_gbs, bw.copy_busy, threads);
  std::printf("  read         %d MiB: %.2f GB/s (plain summing loop); cpu busy %.2f of %d\n", copy_mib,
              bw.read_gbs, bw.read_busy, threads);

  // 2) The kernel over `experts` distinct experts, cycling, so each call streams from DRAM.
  auto weights = alloc_aligned<engine::bf16_t>(expert_elems * std::size_t(experts));
  if (!weights) return runtime_error(cmd, "cannot allocate " + std::to_string(working_set >> 20) + " MiB of experts");
  arena.execute([&] {
    split_static(expert_elems * std::size_t(experts), threads, [&](std::size_t b, std::size_t e) {
      std::uint64_t s = b * 7919;
      for (std::size_t i = b; i < e; ++i) {  // |w| in [2^-9, 2^-5): no denormals, no NaN
        const std::uint64_t r = splitmix64(s);
        weights[i] = engine::bf16_t(((r >> 16) & 0x8000u) | ((118 + (r & 3)) << 7) | ((r >> 8) & 0x7f));
      }
    });
  });
  std::vector<engine::ExpertWeights> ew(static_cast<std::size_t>(experts));
  for (std::size_t e = 0; e < ew.size(); ++e) {
    const engine::bf16_t* base = weights.get() + e * expert_elems;
    ew[e] = {base, base + H * I, base + 2 * H * I, H, I};
  }
  std::vector<float> x(T * H), out(T * H, 0.0f), rw(T, 0.125f);
  std::uint64_t s = 42;
  for (float& v : x) v = float(int(splitmix64(s) % 2001) - 1000) / 1000.0f;
  engine::ExpertScratch scratch;

  std::size_t calls = 0;
  double elapsed = 0, busy = 0;
  arena.execute([&] {
    for (const auto& w : ew) engine::expert_swiglu(w, x.data(), rw.data(), out.data(), T, isa, &scratch);
    const double cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    do {
      engine::expert_swiglu(ew[calls % ew.size()], x.data(), rw.data(), out.data(), T, isa, &scratch);
      ++calls;
    } while ((elapsed = seconds_since(t0)) < seconds);
    busy = (cpu_seconds() - cpu0) / elapsed;
  });
  const double gbs = double(calls) * double(expert_bytes) / elapsed / 1e9;
  const double gflops = double(calls) * 6.0 * double(H * I * T) / elapsed / 1e9;
  std::printf("  experts      %d x %.2f MB = %.0f MB working set (%.1fx the last-level cache)\n", experts,
              expert_bytes / 1e6, working_set / 1e6, l3 > 0 ? double(working_set) / double(l3) : 0.0);
  std::printf("  kernel       %zu calls in %.2f s: %.1f us/call, %.2f GB/s weights read, %.1f GFLOP/s; cpu busy %.2f of %d\n",
              calls, elapsed, elapsed / double(calls) * 1e6, gbs, gflops, busy, threads);
  std::printf("  ratio        kernel/memcpy %.2f, kernel/read %.2f\n", gbs / bw.copy_gbs, gbs / bw.read_gbs);
  std::printf("  check        out[0] = %g\n", double(out[0]));  // keeps the work observable
  if (std::min({busy, bw.copy_busy, bw.read_busy}) < 0.8 * threads) {
    std::printf("  warning      threads were busy < 80%% of the time: the machine is shared or oversubscribed,\n"
                "               so these figures understate the hardware (compare the ratio, not GB/s)\n");
  }
  return 0;
}

// ---- bench bw -----------------------------------------------------------------------------------

// What expert offload's split planner starts from on this machine: pinned copies of experts to the
// GPU, the CPU expert kernels over experts in host RAM, both at once; written where an offloaded
// model reads it (<data dir>/offload-bandwidth.json).
int bench_bw(const Args& args) {
  const std::string cmd = "bench bw";
  const int hidden = args.get_int("hidden"), inter = args.get_int("inter");
  const double seconds = args.has("seconds") ? args.get_double("seconds") : 2;
  // The engine's CPU experts take every core but the one issuing the GPU's work.
  const int threads =
      args.has("threads") ? int(args.get_int("threads")) : std::max(1, int(std::thread::hardware_concurrency()) - 1);
  if (hidden < 1 || inter < 1 || threads < 1 || !(seconds > 0))
    return usage_error(cmd, "--hidden, --inter, --threads and --seconds must be positive");
  auto gpu = engine::query_cuda_device();
  if (!gpu) return runtime_error(cmd, gpu.status().message());
  // 128 experts: a Qwen3-30B-A3B layer by default, 1.1 GiB, more than the last-level cache.
  auto layer = engine::SyntheticExpertLayer::create(128, hidden, inter, 8);
  if (!layer) return runtime_error(cmd, layer.status().message());
  engine::CpuExperts cpu(threads);
  auto c = engine::measure_offload_bandwidth(layer->weights(), cpu, std::min(seconds, 5.0));
  if (!c) return runtime_error(cmd, c.status().message());
  std::printf("bench bw: %s, %d CPU threads (%s), experts of %d x %d in bf16 (%.1f MiB)\n", gpu->name.c_str(), threads,
              engine::cpu_isa_name(cpu.isa()), hidden, inter,
              double(layer->weights().experts.front().bytes()) / 1048576.0);
  std::printf("  alone        PCIe (pinned host -> GPU) %.1f GB/s; CPU expert kernels %.1f GB/s\n", c->pcie_gbps,
              c->cpu_gbps);
  std::printf("  at once      PCIe %.1f + CPU %.1f = %.1f GB/s (%.2fx the faster alone)\n", c->pcie_shared_gbps,
              c->cpu_shared_gbps, c->pcie_shared_gbps + c->cpu_shared_gbps,
              (c->pcie_shared_gbps + c->cpu_shared_gbps) / std::max(c->pcie_gbps, c->cpu_gbps));
  const std::filesystem::path file = freetoken_data_dir() / "offload-bandwidth.json";
  if (Status st = engine::save_offload_costs(file, *c, gpu->name, threads); !st)
    return runtime_error(cmd, st.message());
  std::printf(
      "  saved        %s (read by models with experts in host RAM at %d threads; --recalibrate measures "
      "again)\n",
      file.string().c_str(), threads);
  return 0;
}

// ---- Dispatch ---------------------------------------------------------------------------------

struct Benchmark {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);
};

const Benchmark kBenchmarks[] = {
    {"expert", "CPU MoE expert kernel vs memcpy bandwidth", bench_expert},
    {"restore", "checkpoint restore from disk vs disk bandwidth and recompute", bench_restore},
    {"decode", "a model's decode steps vs the bandwidth bound", bench_decode},
    {"prefill", "a model's prefill of a long prompt", bench_prefill},
    {"gemm", "the CPU backend's bf16 linear on each kernel path, TFLOP/s", bench_gemm},
    {"bw", "expert offload's PCIe and CPU expert bandwidth, alone and at once (cached for the engine)", bench_bw},
    {"share", "an offloaded layer's CPU share between gaps: a fixed cost a call and an expert's rate", bench_share},
    {"load", "serve under concurrent replayed agent sessions, optionally with its engine killed (chaos)", bench_load},
    {"agentic", "replayed agent turns' decode speed vs the same prompts as new conversations", bench_agentic},
};

int run_bench(const Args& args) {
  std::string names;
  for (const Benchmark& b : kBenchmarks) names += std::string(names.empty() ? "" : ", ") + b.name;
  if (args.positional().empty()) return usage_error("bench", "which benchmark? one of: " + names);
  // Only bench load and bench agentic start a server, so only they take flags for one after "--".
  if (!args.pass_through().empty() && args.positional()[0] != "load" && args.positional()[0] != "agentic")
    return usage_error("bench", "flags after -- are for the server bench load or bench agentic starts");
  for (const Benchmark& b : kBenchmarks) {
    if (args.positional()[0] == b.name) return b.run(args);
  }
  return usage_error("bench", "unknown benchmark '" + args.positional()[0] + "'; one of: " + names);
}

}  // namespace

const Command kBenchCommand = {
    "bench",
    "micro-benchmarks: bench expert (CPU MoE expert kernel vs memcpy bandwidth), bench restore "
    "(checkpoint restore from disk vs disk bandwidth and recompute), bench decode|prefill (a model vs its bound), "
    "bench bw (expert offload's PCIe and CPU bandwidth, cached for the engine), bench share (an offloaded layer's CPU "
    "share between gaps: a fixed cost a call, an expert's rate), bench load (serve under replayed "
    "agent sessions, with chaos), bench agentic (replayed agent turns' decode speed vs fresh prompts), bench gemm "
    "(the CPU backend's bf16 linear on each kernel path, TFLOP/s)",
    "freetoken bench expert [--hidden 2048] [--inter 768] [--tokens 1] [--threads N] [--seconds 2]\n"
    "       freetoken bench restore [--tokens 30000] [--dir D] [--keep] [--prefill-tok-s 2700,11900]\n"
    "       freetoken bench decode --model DIR [--batch 1] [--prompt 128] [--steps 32] [--threads N]\n"
    "       freetoken bench bw [--hidden 2048] [--inter 768] [--threads N] [--seconds 2]\n"
    "       freetoken bench share [--k 8] [--gap-us 50] [--hidden 2048] [--inter 768] [--threads N] [--seconds 1]\n"
    "       freetoken bench prefill --model DIR [--prompt 4096] [--chunk N] [--threads N] [--snapshot-store DIR]\n"
    "       freetoken bench load [--sessions 64] [--seconds 600] [--model DIR] [-- SERVE FLAGS]\n"
    "       freetoken bench agentic [--model DIR] [--max-tokens 64] [--conversations A,B] [-- SERVE FLAGS]\n"
    "       freetoken bench gemm [--tokens 4096] [--rows 4096] [--cols 2048] [--isa auto] [--threads N]",
    {{"hidden", "N", "expert, bw, share: hidden size (model dim)", "2048"},
     {"inter", "N", "expert, bw, share: moe_intermediate_size", "768"},
     {"tokens", "N",
      "expert: tokens routed to each expert per call [1]; restore: tokens in the checkpoint [30000]; gemm: rows of x "
      "[4096]",
      ""},
     {"experts", "N", "expert: distinct experts cycled (0: max(64, 4x last-level cache))", "0"},
     {"k", "N", "share: the most experts a call computes (timed at 1, 2, 3, 4, 8, ... up to N) [8]", ""},
     {"gap-us", "US", "share: microseconds the caller spins between two calls (the GPU's part of a layer) [50]", ""},
     {"isa", "NAME",
      "expert: kernel path: auto, scalar, avx2, avx512, avx512bf16; gemm: one path (avx512, avx512bf16, amx) or auto "
      "(each)",
      "auto"},
     {"threads", "N", "worker threads [default: all cores]", ""},
     {"seconds", "S",
      "expert, bw: time per measurement [2]; share: per expert count [1]; load: how long sessions start requests [600]",
      ""},
     {"copy-mib", "N", "memcpy/read buffer size, MiB", "1024"},
     {"dir", "D",
      "restore, load, agentic: where the work directory goes (a fresh subdirectory, removed after) [restore: the "
      "temp dir unless tmpfs; load, agentic: the temp dir]",
      ""},
     {"keep", "",
      "restore, load, agentic: keep the work directory (restore: store + read file; load, agentic: logs + store)", ""},
     {"model", "DIR", "decode, prefill: the checkpoint directory; load, agentic: the model serve runs [the demo model]",
      ""},
     {"device", "DEV", "decode, prefill: where to run (auto, cpu, cuda)", "auto"},
     {"batch", "N", "decode: sequences decoded together [1]", ""},
     {"prompt", "N", "decode: prompt tokens per sequence before timing [128]; prefill: prompt length [4096]", ""},
     {"steps", "N", "decode: timed decode steps [32]", ""},
     {"chunk", "N",
      "prefill, decode: most tokens per forward pass of a prompt, cut in equal passes as the engine does [the "
      "engine's: 2048, or for a MoE on the GPU as many as its workspace holds]",
      ""},
     {"snapshot-store", "DIR",
      "prefill: also time the prompt with a checkpoint saved at every chunk boundary into a store in DIR (as the "
      "engine saves one)",
      ""},
     {"rows", "N", "gemm: weight rows [4096]", ""},
     {"cols", "N", "gemm: weight columns [2048]", ""},
     {"read-gb", "GB", "decode, prefill: mapped expert bytes read to measure the host read bandwidth", "8"},
     {"kv-budget", "GB",
      "decode, prefill: KV page memory (default: a quarter of RAM; on a GPU budget with experts in host RAM, what "
      "the run's sequences reach)",
      ""},
     {"gpu-mem", "GiB", "decode, prefill: GPU memory the model may use (less than the model: experts in host RAM)", ""},
     {"moe-policy", "P",
      "decode, prefill: how cache misses are served with experts in host RAM (adaptive, fetch, cpu, ratio:Q, "
      "direct[:Q], direct:auto)",
      ""},
     {"expert-slots", "N", "decode, prefill: experts in host RAM with exactly N GPU slots", ""},
     {"feed", "HOW",
      "decode: the next tokens: greedy (random weights loop: repeated routing) or random (routing near uniform)", ""},
     {"recalibrate", "", "decode, prefill: with experts in host RAM, measure PCIe and CPU bandwidth again", ""},
     {"policies", "LIST", "decode: with experts in host RAM, time each policy in turn, e.g. adaptive,fetch,cpu", ""},
     {"reference", "", "decode, prefill: the fp32 reference ops instead of the runtime kernels", ""},
     {"deterministic", "", "decode, prefill: one kernel family for every call size (see freetoken engine --help)", ""},
     {"cpu-activations", "HOW", "decode, prefill: bf16x2 or bf16 (see freetoken engine --help)", ""},
     {"sessions", "N", "load: concurrent sessions [64]", ""},
     {"variants", "N", "load: distinct session variants; session s is variant s % N [--sessions]", ""},
     {"max-tokens", "N", "load: output tokens per request [16]; agentic: [64]", ""},
     {"chaos-kill-every", "S", "load: SIGKILL the engine every S seconds (serve restarts it) [0: never]", ""},
     {"check-outputs", "", "load: compare every answer with a no-cache server's, computed first (one at a time)", ""},
     {"reference-concurrency", "N", "load: requests at a time in the no-cache reference pass [1]", ""},
     {"traffic", "DIR", "load, agentic: the captured traffic [tests/fixtures/traffic next to this build]", ""},
     {"conversations", "A,B", "load, agentic: only these traffic directories [all]", ""},
     {"store", "DIR", "load: serve's checkpoint store, verified after [a fresh one in the work directory]", ""},
     {"url", "URL", "load, agentic: a running server (http://HOST:PORT) instead of starting serve", ""},
     {"serve-pid", "PID", "load: with --url, that serve's pid (RSS, chaos)", ""},
     {"reference-url", "URL", "load: with --url and --check-outputs, a server run with --no-prefix-cache", ""},
     {"progress-every", "S", "load: seconds between progress lines on stderr [30]", ""},
     {"warm-up", "S",
      "load: RSS is judged from S seconds on, once caches have filled (the KV high-water, the checkpoint RAM tier) "
      "[20% of --seconds]",
      ""},
     {"json", "", "load, agentic: the report as JSON", ""},
     {"prefill-tok-s", "LIST",
      "restore: prefill rates to compare with, tokens/s, comma-separated (llama.cpp, Qwen3-30B-A3B shape on the H200 "
      "box: experts on CPU, all on GPU)",
      "2700,11900"}},
    1,
    run_bench,
    /*pass_through=*/true,
};

}  // namespace ft::cli

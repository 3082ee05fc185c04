// `freetoken bench decode|prefill --model DIR`: a whole model's forward passes on the CPU runtime,
// with the bound they are measured against computed in the same run.
//
// The bound is bandwidth: a decode step must read every dense weight once, every routed expert the
// step's tokens chose once (counted from the routing the step really took), the KV of every
// sequence and every linear-attention state; divided by the host's read bandwidth measured over
// the model's own mapped weights with the same threads, that is the fastest a step can be.
// Prefill is compute-bound as well, so it also prints the arithmetic rate it reached.
#include "bench_model.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ft/engine/checkpoint.h"
#include "ft/engine/device.h"
#include "ft/engine/model.h"
#include "ft/engine/scheduler.h"
#include "ft/engine/state_checkpoint.h"
#include "ft/store/tiered_store.h"
#include "line_fit.h"
#include "model_flags.h"
#include "model_locator.h"

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// kB of anonymous (not file-backed) resident memory: what the process holds beyond the mapped weights.
long rss_anon_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  }
  return -1;
}

// Where the bytes of a forward pass come from, by kind (see the file comment).
struct ModelBytes {
  double dense = 0;       // every weight but the routed experts and the embedding table
  double expert = 0;      // one routed expert of one layer
  double routed_all = 0;  // every routed expert
  // Values (not bytes: a GGUF block dtype stores 4.5 bits of one) of the same, for the flop counts.
  double dense_params = 0, expert_params = 0;
  double kv_per_token = 0;      // KV bytes one position holds, all attention layers
  double linear_state = 0;      // one sequence's linear-attention states (read and written each token)
  std::vector<const std::byte*> expert_data;  // the routed experts' tensors, to measure bandwidth over
  std::vector<std::size_t> expert_sizes;
};

ModelBytes model_bytes(const engine::Checkpoint& ckpt, const engine::Model& model) {
  ModelBytes b;
  const engine::ModelConfig& c = model.config();
  for (const std::string& name : ckpt.tensor_names()) {
    auto t = ckpt.tensor(name);
    if (!t) continue;
    // Routed experts under any block name: mlp.experts (Qwen, DeepSeek), block_sparse_moe.experts
    // (Mixtral, MiniMax-M2), feed_forward.experts (Llama 4), as the placement plan counts them.
    if (name.find(".experts.") != std::string::npos && name.find("shared_expert") == std::string::npos) {
      b.routed_all += double(t->nbytes);
      b.expert_params += double(t->numel());
      b.expert_data.push_back(t->data);
      b.expert_sizes.push_back(t->nbytes);
    } else if (name.find("embed_tokens.weight") == std::string::npos) {
      b.dense += double(t->nbytes);
      b.dense_params += double(t->numel());
    }
  }
  const std::size_t moe_layers = [&] {
    std::size_t n = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) n += c.is_moe_layer(l) ? 1 : 0;
    return n;
  }();
  if (moe_layers && c.num_experts) {
    b.expert = b.routed_all / double(moe_layers * std::size_t(c.num_experts));
    b.expert_params /= double(moe_layers * std::size_t(c.num_experts));
  }
  if (const auto kv = model.kv_layout()) b.kv_per_token = double(kv->token_bytes());
  const double per_linear = 4.0 * double(c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim);
  b.linear_state = 2.0 * per_linear * double(c.count_layers(engine::LayerKind::kLinearAttention));
  return b;
}

// GB/s of a plain multi-threaded read over the routed experts' mapped bytes (at most `limit`
// bytes, the best of two passes): the host read bandwidth a decode step gets for its weights.
double read_bandwidth(const ModelBytes& b, int threads, std::size_t limit) {
  struct Range {
    const std::uint64_t* p;
    std::size_t n;
  };
  std::vector<Range> ranges;
  std::size_t total = 0;
  for (std::size_t i = 0; i < b.expert_data.size() && total < limit; ++i) {
    const std::size_t n = std::min(b.expert_sizes[i], limit - total) / 8;
    ranges.push_back({reinterpret_cast<const std::uint64_t*>(b.expert_data[i]), n});
    total += n * 8;
  }
  std::atomic<std::uint64_t> sink{0};
  tbb::task_arena arena(threads);
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    arena.execute([&] {
      tbb::parallel_for(std::size_t(0), ranges.size(), [&](std::size_t i) {
        const Range r = ranges[i];
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, r.n, 1 << 16), [&](const tbb::blocked_range<std::size_t>& rg) {
          std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
          std::size_t j = rg.begin();
          for (; j + 4 <= rg.end(); j += 4) {
            a0 += r.p[j];
            a1 += r.p[j + 1];
            a2 += r.p[j + 2];
            a3 += r.p[j + 3];
          }
          for (; j < rg.end(); ++j) a0 += r.p[j];
          sink.fetch_add(a0 ^ a1 ^ a2 ^ a3, std::memory_order_relaxed);
        });
      });
    });
    if (pass > 0) best = std::max(best, double(total) / seconds_since(t0) / 1e9);  // pass 0 faults pages in
  }
  return best;
}

// Distinct experts per MoE call, summed over the calls of a trace.
double distinct_experts(const engine::RoutingTrace& trace) {
  double n = 0;
  for (const auto& call : trace.calls) n += double(std::set<int32_t>(call.begin(), call.end()).size());
  return n;
}

// How a prefill's tokens spread over the experts, per MoE call (a layer's chunk): how many experts
// the call chose and the rows the busiest, the median and the least busy of them got. A skewed
// spread is what a trained router avoids and random weights do not: the GPU's grouping pads each
// expert's rows to whole slots, so its GEMMs' work depends on it.
void print_routing_spread(const engine::RoutingTrace& trace) {
  if (trace.calls.empty()) return;
  double used = 0, max_rows = 0, median = 0, min_rows = 0;
  for (const auto& call : trace.calls) {
    std::map<int32_t, std::size_t> per;
    for (const int32_t e : call) ++per[e];
    std::vector<std::size_t> counts;
    for (const auto& [e, n] : per) counts.push_back(n);
    std::sort(counts.rbegin(), counts.rend());
    used += double(counts.size());
    max_rows += double(counts.front());
    median += double(counts[counts.size() / 2]);
    min_rows += double(counts.back());
  }
  const double calls = double(trace.calls.size());
  std::printf("  routing      per MoE call: %.0f experts chosen, rows per expert max %.0f / median %.0f / min %.0f\n",
              used / calls, max_rows / calls, median / calls, min_rows / calls);
}

// Tokens per forward pass of a `prompt`-token prompt as the engine's scheduler cuts it: at most
// --chunk, else the engine's pass size; in equal passes.
int pass_chunk(const Args& args, const engine::Model& m, int prompt) {
  const int most = args.has("chunk") ? int(args.get_int("chunk")) : engine::prefill_pass_rows(m, 0);
  if (most < 1 || prompt < 1) return most;
  return int(engine::equal_pass(std::size_t(prompt), std::size_t(most)));
}

std::vector<int32_t> random_tokens(std::size_t n, int64_t vocab, std::uint64_t seed) {
  std::vector<int32_t> out(n);
  for (auto& t : out) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    t = int32_t((seed >> 33) % std::uint64_t(vocab));
  }
  return out;
}

// Where the timed passes spent their time, by op.
void print_profile(const engine::OpProfile& p, double wall) {
  using engine::OpProfile;
  std::printf("  ops          ");
  double sum = 0;
  for (int k = 0; k < OpProfile::kMoeRoute; ++k) {  // the ops; the MoE phases after them are within kMoe
    if (p.calls[k] == 0) continue;
    sum += p.seconds[k];
    std::printf("%s %.0f%% (%.1f ms) ", OpProfile::name(OpProfile::Kind(k)), 100 * p.seconds[k] / wall,
                1e3 * p.seconds[k]);
  }
  std::printf("other %.0f%%", 100 * (wall - sum) / wall);
  if (p.calls[OpProfile::kMoeExperts] > 0) {
    std::printf("; moe = route %.0f%% + experts %.0f%% + combine %.0f%%", 100 * p.seconds[OpProfile::kMoeRoute] / wall,
                100 * p.seconds[OpProfile::kMoeExperts] / wall, 100 * p.seconds[OpProfile::kMoeCombine] / wall);
    if (p.calls[OpProfile::kMoeGemms] > 0)
      std::printf(" (of the experts, batched GEMMs %.0f%%: %.1f ms)", 100 * p.seconds[OpProfile::kMoeGemms] / wall,
                  1e3 * p.seconds[OpProfile::kMoeGemms]);
  }
  std::printf("\n");
}

// Whether the host or the GPU sets the pace: the host issues a pass's work ahead of the GPU,
// so a pass that takes little longer than its issue is host-bound (kernel launches, uploads).
void print_issue_time(const engine::OpProfile& p) {
  if (p.passes == 0) return;
  std::printf("  host         issues a pass's work in %.2f ms of its %.2f ms (%.0f%%; near 100%%: host-bound)\n",
              p.issue_seconds / double(p.passes) * 1e3, p.pass_seconds / double(p.passes) * 1e3,
              100 * p.issue_seconds / p.pass_seconds);
  if (p.syncs > 0) {
    std::printf("  syncs        %.0f waits a pass for the GPU's results, %.2f ms of the host's time in them\n",
                double(p.syncs) / double(p.passes), p.sync_seconds / double(p.passes) * 1e3);
  }
  if (p.gemm_calls == 0) return;
  std::printf(
      "  gemm calls   %.0f cuBLAS calls a pass, %.2f ms of the host's time inside them; %llu of %llu calls had a "
      "shape not called before\n",
      double(p.gemm_calls) / double(p.passes), p.gemm_host_seconds / double(p.passes) * 1e3,
      static_cast<unsigned long long>(p.gemm_new_shapes), static_cast<unsigned long long>(p.gemm_calls));
}

struct Loaded {
  std::unique_ptr<engine::Model> model;
  std::shared_ptr<const engine::Checkpoint> ckpt;  // the model's own
  ModelBytes bytes;
  double bandwidth = 0;
  // Experts in host RAM: pinned host -> GPU copies, a kernel's reads of pinned host memory in place,
  // and the host's read rate over the mapped experts.
  double h2d = 0, mapped_read = 0, host_read = 0;
};

// `context_tokens`: load_model_from_flags's (the positions the run's sequences hold together).
Result<Loaded> load(const Args& args, const std::string& cmd, int64_t context_tokens = 0) {
  // On the GPU the bound is a device copy's bandwidth, probed before the model and its KV pool
  // take the memory.
  FT_ASSIGN_OR_RETURN(engine::LoadOptions options, load_options_from_flags(args));
  constexpr std::size_t kProbe = std::size_t(2) << 30;
  double device_bandwidth = 0, h2d = 0, mapped_read = 0;
  if (options.backend == engine::BackendKind::kCuda) {
    FT_ASSIGN_OR_RETURN(device_bandwidth, engine::measure_device_copy_gbps(kProbe));
    FT_ASSIGN_OR_RETURN(h2d, engine::measure_host_to_device_gbps(kProbe / 2));
    FT_ASSIGN_OR_RETURN(mapped_read, engine::measure_mapped_read_gbps(kProbe / 8));
  }
  const long anon0 = rss_anon_kb();
  const auto t0 = Clock::now();
  std::shared_ptr<const engine::Checkpoint> ckpt;
  FT_ASSIGN_OR_RETURN(auto model, load_model_from_flags(args, &ckpt, context_tokens));
  const double load_s = seconds_since(t0);
  Loaded l{std::move(model), std::move(ckpt), {}, 0, 0, 0, 0};
  l.bytes = model_bytes(*l.ckpt, *l.model);
  const engine::ModelConfig& c = l.model->config();
  std::printf("%s: %s, %lld layers, %s backend, %d threads\n", cmd.c_str(), c.model_type.c_str(),
              (long long)c.num_hidden_layers, engine::backend_name(l.model->backend_kind()), l.model->threads());
  std::printf(
      "  load         %.2f s; anonymous RSS %+.0f MB after load (weights %.2f GB: mapped files, or FP8/MXFP4/NVFP4 "
      "repacked)\n",
      load_s, double(rss_anon_kb() - anon0) / 1024.0, (l.bytes.dense + l.bytes.routed_all) / 1e9);
  if (l.model->backend_kind() == engine::BackendKind::kCuda) {
    l.bandwidth = device_bandwidth;
    std::printf("  device copy  %.0f GB/s (read + written, a %zu MiB device-to-device copy before loading, best of 4)\n",
                l.bandwidth, kProbe >> 20);
    if (l.model->placement().experts_on_host) {
      l.h2d = h2d;
      l.mapped_read = mapped_read;
      const std::size_t limit = std::size_t(args.get_double("read-gb") * 1e9);
      l.host_read = read_bandwidth(l.bytes, l.model->threads(), limit);
      std::printf(
          "  host -> GPU  %.1f GB/s (pinned, a %zu MiB copy, best of 3); %.1f GB/s read in place (a kernel over "
          "%zu MiB of pinned memory); host read %.1f GB/s (%d threads over the mapped experts)\n",
          l.h2d, kProbe >> 21, l.mapped_read, kProbe >> 23, l.host_read, l.model->threads());
    }
    return l;
  }
  const std::size_t limit = std::size_t(args.get_double("read-gb") * 1e9);
  l.bandwidth = read_bandwidth(l.bytes, l.model->threads(), limit);
  std::printf("  host read    %.1f GB/s (%d threads over %.1f GB of the mapped experts, best of 2 passes)\n",
              l.bandwidth, l.model->threads(), std::min(double(limit), l.bytes.routed_all) / 1e9);
  return l;
}

}  // namespace

// direct:Q: the CPU share's time a layer against how many experts the layer gave it, and the line
// through them (least squares over the layers): its intercept is what a layer costs the CPU
// whatever it computes (waking threads, quantising, the barrier), its slope an expert's bytes over
// the rate the kernels stream them.
void print_cpu_share_layers(const engine::ExpertOffloadStats& before, const engine::ExpertOffloadStats& after,
                            double expert_bytes, double steps) {
  const std::size_t n_max = std::min(before.cpu_layers_by_experts.size(), after.cpu_layers_by_experts.size());
  LineFit fit;  // a layer's seconds against its expert count, each layer a point
  std::string spread;
  for (std::size_t n = 1; n < n_max; ++n) {
    const double layers = double(after.cpu_layers_by_experts[n] - before.cpu_layers_by_experts[n]);
    const double secs = after.cpu_seconds_by_experts[n] - before.cpu_seconds_by_experts[n];
    if (layers <= 0) continue;
    char part[48];
    std::snprintf(part, sizeof part, " %zu: %.0f us (%.0f),", n, secs / layers * 1e6, layers);
    spread += part;
    fit.add(double(n), secs / layers, layers);
  }
  if (fit.n <= 0) return;
  spread.pop_back();
  const double slope = fit.slope(), fixed = fit.intercept();
  std::printf("  CPU share    a layer by its experts:%s\n", spread.c_str());
  std::printf(
      "  CPU share    fit: %.0f us a layer + %.0f us an expert (%.1f GB/s); %.2f ms a step waiting for the GPU's "
      "input\n",
      fixed * 1e6, slope * 1e6, slope > 0 ? expert_bytes / slope / 1e9 : 0.0,
      (after.cpu_wait_seconds - before.cpu_wait_seconds) / steps * 1e3);
  // The share's calls phase by phase, and how busy its threads were inside the two loops.
  const engine::CpuMoePhases& a = after.cpu_phases;
  const engine::CpuMoePhases& b = before.cpu_phases;
  const double calls = double(a.calls - b.calls), loops = (a.gate_up - b.gate_up) + (a.down - b.down);
  if (calls <= 0) return;
  std::printf(
      "  CPU share    a layer: %.0f us before the loops, %.0f us gate/up, %.0f us down (h quantised), %.0f us "
      "after; threads busy %.0f%% of the loops (%d threads)\n",
      (a.prepare - b.prepare) / calls * 1e6, (a.gate_up - b.gate_up) / calls * 1e6, (a.down - b.down) / calls * 1e6,
      (a.finish - b.finish) / calls * 1e6, loops > 0 ? 100 * (a.busy - b.busy) / (loops * a.threads) : 0.0, a.threads);
}

int bench_decode(const Args& args) {
  const std::string cmd = "bench decode";
  const int batch = args.has("batch") ? int(args.get_int("batch")) : 1;
  const int prompt = args.has("prompt") ? int(args.get_int("prompt")) : 128;
  const int steps = args.has("steps") ? int(args.get_int("steps")) : 32;
  if (batch < 1 || prompt < 1 || steps < 1) return usage_error(cmd, "--batch, --prompt and --steps must be positive");
  // The KV pool holds what the run's sequences reach (prompt, two warm-up steps, then 8 settling
  // and the timed steps for each policy, a page of rounding each), as llama-bench sizes its context
  // to the test: on a GPU budget the rest goes to expert slots, not to a pool of idle pages.
  const int64_t policy_runs = args.has("policies") ? 1 + int64_t(std::ranges::count(args.get("policies"), ',')) : 1;
  const int64_t positions = int64_t(batch) * (prompt + 2 + policy_runs * (8 + steps) + 64);
  auto l = load(args, cmd, positions);
  if (!l) return usage_error(cmd, l.status().message());
  const engine::Model& m = *l->model;
  const std::size_t V = std::size_t(m.vocab_size());

  // Prefill every sequence's prompt (batched passes of --chunk tokens a sequence, as the server
  // prefills: one pass over a long prompt needs temporaries no budget keeps), then time decode
  // steps of one token each.
  const int chunk = pass_chunk(args, m, prompt);
  if (chunk < 1) return usage_error(cmd, "--chunk must be positive");
  std::vector<engine::SequenceState> states;
  for (int i = 0; i < batch; ++i) states.push_back(m.new_state());
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < batch; ++i) prompts.push_back(random_tokens(std::size_t(prompt), m.vocab_size(), 1000 + i));
  std::vector<float> logits(std::size_t(batch) * V);
  std::vector<engine::BatchSlice> slices;
  int prompt_passes = 0;
  for (int at = 0; at < prompt; at += chunk, ++prompt_passes) {
    const std::size_t n = std::size_t(std::min(chunk, prompt - at));
    slices.clear();
    for (int i = 0; i < batch; ++i) {
      slices.push_back({&states[i], std::span<const int32_t>(prompts[i]).subspan(std::size_t(at), n), nullptr,
                        engine::LogitsMode::kNone});
    }
    if (Status s = m.forward_batch(slices); !s) return runtime_error(cmd, s.message());
  }
  std::printf("  prompt       %d tokens a sequence, prefilled in %d passes of up to %d (untimed)\n", prompt,
              prompt_passes, chunk);

  std::vector<int32_t> next(static_cast<std::size_t>(batch), 0);
  // Random weights decoded greedily fall into loops that route the same experts again and again
  // (a cache's best case); random tokens route close to uniformly (its worst case).
  const std::string feed_name = args.has("feed") ? args.get("feed") : "greedy";
  if (feed_name != "greedy" && feed_name != "random") return usage_error(cmd, "--feed must be greedy or random");
  const bool random_feed = feed_name == "random";
  std::mt19937_64 feed(99);
  const auto step = [&](engine::RoutingTrace* trace) -> Status {
    slices.clear();
    for (int i = 0; i < batch; ++i)
      slices.push_back({&states[i], {&next[std::size_t(i)], 1}, logits.data() + std::size_t(i) * V, engine::LogitsMode::kLast});
    m.set_routing_trace(trace);
    Status s = m.forward_batch(slices);
    m.set_routing_trace(nullptr);
    for (int i = 0; i < batch; ++i) {  // greedy, so the routing is what a real decode takes
      const float* row = logits.data() + std::size_t(i) * V;
      next[std::size_t(i)] = random_feed ? int32_t(feed() % V) : int32_t(std::max_element(row, row + V) - row);
    }
    return s;
  };
  for (int i = 0; i < 2; ++i) {  // warm-up: scratch sized, pages faulted
    if (Status s = step(nullptr); !s) return runtime_error(cmd, s.message());
  }
  engine::RoutingTrace trace;
  engine::OpProfile profile;
  // On the GPU op times need steps without graphs: they are taken in steps of their own below
  // (GPU events around every op), and the timed steps record only how long the host takes to
  // issue them.
  const bool profiled = m.backend_kind() != engine::BackendKind::kCuda;
  engine::OpProfile passes;
  passes.time_ops = false;
  const ModelBytes& b = l->bytes;
  // With experts in host RAM, --policies times each policy in turn (same process, back to back).
  std::vector<std::string> policies{""};
  if (args.has("policies")) {
    if (!m.placement().experts_on_host) return usage_error(cmd, "--policies needs experts in host RAM (--gpu-mem)");
    policies.clear();
    std::string list = args.get("policies");
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t end = std::min(list.find(',', at), list.size());
      auto p = engine::parse_moe_policy(list.substr(at, end - at));
      if (!p) return usage_error(cmd, p.status().message());
      policies.push_back(p->name());
      at = end + 1;
    }
  }
  double secs = 0, bound_step = 0;
  std::vector<std::pair<std::string, double>> policy_tok_s;
  for (const std::string& policy : policies) {
    if (!policy.empty()) {
      m.set_moe_policy(*engine::parse_moe_policy(policy));
      for (int i = 0; i < 8; ++i) {  // the cache and the split model settle into the policy
        if (Status s = step(nullptr); !s) return runtime_error(cmd, s.message());
      }
    }
    trace = {};
    const auto before = m.expert_offload_stats();
    m.set_profile(profiled ? &profile : &passes);
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) {
      if (Status s = step(&trace); !s) return runtime_error(cmd, s.message());
    }
    secs = seconds_since(t0);
    m.set_profile(nullptr);
    const double ctx = double(prompt) + 2 + double(steps) / 2;  // mean positions attended per token
    const double experts_step = b.expert * distinct_experts(trace) / double(steps);
    const double bytes_step = b.dense + experts_step + double(batch) * (ctx * b.kv_per_token + b.linear_state);
    bound_step = bytes_step / (l->bandwidth * 1e9);
    const double step_s = secs / double(steps);
    std::printf(
        "  decode       batch %d, %d-token prompts, %d steps (%s tokens)%s%s: %.1f ms/step, %.2f tok/s (%.2f tok/s per "
        "sequence)\n",
        batch, prompt, steps, feed_name.c_str(), policy.empty() ? "" : ", policy ", policy.c_str(), step_s * 1e3,
        double(batch) / step_s, 1.0 / step_s);
    std::printf(
        "  bytes/step   %.2f GB = dense %.2f + experts %.2f (%.1f distinct of %lld per layer) + kv/state %.3f\n",
        bytes_step / 1e9, b.dense / 1e9, experts_step / 1e9, distinct_experts(trace) / double(trace.calls.size()),
        (long long)m.config().num_experts, double(batch) * (ctx * b.kv_per_token + b.linear_state) / 1e9);
    if (const auto after = m.expert_offload_stats(); after && before) {
      // The hybrid bound: what the GPU holds read at HBM speed, the misses at PCIe and host-read
      // speed together (an upper bound on both at once: they share host memory).
      const double uses = double(after->hits - before->hits + after->misses - before->misses);
      const double hit = uses > 0 ? double(after->hits - before->hits) / uses : 0;
      const double miss_bytes = (1 - hit) * experts_step;
      const double offpath = l->h2d + l->host_read;
      bound_step = (bytes_step - miss_bytes) / (l->bandwidth * 1e9) + miss_bytes / (offpath * 1e9);
      const double fetched = double(after->fetched - before->fetched),
                   cpu = double(after->cpu_computed - before->cpu_computed);
      const double fb = double(after->fetched_bytes - before->fetched_bytes),
                   cb = double(after->cpu_bytes - before->cpu_bytes);
      const double fs = after->fetch_seconds - before->fetch_seconds, cs = after->cpu_seconds - before->cpu_seconds;
      std::string policy_now = after->policy;
      if (after->policy.starts_with("direct")) {
        char share[48];
        std::snprintf(share, sizeof share, " (CPU share now %.2f)", after->cpu_share);
        policy_now += share;
      }
      std::printf(
          "  offload      %s: hit rate %.1f%% (%d slots); a step fetched %.1f experts (%.2f GB, %.1f GB/s while "
          "copying) and computed %.1f on the CPU (%.2f GB, %.1f GB/s while computing)\n",
          policy_now.c_str(), 100 * hit, after->slots, fetched / steps, fb / steps / 1e9, fs > 0 ? fb / fs / 1e9 : 0.0,
          cpu / steps, cb / steps / 1e9, cs > 0 ? cb / cs / 1e9 : 0.0);
      if (const double in_place = double(after->read_in_place - before->read_in_place); in_place > 0)
        std::printf(
            "  in place     a step read %.1f missed experts from host memory (%.2f GB): %.1f GB/s over the step\n",
            in_place / steps, double(after->read_in_place_bytes - before->read_in_place_bytes) / steps / 1e9,
            double(after->read_in_place_bytes - before->read_in_place_bytes) / secs / 1e9);
      if (const double ahead = double(after->prefetched - before->prefetched); ahead > 0)
        std::printf(
            "  prefetch     a step copied %.1f experts ahead (%.2f GB) for the next layer; it chose %.0f%% of them\n",
            ahead / steps, double(after->prefetched_bytes - before->prefetched_bytes) / steps / 1e9,
            100 * double(after->prefetch_used - before->prefetch_used) / ahead);
      print_cpu_share_layers(*before, *after, cpu > 0 ? cb / cpu : 0.0, steps);
      std::printf(
          "  hybrid bound %.1f ms/step = %.2f tok/s (HBM %.0f GB/s; misses %.2f GB at %.1f + %.1f GB/s PCIe + host "
          "read); measured/bound %.2f\n",
          bound_step * 1e3, double(batch) / bound_step, l->bandwidth, miss_bytes / 1e9, l->h2d, l->host_read,
          bound_step / step_s);
      const engine::SplitCosts& k = after->calibrated;
      std::printf(
          "  split model  calibrated PCIe %.1f GB/s, CPU %.1f GB/s alone, %.1f + %.1f at once; now %.1f, %.1f, "
          "%.1f + %.1f\n",
          k.pcie_gbps, k.cpu_gbps, k.pcie_shared_gbps, k.cpu_shared_gbps, after->costs.pcie_gbps, after->costs.cpu_gbps,
          after->costs.pcie_shared_gbps, after->costs.cpu_shared_gbps);
      policy_tok_s.push_back({after->policy, double(batch) / step_s});
    } else {
      std::printf("  bound        %.1f ms/step = %.2f tok/s at %.1f GB/s; measured/bound %.2f\n", bound_step * 1e3,
                  double(batch) / bound_step, l->bandwidth, bound_step / step_s);
    }
  }
  if (policy_tok_s.size() > 1) {
    double adaptive = 0, best_fixed = 0;
    std::string best_name;
    for (const auto& [name, tok_s] : policy_tok_s) {
      if (name == "adaptive") adaptive = tok_s;
      if ((name == "fetch" || name == "cpu") && tok_s > best_fixed) {
        best_fixed = tok_s;
        best_name = name;
      }
    }
    if (adaptive > 0 && best_fixed > 0)
      std::printf("  policies     adaptive / best fixed (%s) = %.2f\n", best_name.c_str(), adaptive / best_fixed);
  }
  if (profiled) {
    print_profile(profile, secs);
    if (const double es = profile.seconds[engine::OpProfile::kMoeExperts]; es > 0 && policies.size() == 1) {
      // The routed experts' own rate: what a CPU share of offloaded misses can stream.
      const double eb = b.expert * distinct_experts(trace);
      std::printf("  experts      %.2f GB in %.1f ms/step: %.1f GB/s (%.2f of the host read)\n", eb / steps / 1e9,
                  es / steps * 1e3, eb / es / 1e9, eb / es / 1e9 / l->bandwidth);
    }
  } else {
    print_issue_time(passes);
    profile.gpu_events = true;
    m.set_profile(&profile);
    const auto p0 = Clock::now();
    for (int i = 0; i < std::min(steps, 8); ++i) {
      if (Status s = step(nullptr); !s) return runtime_error(cmd, s.message());
    }
    const double psecs = seconds_since(p0);
    m.set_profile(nullptr);
    std::printf(
        "  (op times: GPU events around every op in %d more steps, run op by op without graphs: %.1f ms/step; "
        "'other' is the GPU waiting for launches)\n",
        std::min(steps, 8), psecs / std::min(steps, 8) * 1e3);
    print_profile(profile, psecs);
  }
  std::printf("  anon RSS     %.0f MB\n", double(rss_anon_kb()) / 1024.0);
  return 0;
}

int bench_gemm(const Args& args) {
  const std::string cmd = "bench gemm";
  const int64_t T = args.has("tokens") ? args.get_int("tokens") : 4096;
  const int64_t rows = args.has("rows") ? args.get_int("rows") : 4096;
  const int64_t cols = args.has("cols") ? args.get_int("cols") : 2048;
  const int threads = args.has("threads") ? int(args.get_int("threads")) : 0;
  if (T < 1 || rows < 1 || cols < 1) return usage_error(cmd, "--tokens, --rows and --cols must be positive");
  std::vector<engine::CpuIsa> isas = {engine::CpuIsa::kAvx512, engine::CpuIsa::kAvx512Bf16, engine::CpuIsa::kAmxBf16};
  if (const std::string name = args.has("isa") ? args.get("isa") : "auto"; name != "auto") {
    engine::CpuIsa isa;
    if (!engine::parse_cpu_isa(name.c_str(), &isa)) return usage_error(cmd, "unknown --isa '" + name + "'");
    if (!engine::cpu_isa_supported(isa)) return runtime_error(cmd, "this CPU cannot run the " + name + " path");
    isas = {isa};
  }
  std::vector<engine::bf16_t> w(std::size_t(rows * cols));
  std::uint64_t seed = 1;
  for (auto& v : w) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v = engine::f32_to_bf16(float(int((seed >> 40) % 2001) - 1000) * 1e-5f);
  }
  std::vector<float> x(std::size_t(T * cols), 0.5f), y(std::size_t(T * rows));
  const engine::Matrix m{engine::DType::kBF16, rows, cols, reinterpret_cast<const std::byte*>(w.data()),
                         std::size_t(cols) * 2};
  std::printf("%s: y[%lld, %lld] = x[%lld, %lld] w^T, bf16 weights\n", cmd.c_str(), (long long)T, (long long)rows,
              (long long)T, (long long)cols);
  for (engine::CpuIsa isa : isas) {
    if (!engine::cpu_isa_supported(isa)) continue;
    auto be = engine::make_backend({engine::BackendKind::kCpu, threads, isa});
    if (!be) return runtime_error(cmd, be.status().message());
    double best = 1e30;
    for (int rep = 0; rep < 4; ++rep) {
      const auto t0 = Clock::now();
      (*be)->execute([&] { (*be)->linear(x.data(), std::size_t(T), m, nullptr, y.data()); });
      if (rep > 0) best = std::min(best, seconds_since(t0));
    }
    const double flops = 2.0 * double(T) * double(rows) * double(cols);
    std::printf("  %-11s %8.3f ms  %7.2f TFLOP/s  %7.1f GB/s of weights  (%d threads)\n", engine::cpu_isa_name(isa),
                best * 1e3, flops / best / 1e12, double(w.size() * 2) / best / 1e9, (*be)->threads());
  }
  return 0;
}

// The cost of checkpoints at chunk boundaries, as the engine's scheduler takes them
// (to_model_state + the store's save_deferred after the chunk that ends at a boundary): the prompt
// prefilled twice without and twice with a checkpoint after every chunk, alternating, into a
// TieredStore (RAM + RocksDB) at `dir`. Prints the pass times, the time the host spends taking the
// checkpoints, and the write-behind left when the pass ends (flushed after it, untimed).
int time_snapshots(const engine::Model& m, std::span<const int32_t> tokens, int chunk, const std::string& dir) {
  const std::string cmd = "bench prefill";
  store::StoreOptions so;
  so.path = dir;
  auto opened = store::TieredStore::open(so);
  if (!opened) return runtime_error(cmd, "checkpoint store at " + dir + ": " + opened.status().message());
  store::TieredStore& st = **opened;
  const ModelFingerprint fingerprint = engine::store_fingerprint(m);
  std::vector<float> logits(std::size_t(m.vocab_size()));
  double plain = 1e30, with = 1e30, taking = 0;
  int boundaries = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const bool snap = rep % 2 == 1;
    engine::SequenceState s = m.new_state();
    double take = 0;
    int n_snaps = 0;
    const auto t0 = Clock::now();
    for (int at = 0; at < int(tokens.size()); at += chunk) {
      const int n = std::min(chunk, int(tokens.size()) - at);
      const auto mode = at + n == int(tokens.size()) ? engine::LogitsMode::kLast : engine::LogitsMode::kNone;
      if (Status e = m.forward(s, tokens.subspan(std::size_t(at), std::size_t(n)), logits.data(), mode); !e)
        return runtime_error(cmd, e.message());
      if (!snap) continue;
      const auto s0 = Clock::now();
      const store::StoreKey key{"bench", fingerprint, PrefixKey{std::uint64_t(rep), std::uint64_t(at + n)}};
      auto state = std::make_shared<const store::ModelState>(engine::to_model_state(s, fingerprint));
      if (Status e = st.save_deferred(key, std::move(state)); !e) return runtime_error(cmd, e.message());
      take += seconds_since(s0);
      ++n_snaps;
    }
    const double secs = seconds_since(t0);
    if (snap) {
      if (secs < with) {  // the host's share of the pass reported
        with = secs;
        taking = take;
      }
      boundaries = n_snaps;
      st.flush();  // the write-behind, outside the timed passes
    } else {
      plain = std::min(plain, secs);
    }
  }
  std::printf(
      "  snapshots    a checkpoint after each of %d chunks (to_model_state + save_deferred into RAM + RocksDB): "
      "%.3f s against %.3f s without (%+.1f%%, best of 2 each); taking them %.1f ms on the host\n",
      boundaries, with, plain, 100 * (with - plain) / plain, taking * 1e3);
  return 0;
}

int bench_prefill(const Args& args) {
  const std::string cmd = "bench prefill";
  const int prompt = args.has("prompt") ? int(args.get_int("prompt")) : 4096;
  if (prompt < 1 || (args.has("chunk") && args.get_int("chunk") < 1))
    return usage_error(cmd, "--prompt and --chunk must be positive");
  // The KV pool holds one prompt (the warm-up's sequence is gone before the timed one starts), as
  // in bench decode; with snapshots the pool keeps its default (the hot checkpoint tier may hold
  // pages of earlier passes).
  auto l = load(args, cmd, args.has("snapshot-store") ? 0 : int64_t(prompt) + 64);
  if (!l) return usage_error(cmd, l.status().message());
  const engine::Model& m = *l->model;
  const int chunk = pass_chunk(args, m, prompt);
  const auto tokens = random_tokens(std::size_t(prompt), m.vocab_size(), 7);
  std::vector<float> logits(std::size_t(m.vocab_size()));
  {  // warm-up: the whole prompt's chunks once, so the timed pass finds what a server that has run
     // a prompt this long has: the weights' pages, the pass's scratch and KV pages first touched
     // (on the CPU a cold pass of 1,024 tokens took ~1.4x a warm one, docs/perf-notes.md), the
     // GPU's kernels loaded. Other tokens than the timed ones: a prompt the engine has not seen
     // routes its chunks differently, and the MoE's GEMM shapes (rows per expert) with it, so
     // plans made for the timed tokens themselves would flatter it.
    const auto other = random_tokens(std::size_t(prompt), m.vocab_size(), 8);
    engine::SequenceState s = m.new_state();
    for (int at = 0; at < prompt; at += chunk) {
      const auto part = std::span(other).subspan(std::size_t(at), std::size_t(std::min(chunk, prompt - at)));
      if (Status st = m.forward(s, part, logits.data(), engine::LogitsMode::kLast); !st)
        return runtime_error(cmd, st.message());
    }
  }
  engine::SequenceState s = m.new_state();
  engine::RoutingTrace trace;
  engine::OpProfile profile;
  const auto offload_before = m.expert_offload_stats();
  m.set_routing_trace(&trace);
  const bool profiled = m.backend_kind() != engine::BackendKind::kCuda;  // see bench_decode
  engine::OpProfile passes;
  passes.time_ops = false;
  m.set_profile(profiled ? &profile : &passes);
  const auto t0 = Clock::now();
  int chunks = 0;
  for (int at = 0; at < prompt; at += chunk, ++chunks) {
    const int n = std::min(chunk, prompt - at);
    const auto mode = at + n == prompt ? engine::LogitsMode::kLast : engine::LogitsMode::kNone;
    if (Status st = m.forward(s, std::span(tokens).subspan(std::size_t(at), std::size_t(n)), logits.data(), mode); !st)
      return runtime_error(cmd, st.message());
  }
  const double secs = seconds_since(t0);
  m.set_routing_trace(nullptr);
  m.set_profile(nullptr);
  const ModelBytes& b = l->bytes;
  const engine::ModelConfig& c = m.config();
  // Arithmetic: 2 flops per weight per token for the dense weights and the chosen experts, plus
  // attention (q.k and p.v over the positions each token sees).
  const double expert_flops = 2.0 * b.expert_params * double(c.num_experts_per_tok) *
                              double(trace.calls.size()) / double(chunks) * double(prompt);
  // The lm_head runs for the last token only.
  const double head = double(c.vocab_size * c.hidden_size);
  const double dense_flops = 2.0 * (b.dense_params - head) * double(prompt) + 2.0 * head;
  const double attn_flops = 4.0 * double(c.num_attention_heads * c.head_dim) *
                            double(c.count_layers(engine::LayerKind::kFullAttention)) * double(prompt) * double(prompt) / 2;
  const double flops = expert_flops + dense_flops + attn_flops;
  const double weight_bound = (b.dense * double(chunks) + b.expert * distinct_experts(trace)) / (l->bandwidth * 1e9);
  std::printf("  prefill      %d tokens in chunks of %d: %.2f s, %.1f tok/s, %.2f TFLOP/s (%.1f TFLOP: experts %.1f, dense %.1f, attention %.1f)\n",
              prompt, chunk, secs, double(prompt) / secs, flops / secs / 1e12, flops / 1e12, expert_flops / 1e12,
              dense_flops / 1e12, attn_flops / 1e12);
  std::printf("  bound        weights read once per chunk: %.2f s at %.1f GB/s (%.0f tok/s); measured/bound %.2f\n",
              weight_bound, l->bandwidth, double(prompt) / weight_bound, weight_bound / secs);
  print_routing_spread(trace);
  if (const auto after = m.expert_offload_stats(); after && offload_before) {
    // Streaming: the experts each chunk misses cross PCIe; busy = bytes moved / time at the probe's rate.
    const double moved = double(after->fetched_bytes - offload_before->fetched_bytes);
    const double pcie_s = moved / (l->h2d * 1e9);
    std::printf(
        "  streaming    %.2f GB of experts over PCIe (%.0f experts, %.0f of them in strided runs; %d slots): %.1f "
        "GB/s over the pass; PCIe busy %.0f%% (the bytes at the probe's %.1f GB/s); PCIe bound %.0f tok/s\n",
        moved / 1e9, double(after->fetched - offload_before->fetched),
        double(after->fetched_in_runs - offload_before->fetched_in_runs), after->slots, moved / secs / 1e9,
        100 * pcie_s / secs, l->h2d, double(prompt) / pcie_s);
    std::printf("  workspace    %.2f GiB (passes of %lld rows planned); temporaries past it: %.2f GiB\n",
                double(m.placement().workspace_bytes) / double(1ull << 30), static_cast<long long>(m.pass_rows()),
                double(after->workspace_overflow_bytes) / double(1ull << 30));
  }
  if (profiled) {
    print_profile(profile, secs);
  } else {  // the same prompt once more, every op timed on its own
    print_issue_time(passes);
    s = m.new_state();  // its pages back to the pool first
    engine::SequenceState again = m.new_state();
    profile.gpu_events = true;
    m.set_profile(&profile);
    const auto p0 = Clock::now();
    for (int at = 0; at < prompt; at += chunk) {
      const int n = std::min(chunk, prompt - at);
      if (Status st = m.forward(again, std::span(tokens).subspan(std::size_t(at), std::size_t(n)), logits.data(),
                                engine::LogitsMode::kLast);
          !st)
        return runtime_error(cmd, st.message());
    }
    const double psecs = seconds_since(p0);
    m.set_profile(nullptr);
    std::printf(
        "  (op times: GPU events around every op in the prompt once more, %.2f s; 'other' is the GPU waiting for the "
        "host)\n",
        psecs);
    print_profile(profile, psecs);
  }
  if (args.has("snapshot-store")) {
    s = m.new_state();  // its pages back to the pool first
    if (int rc = time_snapshots(m, tokens, chunk, args.get("snapshot-store")); rc != 0) return rc;
  }
  std::printf("  anon RSS     %.0f MB\n", double(rss_anon_kb()) / 1024.0);
  return 0;
}

}  // namespace ft::cli

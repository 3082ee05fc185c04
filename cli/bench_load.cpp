#include "bench_load.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_work_dir.h"
#include "load_run.h"
#include "serve_child.h"

namespace ft::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kCmd = "bench load";
constexpr int kServeStartTimeoutS = 600;  // loading a real model can take minutes
constexpr double kShortestJudgedRunS = 60;

struct LoadFlags {
  RunPlan plan;
  Watch watch;
  double warm_up_s = 0;  // RSS is judged from here on
  std::string url, reference_url;  // servers already running ("": start one)
  bool check_outputs = false;
  int reference_concurrency = 1;
  std::string model;  // "": the demo model
  std::string store;  // "": a fresh one in the work directory
  fs::path dir;       // where the work directory goes
  bool keep = false;
  bool as_json = false;
  std::vector<std::string> serve_flags;  // after "--": more flags for serve
};

Result<LoadFlags> load_flags(const Args& args) {
  LoadFlags f;
  f.plan.sessions = args.has("sessions") ? args.get_int("sessions") : 64;
  f.plan.variants = args.has("variants") ? args.get_int("variants") : f.plan.sessions;
  f.plan.max_tokens = args.has("max-tokens") ? args.get_int("max-tokens") : 16;
  f.plan.seconds = args.has("seconds") ? args.get_double("seconds") : 600;
  f.watch.chaos_every_s = args.has("chaos-kill-every") ? args.get_double("chaos-kill-every") : 0;
  f.watch.progress_every_s = args.has("progress-every") ? args.get_double("progress-every") : 30;
  f.warm_up_s = args.has("warm-up") ? args.get_double("warm-up") : 0.2 * f.plan.seconds;
  f.reference_concurrency = args.has("reference-concurrency") ? args.get_int("reference-concurrency") : 1;
  if (f.plan.sessions < 1 || f.plan.variants < 1 || f.plan.max_tokens < 1 || f.reference_concurrency < 1)
    return invalid_argument("--sessions, --variants, --max-tokens and --reference-concurrency must be positive");
  if (!(f.plan.seconds > 0) || f.watch.chaos_every_s < 0 || f.watch.progress_every_s < 0)
    return invalid_argument("--seconds must be positive, --chaos-kill-every and --progress-every not negative");
  if (!(f.warm_up_s >= 0) || f.warm_up_s >= f.plan.seconds)
    return invalid_argument("--warm-up must be at least 0 and less than --seconds");
  f.url = args.get("url");
  f.reference_url = args.get("reference-url");
  f.check_outputs = args.has("check-outputs");
  f.model = args.get("model");
  f.store = args.get("store");
  f.keep = args.has("keep");
  f.as_json = args.has("json");
  f.serve_flags = args.pass_through();
  if (args.has("serve-pid")) f.watch.serve_pid = args.get_int("serve-pid");
  if (!f.url.empty() && (!f.store.empty() || !f.model.empty() || !f.serve_flags.empty()))
    return invalid_argument(
        "--url names a running server: --model, --store and serve flags are for the one "
        "bench load starts");
  if (f.url.empty() && f.watch.serve_pid > 0) return invalid_argument("--serve-pid goes with --url");
  if (f.watch.chaos_every_s > 0 && !f.url.empty() && f.watch.serve_pid <= 0)
    return invalid_argument("--chaos-kill-every with --url needs --serve-pid (whose engine to kill)");
  if (!f.reference_url.empty() && !f.check_outputs)
    return invalid_argument("--reference-url goes with --check-outputs");
  if (f.check_outputs && !f.url.empty() && f.reference_url.empty())
    return invalid_argument("--check-outputs with --url needs --reference-url (a server run with --no-prefix-cache)");
  const fs::path traffic = args.has("traffic") ? fs::path(args.get("traffic")) : default_traffic_dir();
  FT_ASSIGN_OR_RETURN(f.plan.conversations, load_conversations(traffic, split_commas(args.get("conversations"))));
  f.dir = args.has("dir") ? fs::path(args.get("dir")) : fs::temp_directory_path();
  return f;
}

std::vector<std::string> serve_args(const LoadFlags& f, std::vector<std::string> own) {
  std::vector<std::string> args = {"--port", "0",
                                   // Every session's request waits in the engine's queue rather
                                   // than being refused as overloaded (which would be retried).
                                   "--max-waiting", std::to_string(std::max(16, f.plan.sessions))};
  if (!f.model.empty()) args.insert(args.end(), {"--model", f.model});
  args.insert(args.end(), own.begin(), own.end());
  // Last: a flag given twice takes its last value, so these override the defaults above.
  args.insert(args.end(), f.serve_flags.begin(), f.serve_flags.end());
  return args;
}

// What the engine holds at the end of the run (from /v1/stats, asked once the sessions are done:
// under load it waits for an HTTP thread like any request): the KV pages ever touched (a
// high-water mark: they stay resident) and the checkpoints, which account for most engine RSS.
json engine_state(const Endpoint& server) {
  const json j = server_stats(server);
  if (!j.is_object() || !j.contains("engine") || j["engine"].contains("error")) return nullptr;
  const json kv = j["engine"]["placement"].value("kv", json::object());
  const double page_mib = kv.value("page_bytes", 0.0) / double(1 << 20);
  const json checkpoints = j["memory"].value("checkpoints", json::object()).value("stats", json::object());
  return {{"resident_mib", j["memory"].value("resident_bytes", 0.0) / double(1 << 20)},
          {"kv_touched_mib", kv.value("stats", json::object()).value("pages_touched", 0.0) * page_mib},
          {"kv_pool_mib", kv.value("pages", 0.0) * page_mib},
          {"checkpoint_mib", checkpoints.value("bytes", 0.0) / double(1 << 20)},
          {"checkpoints", checkpoints.value("entries", 0)}};
}

struct VerifyResult {
  bool ran = false;
  int exit_code = -1;
  json report;  // ctl checkpoints verify --json
};

VerifyResult verify_store(const fs::path& store) {
  VerifyResult v;
  const CommandOutput out = run_self({"ctl", "checkpoints", "verify", "--store", store.string(), "--json"});
  v.ran = true;
  v.exit_code = out.exit_code;
  v.report = json::parse(out.out, nullptr, false);
  if (v.report.is_discarded()) v.report = json{{"output", out.out}};
  return v;
}

double mib(uint64_t bytes) { return double(bytes) / double(1 << 20); }

void print_rss_line(const char* name, const RssTrack::Verdict& v, double warm_s, bool judge) {
  const char* verdict = !judge      ? "not judged (a run under a minute)"
                        : !v.judged ? "not judged (restarted, without two whole lifetimes to compare)"
                        : v.flat    ? "flat"
                                    : "GROWING";
  if (!v.lifetime_peaks.empty()) {
    std::printf("  RSS %-8s %d processes (restarted); peak of each whole lifetime after warm-up (%.0f s):", name,
                v.processes, warm_s);
    for (uint64_t p : v.lifetime_peaks) std::printf(" %.0f", mib(p));
    std::printf(" MiB; the last %.0f MiB vs at most %.0f before: %s\n", mib(v.end), mib(v.warm), verdict);
    return;
  }
  std::printf("  RSS %-8s after warm-up (%.0f s) %.0f MiB, at the end %.0f MiB, peak %.0f MiB: %s\n", name, warm_s,
              mib(v.warm), mib(v.end), mib(v.peak), verdict);
}

}  // namespace

int bench_load(const Args& args) {
  auto flags = load_flags(args);
  if (!flags) return usage_error(kCmd, flags.status().message());
  LoadFlags& f = *flags;
  std::error_code ec;
  if (!fs::is_directory(f.dir, ec)) return usage_error(kCmd, "--dir " + f.dir.string() + " is not a directory");
  WorkDir work(f.dir, "bench-load");
  if (work.path().empty()) return runtime_error(kCmd, "cannot create a directory in " + f.dir.string());
  if (f.keep) work.keep();
  std::size_t requests = 0;
  for (const Conversation& c : f.plan.conversations) requests += c.requests.size();
  std::fprintf(stderr, "bench load: %zu conversations (%zu requests); work directory %s\n", f.plan.conversations.size(),
               requests, work.path().c_str());

  // 1) The answers to compare with: every request alone on a server that computes every prompt
  //    in full, keeps no checkpoints and runs the same engine flags.
  std::map<std::string, std::string> expected;
  double reference_s = 0;
  if (f.check_outputs) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<ServeChild> reference;
    Result<Endpoint> endpoint = invalid_argument("");
    if (f.reference_url.empty()) {
      auto started = ServeChild::start(serve_args(f, {"--no-store", "--no-prefix-cache"}),
                                       work.path() / "reference-serve.log", kServeStartTimeoutS);
      if (!started) return runtime_error(kCmd, started.status().message());
      reference = std::move(started).value();
      endpoint = Endpoint{"127.0.0.1", reference->port()};
    } else {
      endpoint = parse_endpoint(f.reference_url);
      if (!endpoint) return usage_error(kCmd, "--reference-url: " + endpoint.status().message());
    }
    std::fprintf(stderr, "bench load: reference pass: %zu requests x %d variants, %d at a time, no prefix cache\n",
                 requests, f.plan.variants, f.reference_concurrency);
    auto answers = reference_answers(*endpoint, f.plan, f.reference_concurrency);
    if (!answers) {
      work.keep();
      return runtime_error(kCmd, answers.status().message() + " (logs in " + work.path().string() + ")");
    }
    expected = std::move(answers).value();
    reference.reset();
    reference_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // 2) The server under load.
  std::unique_ptr<ServeChild> serve;
  Endpoint server;
  fs::path store;
  if (f.url.empty()) {
    store = f.store.empty() ? work.path() / "store" : fs::path(f.store);
    auto started =
        ServeChild::start(serve_args(f, {"--store", store.string()}), work.path() / "serve.log", kServeStartTimeoutS);
    if (!started) return runtime_error(kCmd, started.status().message());
    serve = std::move(started).value();
    server = Endpoint{"127.0.0.1", serve->port()};
    f.watch.serve_pid = serve->pid();
    f.watch.serve_log = serve->log();
  } else {
    auto endpoint = parse_endpoint(f.url);
    if (!endpoint) return usage_error(kCmd, "--url: " + endpoint.status().message());
    server = *endpoint;
  }
  std::fprintf(stderr, "bench load: %d sessions for %.0f s against http://%s:%d%s\n", f.plan.sessions, f.plan.seconds,
               server.host.c_str(), server.port,
               f.watch.chaos_every_s > 0
                   ? (", SIGKILL to the engine every " + std::to_string(int(f.watch.chaos_every_s)) + " s").c_str()
                   : "");
  LoadStats stats;
  RssTrack rss;
  const RunSummary run = run_load(server, f.plan, f.watch, f.check_outputs ? &expected : nullptr, stats, rss);

  // 3) The server stops (its engine flushes the store), then the store is verified.
  const json engine_at_end = engine_state(server);
  const int serve_exit = serve ? serve->stop() : 0;
  VerifyResult verify;
  if (serve) verify = verify_store(store);

  const LoadStats::Snapshot s = stats.snapshot();
  const double warm_s = f.warm_up_s;
  const RssTrack::Verdict proxy_rss = rss.proxy(warm_s), engine_rss = rss.engine(warm_s);
  const bool measured_rss = f.watch.serve_pid > 0;
  // A shorter run cannot tell growth from warming up: its RSS is reported, not judged.
  const bool judge_rss = measured_rss && f.plan.seconds >= kShortestJudgedRunS;
  const bool rss_flat = !judge_rss || (proxy_rss.flat && (!engine_rss.judged || engine_rss.flat));
  const bool verified = !verify.ran || verify.exit_code == 0;
  const bool pass = s.failed == 0 && s.wrong == 0 && rss_flat && verified && serve_exit == 0;
  const double tok_s = run.wall_s > 0 ? double(s.output_tokens) / run.wall_s : 0;
  const double restored = s.prompt_tokens ? double(s.cached_tokens) / double(s.prompt_tokens) : 0;
  if (!pass) work.keep();

  if (f.as_json) {
    json j = {
        {"sessions", f.plan.sessions},
        {"seconds", f.plan.seconds},
        {"wall_seconds", run.wall_s},
        {"variants", f.plan.variants},
        {"chaos_kill_every", f.watch.chaos_every_s},
        {"engine_kills", run.kills},
        {"engine_processes", run.engines},
        {"engine_down_seconds", {{"p50", quantile(run.downtimes_s, 0.5)}, {"max", quantile(run.downtimes_s, 1.0)}}},
        {"requests",
         {{"completed", s.completed},
          {"failed", s.failed},
          {"retried", s.retried_requests},
          {"retried_tries", s.retried},
          {"compared", s.compared},
          {"wrong_output", s.wrong},
          {"answered", s.answered}}},
        {"retry_reasons", s.retry_reasons},
        {"failures", s.failures},
        {"ttft_seconds", {{"p50", s.ttft_p50}, {"p99", s.ttft_p99}}},
        {"stream_ttft_seconds", {{"p50", s.stream_ttft_p50}, {"p99", s.stream_ttft_p99}}},
        {"latency_seconds", {{"p50", s.latency_p50}, {"p99", s.latency_p99}}},
        {"with_retries_seconds", {{"p50", s.total_p50}, {"p99", s.total_p99}}},
        {"output_tokens", s.output_tokens},
        {"tok_s", tok_s},
        {"prompt_tokens", s.prompt_tokens},
        {"cached_tokens", s.cached_tokens},
        {"check_outputs", f.check_outputs},
        {"reference_seconds", reference_s},
        {"engine_at_end", engine_at_end},
        {"serve_exit_code", serve_exit},
        {"verify", verify.ran ? json{{"exit_code", verify.exit_code}, {"report", verify.report}} : json(nullptr)},
        {"pass", pass},
        {"work_dir", work.path().string()}};
    if (measured_rss) {
      j["rss"] = {{"warm_at_seconds", warm_s},
                  {"judged", judge_rss},
                  {"proxy", to_json(proxy_rss)},
                  {"engine", to_json(engine_rss)}};
    }
    std::printf("%s\n", j.dump(2).c_str());
    return pass ? 0 : 1;
  }

  std::printf("bench load: %d sessions x %.0f s (ran %.0f s), %zu conversations in %d variants, max %d tokens out\n",
              f.plan.sessions, f.plan.seconds, run.wall_s, f.plan.conversations.size(), f.plan.variants,
              f.plan.max_tokens);
  if (f.watch.chaos_every_s > 0)
    std::printf(
        "  chaos        SIGKILL to the engine every %.0f s: %d kills, %d engine processes; answering again after "
        "p50 %.1f s, at most %.1f s\n",
        f.watch.chaos_every_s, run.kills, run.engines, quantile(run.downtimes_s, 0.5), quantile(run.downtimes_s, 1.0));
  std::printf("  requests     %llu completed, %llu failed, %llu retried (%llu tries refused",
              static_cast<unsigned long long>(s.completed), static_cast<unsigned long long>(s.failed),
              static_cast<unsigned long long>(s.retried_requests), static_cast<unsigned long long>(s.retried));
  const char* separator = ": ";
  for (const auto& [reason, n] : s.retry_reasons) {
    std::printf("%s%s x%llu", separator, reason.c_str(), static_cast<unsigned long long>(n));
    separator = ", ";
  }
  std::printf(")\n");
  if (f.check_outputs)
    std::printf("  outputs      %llu compared with the no-cache answers (computed in %.0f s): %llu wrong\n",
                static_cast<unsigned long long>(s.compared), reference_s, static_cast<unsigned long long>(s.wrong));
  std::printf(
      "  TTFT         p50 %.2f s, p99 %.2f s (streaming requests: p50 %.2f s, p99 %.2f s); latency p50 %.2f s, "
      "p99 %.2f s\n",
      s.ttft_p50, s.ttft_p99, s.stream_ttft_p50, s.stream_ttft_p99, s.latency_p50, s.latency_p99);
  std::printf("  end to end   p50 %.2f s, p99 %.2f s (from the first try to the answer, retries included)\n",
              s.total_p50, s.total_p99);
  std::printf("  tokens       %llu out: %.1f tok/s; %llu prompt tokens, %.1f%% restored from checkpoints\n",
              static_cast<unsigned long long>(s.output_tokens), tok_s, static_cast<unsigned long long>(s.prompt_tokens),
              100 * restored);
  if (measured_rss) {
    print_rss_line("proxy", proxy_rss, warm_s, judge_rss);
    print_rss_line("engine", engine_rss, warm_s, judge_rss);
  }
  if (engine_at_end.is_object())
    std::printf(
        "  engine       at the end: %.0f MiB resident; KV pages touched %.0f MiB (a high-water mark, of a %.0f MiB "
        "pool); %d checkpoints, %.0f MiB\n",
        engine_at_end["resident_mib"].get<double>(), engine_at_end["kv_touched_mib"].get<double>(),
        engine_at_end["kv_pool_mib"].get<double>(), engine_at_end["checkpoints"].get<int>(),
        engine_at_end["checkpoint_mib"].get<double>());
  if (verify.ran)
    std::printf("  store        ctl checkpoints verify: %s (exit %d)\n", verify.report.dump().c_str(),
                verify.exit_code);
  if (serve_exit != 0) std::printf("  serve        ended with exit code %d\n", serve_exit);
  for (const std::string& why : s.failures) std::printf("  failure      %s\n", why.c_str());
  std::printf("  result       %s%s\n", pass ? "PASS" : "FAIL",
              pass ? "" : (" (logs in " + work.path().string() + ")").c_str());
  return pass ? 0 : 1;
}

}  // namespace ft::cli

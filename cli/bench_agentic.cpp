#include "bench_agentic.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_work_dir.h"
#include "load_client.h"
#include "load_stats.h"
#include "load_traffic.h"
#include "serve_child.h"

namespace ft::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kCmd = "bench agentic";
constexpr int kServeStartTimeoutS = 600;  // loading a real model can take minutes
constexpr int kRequestTimeoutS = 600;     // longest silence on one request
constexpr int kTries = 10;                // a request the server keeps refusing fails after these
// A turn with fewer tokens out than this (the model stopped early) is reported, not timed: a
// couple of tokens make a rate of noise.
constexpr int kFewestTimedTokens = 8;
// The one-request conversations are session variants no replayed turn uses.
constexpr int kFirstFreshVariant = 1'000'000;
constexpr bool kStream = true;  // the decode rate is read off the stream

struct AgenticFlags {
  std::vector<Conversation> conversations;
  int max_tokens = 64;
  std::string url;    // a running server ("": start one)
  std::string model;  // "": the demo model
  fs::path dir;
  bool keep = false;
  bool as_json = false;
  std::vector<std::string> serve_flags;  // after "--"
};

Result<AgenticFlags> agentic_flags(const Args& args) {
  AgenticFlags f;
  f.max_tokens = args.has("max-tokens") ? args.get_int("max-tokens") : 64;
  if (f.max_tokens < kFewestTimedTokens)
    return invalid_argument("--max-tokens must be at least " + std::to_string(kFewestTimedTokens) +
                            " (fewer tokens out time nothing)");
  f.url = args.get("url");
  f.model = args.get("model");
  f.keep = args.has("keep");
  f.as_json = args.has("json");
  f.serve_flags = args.pass_through();
  if (!f.url.empty() && (!f.model.empty() || !f.serve_flags.empty()))
    return invalid_argument(
        "--url names a running server: --model and serve flags are for the one bench agentic starts");
  const fs::path traffic = args.has("traffic") ? fs::path(args.get("traffic")) : default_traffic_dir();
  FT_ASSIGN_OR_RETURN(f.conversations, load_conversations(traffic, split_commas(args.get("conversations"))));
  if (f.conversations.empty()) return invalid_argument("no conversations under " + traffic.string());
  f.dir = args.has("dir") ? fs::path(args.get("dir")) : fs::temp_directory_path();
  return f;
}

// One request as the client saw it, and what the engine counted meanwhile (requests go one at a
// time, so the engine's counters moved for this request alone).
struct Timed {
  bool completed = false;
  std::string why;  // when not completed
  int prompt_tokens = 0, cached_tokens = 0, output_tokens = 0;
  double ttft_s = 0, decode_s = 0;
  double engine_decode_s = 0;  // the engine's decode-only forward passes
  bool timed() const { return completed && output_tokens >= kFewestTimedTokens && decode_s > 0; }
  double tok_s() const { return timed() ? double(output_tokens - 1) / decode_s : 0; }
};

json scheduler_counters(const Endpoint& server) {
  const json j = server_stats(server);
  if (!j.is_object() || !j.contains("engine")) return json::object();
  return j["engine"].value("scheduler", json::object());
}

Timed send_timed(const Endpoint& server, const ReplayRequest& request) {
  Timed t;
  const json before = scheduler_counters(server);
  Outcome out;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    out = send_replay(server, request, kRequestTimeoutS);
    if (out.kind != Outcome::Kind::kRetryable) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(out.retry_after_s));
  }
  const json after = scheduler_counters(server);
  t.completed = out.kind == Outcome::Kind::kCompleted;
  t.why = out.why;
  t.prompt_tokens = out.response.prompt_tokens;
  t.cached_tokens = out.response.cached_tokens;
  t.output_tokens = out.response.output_tokens;
  t.ttft_s = out.ttft_s;
  t.decode_s = out.latency_s - out.ttft_s;
  t.engine_decode_s = after.value("decode_seconds", 0.0) - before.value("decode_seconds", 0.0);
  return t;
}

struct Pair {
  std::string conversation;
  std::size_t index = 0;
  Timed replay, fresh;
};

json to_json(const Timed& t) {
  return {{"completed", t.completed},
          {"prompt_tokens", t.prompt_tokens},
          {"cached_tokens", t.cached_tokens},
          {"output_tokens", t.output_tokens},
          {"ttft_seconds", t.ttft_s},
          {"decode_seconds", t.decode_s},
          {"engine_decode_seconds", t.engine_decode_s},
          {"tok_s", t.tok_s()},
          {"why", t.why}};
}

// Output tokens after the first over decode time, summed over the turns timed in both runs.
struct Aggregate {
  double tokens = 0, seconds = 0;
  std::vector<double> ttft;
  void add(const Timed& t) {
    tokens += t.output_tokens - 1;
    seconds += t.decode_s;
    ttft.push_back(t.ttft_s);
  }
  double tok_s() const { return seconds > 0 ? tokens / seconds : 0; }
};

}  // namespace

int bench_agentic(const Args& args) {
  auto flags = agentic_flags(args);
  if (!flags) return usage_error(kCmd, flags.status().message());
  const AgenticFlags& f = *flags;
  std::error_code ec;
  if (!fs::is_directory(f.dir, ec)) return usage_error(kCmd, "--dir " + f.dir.string() + " is not a directory");
  WorkDir work(f.dir, "bench-agentic");
  if (work.path().empty()) return runtime_error(kCmd, "cannot create a directory in " + f.dir.string());
  if (f.keep) work.keep();

  std::unique_ptr<ServeChild> serve;
  Endpoint server;
  if (f.url.empty()) {
    std::vector<std::string> serve_flags = {"--port", "0", "--store", (work.path() / "store").string()};
    if (!f.model.empty()) serve_flags.insert(serve_flags.end(), {"--model", f.model});
    serve_flags.insert(serve_flags.end(), f.serve_flags.begin(), f.serve_flags.end());
    auto started = ServeChild::start(serve_flags, work.path() / "serve.log", kServeStartTimeoutS);
    if (!started) return runtime_error(kCmd, started.status().message());
    serve = std::move(started).value();
    server = Endpoint{"127.0.0.1", serve->port()};
  } else {
    auto endpoint = parse_endpoint(f.url);
    if (!endpoint) return usage_error(kCmd, "--url: " + endpoint.status().message());
    server = *endpoint;
  }

  // Warm-up: the first request of a server pays for what is set up once (the agent's system
  // prompt and tools prefilled and saved, kernels' first launches); it is not timed.
  int fresh_variant = kFirstFreshVariant;
  const Timed warm =
      send_timed(server, make_replay(f.conversations[0].requests[0], fresh_variant++, 0, f.max_tokens, kStream));
  if (!warm.completed) {
    work.keep();
    return runtime_error(kCmd, "the warm-up request failed: " + warm.why + " (logs in " + work.path().string() + ")");
  }

  // Turn by turn; each turn's fresh twin goes right before or after it (alternating, so that
  // neither always finds the other's experts in a cache).
  std::vector<Pair> pairs;
  int failed = 0;
  for (const Conversation& c : f.conversations) {
    for (std::size_t i = 0; i < c.requests.size(); ++i) {
      Pair p{c.name, i, {}, {}};
      const ReplayRequest turn = make_replay(c.requests[i], 0, i, f.max_tokens, kStream);
      const ReplayRequest fresh = make_replay(c.requests[i], fresh_variant++, i, f.max_tokens, kStream);
      if (pairs.size() % 2 == 0) {
        p.replay = send_timed(server, turn);
        p.fresh = send_timed(server, fresh);
      } else {
        p.fresh = send_timed(server, fresh);
        p.replay = send_timed(server, turn);
      }
      failed += !p.replay.completed + !p.fresh.completed;
      std::fprintf(
          stderr, "bench agentic: %s/%zu replay %.1f tok/s (%d of %d prompt tokens restored), fresh %.1f tok/s\n",
          c.name.c_str(), i, p.replay.tok_s(), p.replay.cached_tokens, p.replay.prompt_tokens, p.fresh.tok_s());
      pairs.push_back(std::move(p));
    }
  }
  const int serve_exit = serve ? serve->stop() : 0;

  Aggregate replay, fresh;
  int timed = 0;
  double worst = 0, best = 0;  // per-turn replay / fresh
  for (const Pair& p : pairs) {
    if (!p.replay.timed() || !p.fresh.timed()) continue;
    ++timed;
    replay.add(p.replay);
    fresh.add(p.fresh);
    const double r = p.replay.tok_s() / p.fresh.tok_s();
    worst = timed == 1 ? r : std::min(worst, r);
    best = timed == 1 ? r : std::max(best, r);
  }
  const double ratio = fresh.tok_s() > 0 ? replay.tok_s() / fresh.tok_s() : 0;
  const bool ok = failed == 0 && serve_exit == 0;
  if (!ok) work.keep();

  if (f.as_json) {
    json turns = json::array();
    for (const Pair& p : pairs)
      turns.push_back({{"conversation", p.conversation},
                       {"index", p.index},
                       {"replay", to_json(p.replay)},
                       {"fresh", to_json(p.fresh)}});
    const json j = {
        {"turns", turns},
        {"timed", timed},
        {"failed", failed},
        {"max_tokens", f.max_tokens},
        {"replay_tok_s", replay.tok_s()},
        {"fresh_tok_s", fresh.tok_s()},
        {"ratio", ratio},
        {"turn_ratio", {{"min", worst}, {"max", best}}},
        {"ttft_seconds_p50", {{"replay", quantile(replay.ttft, 0.5)}, {"fresh", quantile(fresh.ttft, 0.5)}}},
        {"serve_exit_code", serve_exit},
        {"work_dir", work.path().string()}};
    std::printf("%s\n", j.dump(2).c_str());
    return ok ? 0 : 1;
  }

  std::printf(
      "bench agentic: %zu turns of %zu conversations, each beside the same prompt as a new conversation; "
      "greedy, %d tokens out\n",
      pairs.size(), f.conversations.size(), f.max_tokens);
  std::printf("  %-24s %8s %8s %5s %11s %11s %7s\n", "turn", "prompt", "restored", "out", "replay t/s", "fresh t/s",
              "ratio");
  for (const Pair& p : pairs) {
    const std::string name = p.conversation + "/" + std::to_string(p.index);
    if (!p.replay.completed || !p.fresh.completed) {
      std::printf("  %-24s FAILED: %s\n", name.c_str(), (p.replay.completed ? p.fresh.why : p.replay.why).c_str());
      continue;
    }
    std::printf("  %-24s %8d %8d %5d %11.1f %11.1f %7s\n", name.c_str(), p.replay.prompt_tokens, p.replay.cached_tokens,
                p.replay.output_tokens, p.replay.tok_s(), p.fresh.tok_s(),
                p.replay.timed() && p.fresh.timed()
                    ? (std::to_string(int(100 * p.replay.tok_s() / p.fresh.tok_s() + 0.5)) + "%").c_str()
                    : "untimed");
  }
  std::printf(
      "  decode       replay %.1f tok/s, fresh %.1f tok/s over %d turns timed in both: %.3f (turns %.2f .. %.2f)\n",
      replay.tok_s(), fresh.tok_s(), timed, ratio, worst, best);
  std::printf("  TTFT p50     replay %.2f s, fresh %.2f s (what restoring the prefix saves)\n",
              quantile(replay.ttft, 0.5), quantile(fresh.ttft, 0.5));
  if (failed) std::printf("  failed       %d requests (logs in %s)\n", failed, work.path().c_str());
  if (serve_exit != 0) std::printf("  serve        ended with exit code %d\n", serve_exit);
  return ok ? 0 : 1;
}

}  // namespace ft::cli

#include "load_run.h"

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "serve_child.h"

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double mib(uint64_t bytes) { return double(bytes) / double(1 << 20); }

std::string shorten(const std::string& s, std::size_t max = 60) {
  return s.size() <= max ? s : s.substr(0, max) + "...";
}

struct Delivery {
  Outcome outcome;
  bool completed = false;
  int retries = 0;
  double total_s = 0;  // from the first try to the end of the last
  std::string why;     // when not completed
};

// Sends `request` until it completes, fails in a way no retry mends, or is still refused at
// `retry_until`; waits between tries as long as the server asked (Retry-After).
Delivery deliver(const Endpoint& server, const ReplayRequest& request, int timeout_s, Clock::time_point retry_until,
                 LoadStats* stats) {
  const auto t0 = Clock::now();
  for (int retries = 0;; ++retries) {
    Delivery d{send_replay(server, request, timeout_s), false, retries, 0, ""};
    d.total_s = since(t0);
    if (d.outcome.kind == Outcome::Kind::kCompleted) {
      d.completed = true;
      return d;
    }
    if (d.outcome.kind == Outcome::Kind::kRetryable && Clock::now() < retry_until) {
      if (stats) {
        stats->retried(d.outcome.http_status != 200 ? "HTTP " + std::to_string(d.outcome.http_status)
                                                    : "stream " + d.outcome.response.error_type);
      }
      const double pause = std::clamp(d.outcome.retry_after_s, 0.05, 30.0);
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
      continue;
    }
    d.why = d.outcome.kind == Outcome::Kind::kRetryable
                ? "still refused after " + std::to_string(int(d.total_s)) + " s of retries: " + d.outcome.why
                : d.outcome.why;
    return d;
  }
}

Clock::time_point after(Clock::time_point t, double seconds) {
  return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Stops the helper threads of a run: waits up to a period, false once stopping.
class Stopper {
 public:
  bool wait_for(double seconds) {
    std::unique_lock lock(mu_);
    return !cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stop_; });
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

// How many engines serve has said are back (restarted and listening) in its log.
std::size_t engines_back(const std::filesystem::path& serve_log) {
  std::ifstream in(serve_log);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find("the engine is back on port") != std::string::npos;
  return n;
}

// Without serve's log (a server started elsewhere): /health, which waits behind chat requests for
// one of the server's HTTP threads, so under load this overstates the time.
bool server_healthy(const Endpoint& server) {
  httplib::Client c(server.host, server.port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(60, 0);
  const auto r = c.Get("/health");
  return r && r->status == 200;
}

void print_progress(double t, const LoadStats::Snapshot& s, const RssTrack::Sample& rss, int kills) {
  std::fprintf(stderr,
               "bench load: [%4.0f s] %llu completed, %llu failed, %llu retried (%llu tries), %llu wrong; TTFT p50 "
               "%.2f s p99 %.2f s; %.1f tok/s; RSS proxy %.0f MiB, engine %.0f MiB; engine kills %d\n",
               t, static_cast<unsigned long long>(s.completed), static_cast<unsigned long long>(s.failed),
               static_cast<unsigned long long>(s.retried_requests), static_cast<unsigned long long>(s.retried),
               static_cast<unsigned long long>(s.wrong), s.ttft_p50, s.ttft_p99,
               t > 0 ? double(s.output_tokens) / t : 0.0, mib(rss.proxy), mib(rss.engine), kills);
}

}  // namespace

std::string replay_key(const Conversation& conversation, std::size_t index, int variant) {
  return conversation.name + "/" + std::to_string(index + 1) + "/" + std::to_string(variant);
}

Result<std::map<std::string, std::string>> reference_answers(const Endpoint& reference, const RunPlan& plan,
                                                             int concurrency) {
  struct Task {
    std::string key;
    ReplayRequest request;
  };
  std::vector<Task> tasks;
  for (int v = 0; v < plan.variants; ++v)
    for (const Conversation& c : plan.conversations)
      for (std::size_t i = 0; i < c.requests.size(); ++i)
        tasks.push_back({replay_key(c, i, v), make_replay(c.requests[i], v, i, plan.max_tokens)});

  std::mutex mu;
  std::map<std::string, std::string> answers;
  std::string error;
  std::atomic<std::size_t> next{0}, done{0};
  const auto t0 = Clock::now();
  auto worker = [&] {
    for (std::size_t i; (i = next++) < tasks.size();) {
      {
        std::lock_guard lock(mu);
        if (!error.empty()) return;
      }
      const Delivery d =
          deliver(reference, tasks[i].request, plan.timeout_s, after(Clock::now(), plan.drain_s), nullptr);
      std::lock_guard lock(mu);
      if (!d.completed) {
        error = "the reference server did not answer " + tasks[i].key + ": " + d.why;
        return;
      }
      answers[tasks[i].key] = d.outcome.response.answer;
      ++done;
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < std::max(1, concurrency); ++w) workers.emplace_back(worker);
  Stopper stopper;
  std::thread progress([&] {
    while (stopper.wait_for(30))
      std::fprintf(stderr, "bench load: reference answers %zu of %zu (%.0f s)\n", done.load(), tasks.size(), since(t0));
  });
  for (auto& w : workers) w.join();
  stopper.stop();
  progress.join();
  if (!error.empty()) return unavailable(error);
  return answers;
}

RunSummary run_load(const Endpoint& server, const RunPlan& plan, const Watch& watch,
                    const std::map<std::string, std::string>* expected, LoadStats& stats, RssTrack& rss) {
  const auto t0 = Clock::now();
  const auto deadline = after(t0, plan.seconds);
  // A request refused again and again (its engine killed before it finished, every time) is
  // retried until the drain after the run, when no engine is killed any more.
  const auto retry_until = after(deadline, plan.drain_s);
  std::atomic<int> kills{0};

  auto session = [&](int s) {
    const int variant = s % plan.variants;
    // Sessions of one variant start at different conversations (while there are enough), so two
    // sessions replay the same conversation at the same time only when they must.
    const std::size_t first = std::size_t(variant) + std::size_t(s / plan.variants);
    const std::size_t n = plan.conversations.size();
    for (std::size_t k = 0; Clock::now() < deadline; ++k) {
      const Conversation& c = plan.conversations[(first + k) % n];
      for (std::size_t i = 0; i < c.requests.size() && Clock::now() < deadline; ++i) {
        const ReplayRequest request = make_replay(c.requests[i], variant, i, plan.max_tokens);
        const std::string key = replay_key(c, i, variant);
        const Delivery d = deliver(server, request, plan.timeout_s, retry_until, &stats);
        if (!d.completed) {
          stats.failed(key + ": " + d.why);
          // As an agent would: a failure is shown, not resent at once (a dead server would
          // otherwise be hammered and the count say nothing more).
          std::this_thread::sleep_for(std::chrono::seconds(1));
          continue;
        }
        const ResponseSummary& r = d.outcome.response;
        stats.completed({d.outcome.ttft_s, d.outcome.latency_s, d.total_s, d.retries, request.stream, r.output_tokens,
                         r.prompt_tokens, r.cached_tokens, r.content_bytes > 0});
        if (!expected) continue;
        const auto it = expected->find(key);
        stats.compared(it != expected->end() && it->second == r.answer,
                       key + (it == expected->end()
                                  ? " (no reference)"
                                  : ": expected '" + shorten(it->second) + "', got '" + shorten(r.answer) + "'"));
      }
    }
  };

  Stopper stopper;
  std::set<pid_t> engines;
  std::mutex engines_mu;
  // RSS every few seconds; a progress line every progress_every_s.
  std::thread sampler([&] {
    double next_progress = watch.progress_every_s;
    std::set<pid_t> stopped_seen;
    do {
      RssTrack::Sample sample{since(t0), 0, 0, -1};
      if (watch.serve_pid > 0) {
        sample.proxy = resident_bytes(watch.serve_pid);
        sample.engine_pid = engine_pid_of(watch.serve_pid);
        if (sample.engine_pid > 0) sample.engine = resident_bytes(sample.engine_pid);
        if (sample.engine_pid > 0) {
          std::lock_guard lock(engines_mu);
          engines.insert(sample.engine_pid);
        }
        rss.add(sample);
        for (const pid_t pid : {watch.serve_pid, sample.engine_pid}) {
          if (pid > 0 && process_stopped(pid) && stopped_seen.insert(pid).second)
            std::fprintf(stderr, "bench load: [%4.0f s] WARNING: pid %d is stopped (SIGSTOP from outside this run)\n",
                         sample.t_s, int(pid));
        }
      }
      if (watch.progress_every_s > 0 && sample.t_s >= next_progress) {
        print_progress(sample.t_s, stats.snapshot(), sample, kills.load());
        next_progress += watch.progress_every_s;
      }
    } while (stopper.wait_for(watch.sample_every_s));
  });
  // Chaos: SIGKILL the engine every chaos_every_s (serve restarts it), and time how long until
  // the server answers /health again.
  std::vector<double> downtimes;
  std::thread chaos([&] {
    if (watch.chaos_every_s <= 0 || watch.serve_pid <= 0) return;
    for (int n = 1;; ++n) {
      const auto at = after(t0, n * watch.chaos_every_s);
      if (at >= deadline || !stopper.wait_for(std::chrono::duration<double>(at - Clock::now()).count())) return;
      pid_t engine = engine_pid_of(watch.serve_pid);
      while (engine <= 0 && Clock::now() < deadline && stopper.wait_for(0.1)) engine = engine_pid_of(watch.serve_pid);
      if (engine <= 0) return;
      const std::size_t back = watch.serve_log.empty() ? 0 : engines_back(watch.serve_log);
      kill(engine, SIGKILL);
      const auto killed = Clock::now();
      ++kills;
      std::fprintf(stderr, "bench load: [%4.0f s] chaos: SIGKILL to the engine (pid %d)\n", since(t0), int(engine));
      const auto up = [&] {
        if (!watch.serve_log.empty()) return engines_back(watch.serve_log) > back;
        const pid_t now = engine_pid_of(watch.serve_pid);
        return now > 0 && now != engine && server_healthy(server);
      };
      bool stopping = false;
      while (!up() && since(killed) < 600 && !stopping) stopping = !stopper.wait_for(0.1);
      if (!stopping) downtimes.push_back(since(killed));
    }
  });

  std::vector<std::thread> sessions;
  for (int s = 0; s < plan.sessions; ++s) sessions.emplace_back(session, s);
  for (auto& t : sessions) t.join();
  const double wall = since(t0);
  stopper.stop();
  chaos.join();
  sampler.join();
  std::lock_guard lock(engines_mu);
  return {wall, kills.load(), int(engines.size()), std::move(downtimes)};
}

}  // namespace ft::cli

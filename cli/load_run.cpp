#include "load_run.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
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
  std::string why;  // when not completed
};

// Sends `request` until it completes, fails in a way no retry mends, or has been refused for
// longer than `window_s`; waits between tries as long as the server asked (Retry-After).
Delivery deliver(const Endpoint& server, const ReplayRequest& request, int timeout_s, double window_s,
                 LoadStats* stats) {
  const auto t0 = Clock::now();
  for (;;) {
    Delivery d{send_replay(server, request, timeout_s), false, ""};
    if (d.outcome.kind == Outcome::Kind::kCompleted) {
      d.completed = true;
      return d;
    }
    if (d.outcome.kind == Outcome::Kind::kRetryable && since(t0) < window_s) {
      if (stats) {
        stats->retried(d.outcome.http_status != 200 ? "HTTP " + std::to_string(d.outcome.http_status)
                                                    : "stream " + d.outcome.response.error_type);
      }
      const double pause = std::clamp(d.outcome.retry_after_s, 0.05, 30.0);
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
      continue;
    }
    d.why = d.outcome.kind == Outcome::Kind::kRetryable
                ? "still refused after " + std::to_string(int(since(t0))) + " s of retries: " + d.outcome.why
                : d.outcome.why;
    return d;
  }
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

void print_progress(double t, const LoadStats::Snapshot& s, const RssTrack::Sample& rss, int kills) {
  std::fprintf(stderr,
               "bench load: [%4.0f s] %llu completed, %llu failed, %llu retried, %llu wrong; TTFT p50 %.2f s p99 "
               "%.2f s; %.1f tok/s; RSS proxy %.0f MiB, engine %.0f MiB; engine kills %d\n",
               t, static_cast<unsigned long long>(s.completed), static_cast<unsigned long long>(s.failed),
               static_cast<unsigned long long>(s.retried), static_cast<unsigned long long>(s.wrong), s.ttft_p50,
               s.ttft_p99, t > 0 ? double(s.output_tokens) / t : 0.0, mib(rss.proxy), mib(rss.engine), kills);
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
      const Delivery d = deliver(reference, tasks[i].request, plan.timeout_s, plan.retry_window_s, nullptr);
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
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(plan.seconds));
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
        const Delivery d = deliver(server, request, plan.timeout_s, plan.retry_window_s, &stats);
        if (!d.completed) {
          stats.failed(key + ": " + d.why);
          // As an agent would: a failure is shown, not resent at once (a dead server would
          // otherwise be hammered and the count say nothing more).
          std::this_thread::sleep_for(std::chrono::seconds(1));
          continue;
        }
        const ResponseSummary& r = d.outcome.response;
        stats.completed({d.outcome.ttft_s, d.outcome.latency_s, request.stream, r.output_tokens, r.prompt_tokens,
                         r.cached_tokens, r.content_bytes > 0});
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
      }
      if (watch.progress_every_s > 0 && sample.t_s >= next_progress) {
        print_progress(sample.t_s, stats.snapshot(), sample, kills.load());
        next_progress += watch.progress_every_s;
      }
    } while (stopper.wait_for(watch.sample_every_s));
  });
  // Chaos: SIGKILL the engine every chaos_every_s (serve restarts it).
  std::thread chaos([&] {
    if (watch.chaos_every_s <= 0 || watch.serve_pid <= 0) return;
    for (int n = 1;; ++n) {
      const auto at =
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(n * watch.chaos_every_s));
      if (at >= deadline || !stopper.wait_for(std::chrono::duration<double>(at - Clock::now()).count())) return;
      pid_t engine = engine_pid_of(watch.serve_pid);
      while (engine <= 0 && Clock::now() < deadline && stopper.wait_for(0.1)) engine = engine_pid_of(watch.serve_pid);
      if (engine <= 0) return;
      kill(engine, SIGKILL);
      ++kills;
      std::fprintf(stderr, "bench load: [%4.0f s] chaos: SIGKILL to the engine (pid %d)\n", since(t0), int(engine));
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
  return {wall, kills.load(), int(engines.size())};
}

}  // namespace ft::cli

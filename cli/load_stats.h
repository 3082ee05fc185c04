// What `bench load` counts while sessions run (thread-safe), and the memory of the server's two
// processes over time: the figures of its progress lines and of its report.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ft::cli {

// The q-quantile (0..1) of `values` by the nearest rank; 0 when empty.
double quantile(std::vector<double> values, double q);

class LoadStats {
 public:
  struct Completed {
    double ttft_s = 0;     // of the try that completed
    double latency_s = 0;  // of the try that completed
    double total_s = 0;    // from the first try on, retries and their pauses included
    int retries = 0;
    bool stream = false;
    int output_tokens = 0;
    int prompt_tokens = 0;
    int cached_tokens = 0;
    bool answered = false;  // the answer had content (greedy noise is rarely empty)
  };
  void completed(const Completed& c);
  void retried(const std::string& reason);
  void failed(const std::string& why);
  // Compared with the no-cache answer: `same` or a wrong output (a failure too).
  void compared(bool same, const std::string& what);

  struct Snapshot {
    uint64_t completed = 0, failed = 0, compared = 0, wrong = 0, answered = 0;
    uint64_t retried = 0;           // tries refused with a retryable error
    uint64_t retried_requests = 0;  // completed requests that took more than one try
    uint64_t output_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
    double ttft_p50 = 0, ttft_p99 = 0;                // every completed request
    double stream_ttft_p50 = 0, stream_ttft_p99 = 0;  // streaming requests only
    double latency_p50 = 0, latency_p99 = 0;
    double total_p50 = 0, total_p99 = 0;  // retries included
    std::map<std::string, uint64_t> retry_reasons;
    std::vector<std::string> failures;  // the first few, one line each
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> ttft_, stream_ttft_, latency_, total_;
  Snapshot totals_;
};

// VmRSS of `serve` (the proxy) and of its engine, sampled through a run.
class RssTrack {
 public:
  struct Sample {
    double t_s = 0;
    uint64_t proxy = 0, engine = 0;
    pid_t engine_pid = -1;
  };
  void add(const Sample& s);
  Sample last() const;

  // Flat: `end` is at most 10% + 32 MiB above `warm`. For one process, `warm` is its RSS at the
  // first sample from `warm_s` on (caches and pools have reached their size by then) and `end` at
  // the last. An engine that was restarted in between is a new process that grows again from its
  // start, as far as its lifetime's work takes its caches: then each lifetime that ran whole from
  // `warm_s` on (began then or later, and was killed) is summed up by its peak, `end` is the last
  // one's and `warm` the highest before it. Flat: no engine climbed above the ones before it.
  struct Verdict {
    uint64_t warm = 0, end = 0, peak = 0;
    bool flat = true;
    int processes = 0;                     // distinct processes from `warm_s` on
    std::vector<uint64_t> lifetime_peaks;  // of the whole lifetimes, when warm and end are peaks
    bool judged = true;      // false: restarted, but fewer than two whole lifetimes to compare
  };
  Verdict proxy(double warm_s) const;
  Verdict engine(double warm_s) const;

 private:
  mutable std::mutex mu_;
  std::vector<Sample> samples_;
};

nlohmann::json to_json(const RssTrack::Verdict& v);

}  // namespace ft::cli

#include "load_stats.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace ft::cli {
namespace {

constexpr std::size_t kFailuresKept = 8;
constexpr double kRssGrowthShare = 0.10;
constexpr uint64_t kRssGrowthBytes = 32ull << 20;

}  // namespace

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * double(values.size()));
  const std::size_t i = rank < 1 ? 0 : std::min(values.size() - 1, std::size_t(rank) - 1);
  return values[i];
}

void LoadStats::completed(const Completed& c) {
  std::lock_guard lock(mu_);
  ++totals_.completed;
  totals_.answered += c.answered ? 1 : 0;
  totals_.retried_requests += c.retries > 0 ? 1 : 0;
  total_.push_back(c.total_s);
  totals_.output_tokens += uint64_t(std::max(0, c.output_tokens));
  totals_.prompt_tokens += uint64_t(std::max(0, c.prompt_tokens));
  totals_.cached_tokens += uint64_t(std::max(0, c.cached_tokens));
  ttft_.push_back(c.ttft_s);
  if (c.stream) stream_ttft_.push_back(c.ttft_s);
  latency_.push_back(c.latency_s);
}

void LoadStats::retried(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++totals_.retried;
  ++totals_.retry_reasons[reason];
}

void LoadStats::failed(const std::string& why) {
  std::lock_guard lock(mu_);
  ++totals_.failed;
  if (totals_.failures.size() < kFailuresKept) totals_.failures.push_back(why);
}

void LoadStats::compared(bool same, const std::string& what) {
  std::lock_guard lock(mu_);
  ++totals_.compared;
  if (same) return;
  ++totals_.wrong;
  if (totals_.failures.size() < kFailuresKept) totals_.failures.push_back("wrong output: " + what);
}

LoadStats::Snapshot LoadStats::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s = totals_;
  s.ttft_p50 = quantile(ttft_, 0.5);
  s.ttft_p99 = quantile(ttft_, 0.99);
  s.stream_ttft_p50 = quantile(stream_ttft_, 0.5);
  s.stream_ttft_p99 = quantile(stream_ttft_, 0.99);
  s.latency_p50 = quantile(latency_, 0.5);
  s.latency_p99 = quantile(latency_, 0.99);
  s.total_p50 = quantile(total_, 0.5);
  s.total_p99 = quantile(total_, 0.99);
  return s;
}

void RssTrack::add(const Sample& s) {
  std::lock_guard lock(mu_);
  samples_.push_back(s);
}

RssTrack::Sample RssTrack::last() const {
  std::lock_guard lock(mu_);
  return samples_.empty() ? Sample{} : samples_.back();
}

namespace {

bool flat(uint64_t warm, uint64_t end) {
  return double(end) <= double(warm) * (1 + kRssGrowthShare) + double(kRssGrowthBytes);
}

}  // namespace

RssTrack::Verdict RssTrack::proxy(double warm_s) const {
  std::lock_guard lock(mu_);
  Verdict v;
  for (const Sample& s : samples_) {
    if (s.t_s < warm_s || s.proxy == 0) continue;
    if (v.processes == 0) v.warm = s.proxy;
    v.processes = 1;
    v.end = s.proxy;
    v.peak = std::max(v.peak, s.proxy);
  }
  v.flat = flat(v.warm, v.end);
  return v;
}

RssTrack::Verdict RssTrack::engine(double warm_s) const {
  std::lock_guard lock(mu_);
  struct Lifetime {
    pid_t pid;
    bool whole;  // began from warm_s on, and ended before the run did
    uint64_t peak = 0;
  };
  std::vector<Lifetime> lives;
  Verdict v;
  std::set<pid_t> seen;
  for (const Sample& s : samples_) {
    if (s.engine == 0) continue;  // being restarted
    if (lives.empty() || lives.back().pid != s.engine_pid) lives.push_back({s.engine_pid, s.t_s >= warm_s, 0});
    lives.back().peak = std::max(lives.back().peak, s.engine);
    if (s.t_s < warm_s) continue;
    v.peak = std::max(v.peak, s.engine);
    seen.insert(s.engine_pid);
  }
  if (!lives.empty()) lives.back().whole = false;  // still running at the end
  v.processes = int(seen.size());
  for (const Lifetime& l : lives)
    if (l.whole) v.lifetime_peaks.push_back(l.peak);
  if (v.processes > 1 && v.lifetime_peaks.size() >= 2) {
    v.end = v.lifetime_peaks.back();
    v.warm = *std::max_element(v.lifetime_peaks.begin(), v.lifetime_peaks.end() - 1);
  } else {
    v.lifetime_peaks.clear();
    // One process from warm-up on; restarted without two whole lifetimes, samples of different
    // processes at different ages say nothing about growth.
    v.judged = v.processes <= 1;
    for (const Sample& s : samples_) {
      if (s.t_s < warm_s || s.engine == 0) continue;
      if (v.warm == 0) v.warm = s.engine;
      v.end = s.engine;
    }
  }
  v.flat = flat(v.warm, v.end);
  return v;
}

nlohmann::json to_json(const RssTrack::Verdict& v) {
  auto mib = [](uint64_t b) { return double(b) / double(1 << 20); };
  nlohmann::json peaks = nlohmann::json::array();
  for (uint64_t p : v.lifetime_peaks) peaks.push_back(mib(p));
  return {{"warm_mib", mib(v.warm)}, {"end_mib", mib(v.end)},    {"peak_mib", mib(v.peak)},    {"flat", v.flat},
          {"judged", v.judged},      {"processes", v.processes}, {"lifetime_peaks_mib", peaks}};
}

}  // namespace ft::cli

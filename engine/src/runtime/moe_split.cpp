#include "ft/engine/moe_split.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

namespace ft::engine {

std::string MoePolicy::name() const {
  switch (kind) {
    case Kind::kAdaptive:
      return "adaptive";
    case Kind::kFetch:
      return "fetch";
    case Kind::kCpu:
      return "cpu";
    case Kind::kDirect: {
      if (auto_share) return "direct:auto";
      if (ratio <= 0) return "direct";
      char buf[32];
      std::snprintf(buf, sizeof buf, "direct:%g", ratio);
      return buf;
    }
    case Kind::kRatio: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "ratio:%g", ratio);
      return buf;
    }
  }
  return "adaptive";
}

Result<MoePolicy> parse_moe_policy(std::string_view text) {
  MoePolicy p;
  if (text == "adaptive") return p;
  if (text == "fetch") {
    p.kind = MoePolicy::Kind::kFetch;
    return p;
  }
  if (text == "cpu") {
    p.kind = MoePolicy::Kind::kCpu;
    return p;
  }
  if (text == "direct" || text == "direct:auto") {
    p.kind = MoePolicy::Kind::kDirect;
    p.auto_share = text == "direct:auto";
    return p;
  }
  for (const auto& [prefix, kind] : {std::pair{std::string_view("ratio:"), MoePolicy::Kind::kRatio},
                                     std::pair{std::string_view("direct:"), MoePolicy::Kind::kDirect}}) {
    if (!text.starts_with(prefix)) continue;
    const std::string_view q = text.substr(prefix.size());
    double v = -1;
    const auto [end, ec] = std::from_chars(q.data(), q.data() + q.size(), v);
    if (ec == std::errc() && end == q.data() + q.size() && v >= 0 && v <= 1) {
      p.kind = kind;
      p.ratio = v;
      return p;
    }
  }
  return invalid_argument(
      "--moe-policy must be adaptive, fetch, cpu, ratio:Q, direct[:Q] with Q in [0, 1] or direct:auto, not '" +
      std::string(text) + "'");
}

double split_seconds(const SplitCosts& c, std::span<const SplitMiss> fetch, std::span<const SplitMiss> cpu,
                     std::size_t expert_bytes, int committed) {
  const std::size_t fetches = fetch.size() + std::size_t(std::max(committed, 0));
  const bool both = fetches > 0 && !cpu.empty();
  const double pcie = (both && c.pcie_shared_gbps > 0 ? c.pcie_shared_gbps : c.pcie_gbps) * 1e9;
  const double cpu_bw = (both && c.cpu_shared_gbps > 0 ? c.cpu_shared_gbps : c.cpu_gbps) * 1e9;
  const double fetch_s = double(fetches) * (double(expert_bytes) / pcie + c.fetch_overhead_s);
  double cpu_s = cpu.empty() ? 0 : c.cpu_overhead_s;
  for (const SplitMiss& m : cpu) cpu_s += double(expert_bytes) / cpu_bw + double(m.tokens) * c.cpu_token_s;
  return std::max(fetch_s, cpu_s);
}

SplitPlan plan_split(const MoePolicy& policy, const SplitCosts& costs, std::span<const SplitMiss> misses,
                     std::size_t expert_bytes, int max_fetch, int committed) {
  std::vector<SplitMiss> order(misses.begin(), misses.end());
  // Busiest first, then by expert id: the same misses always split the same way.
  std::stable_sort(order.begin(), order.end(), [](const SplitMiss& a, const SplitMiss& b) {
    return a.tokens != b.tokens ? a.tokens > b.tokens : a.expert < b.expert;
  });
  const int M = int(order.size()), cap = std::clamp(max_fetch, 0, M);
  int F = 0;
  switch (policy.kind) {
    case MoePolicy::Kind::kFetch:
    case MoePolicy::Kind::kDirect:  // reads its misses in place and never splits; asked anyway, it fetches
      F = cap;
      break;
    case MoePolicy::Kind::kCpu:
      F = 0;
      break;
    case MoePolicy::Kind::kRatio:
      F = std::min(cap, int(policy.ratio * M + 0.5));
      break;
    case MoePolicy::Kind::kAdaptive: {
      double best = -1;
      for (int f = 0; f <= cap; ++f) {
        const std::span<const SplitMiss> all(order);
        const double t =
            split_seconds(costs, all.first(std::size_t(f)), all.subspan(std::size_t(f)), expert_bytes, committed);
        if (best < 0 || t <= best) {
          best = t;
          F = f;
        }
      }
      break;
    }
  }
  SplitPlan plan;
  for (int i = 0; i < M; ++i) (i < F ? plan.fetch : plan.cpu).push_back(order[std::size_t(i)].expert);
  const std::span<const SplitMiss> all(order);
  plan.predicted_s =
      split_seconds(costs, all.first(std::size_t(F)), all.subspan(std::size_t(F)), expert_bytes, committed);
  return plan;
}

namespace {

constexpr double kAlpha = 0.1;  // weight of a new measurement

void blend(double& rate, double measured) {
  if (measured > 0) rate = rate > 0 ? (1 - kAlpha) * rate + kAlpha * measured : measured;
}

}  // namespace

void SplitModel::observe_fetch(std::size_t bytes, int experts, double seconds, bool concurrent) {
  const double transfer = seconds - double(experts) * c_.fetch_overhead_s;
  if (bytes == 0 || transfer <= 0) return;
  blend(concurrent && c_.pcie_shared_gbps > 0 ? c_.pcie_shared_gbps : c_.pcie_gbps, double(bytes) / transfer / 1e9);
}

void SplitModel::observe_cpu(std::size_t bytes, double seconds, bool concurrent) {
  const double work = seconds - c_.cpu_overhead_s;
  if (bytes == 0 || work <= 0) return;
  blend(concurrent && c_.cpu_shared_gbps > 0 ? c_.cpu_shared_gbps : c_.cpu_gbps, double(bytes) / work / 1e9);
}

}  // namespace ft::engine

#include "ft/engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ft::engine {
namespace {

bool is_greedy(const SamplingParams& p) { return p.greedy || p.temperature <= 0.0f; }

// softmax over the entries that are not -inf.
std::vector<double> softmax(const std::vector<double>& scores) {
  double m = -std::numeric_limits<double>::infinity();
  for (double s : scores) m = std::max(m, s);
  std::vector<double> p(scores.size());
  double sum = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) sum += p[i] = std::isinf(scores[i]) ? 0.0 : std::exp(scores[i] - m);
  for (double& v : p) v /= sum;
  return p;
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<float> sampling_distribution(std::span<const float> logits, const SamplingParams& params) {
  const std::size_t n = logits.size();
  std::vector<float> out(n, 0.0f);
  if (n == 0) return out;
  if (is_greedy(params)) {
    out[std::size_t(argmax(logits))] = 1.0f;
    return out;
  }
  const double kMasked = -std::numeric_limits<double>::infinity();
  std::vector<double> scores(n);
  for (std::size_t i = 0; i < n; ++i) scores[i] = double(logits[i]) / double(params.temperature);

  // Indices by descending score; ties by index so the result does not depend on the sort.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });

  if (params.top_k > 0 && std::size_t(params.top_k) < n) {
    // HF TopKLogitsWarper: remove scores < the k-th largest (ties with it survive).
    const double kth = scores[order[std::size_t(params.top_k) - 1]];
    for (double& s : scores) {
      if (s < kth) s = kMasked;
    }
  }
  if (params.top_p < 1.0f) {
    // HF TopPLogitsWarper: walking from the top, keep tokens until their cumulative probability
    // reaches top_p (the token that crosses it is kept); always keep the top one.
    const std::vector<double> p = softmax(scores);
    double cum = 0;
    bool done = false;
    for (std::size_t r = 0; r < n; ++r) {
      const std::size_t i = order[r];
      if (done) {
        scores[i] = kMasked;
        continue;
      }
      cum += p[i];
      if (cum >= double(params.top_p)) done = true;
    }
  }
  if (params.min_p > 0.0f) {
    // HF MinPLogitsWarper: drop probabilities below min_p * the top probability.
    const std::vector<double> p = softmax(scores);
    const double threshold = double(params.min_p) * p[order[0]];
    for (std::size_t i = 0; i < n; ++i) {
      if (p[i] < threshold) scores[i] = kMasked;
    }
  }
  const std::vector<double> p = softmax(scores);
  for (std::size_t i = 0; i < n; ++i) out[i] = float(p[i]);
  return out;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), state_(params.seed ^ 0x6a09e667f3bcc909ull) {}

int32_t Sampler::sample(std::span<const float> logits) {
  if (is_greedy(params_)) return argmax(logits);
  const std::vector<float> p = sampling_distribution(logits, params_);
  // splitmix64 step -> uniform in [0, 1).
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double u = double(z >> 11) * (1.0 / 9007199254740992.0);
  double total = 0;
  for (float v : p) total += v;
  double cum = 0, target = u * total;
  int32_t last_nonzero = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0.0f) continue;
    last_nonzero = int32_t(i);
    cum += p[i];
    if (target < cum) return int32_t(i);
  }
  return last_nonzero;  // rounding left target at the very top
}

bool is_stop_token(int32_t token, std::span<const int32_t> stop_ids) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

}  // namespace ft::engine

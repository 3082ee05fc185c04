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

// The definition: HF generate's warpers over a full sort of the vocabulary (tests only).
std::vector<float> sampling_distribution_reference(std::span<const float> logits, const SamplingParams& params) {
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

namespace {

// The tokens a distribution keeps (index order) and their probabilities.
struct Kept {
  std::vector<std::size_t> index;
  std::vector<float> p;
};

// The distribution without sorting the vocabulary: top-k from a selection, top-p from a sort of
// only the top few tokens (more only when they do not reach top_p), and each softmax over only the
// tokens still alive, in index order: the reference's sums with its zeros left out, so the result
// equals it bit for bit (tests hold it to that). Vocabulary-sized buffers are kept per thread: a
// fresh megabyte a token costs more in page faults than the arithmetic.
void keep(std::span<const float> logits, const SamplingParams& params, Kept& kept_out) {
  const std::size_t n = logits.size();
  thread_local std::vector<double> scores, p, p_of;
  thread_local std::vector<std::size_t> alive, order;
  scores.resize(n);
  for (std::size_t i = 0; i < n; ++i) scores[i] = double(logits[i]) / double(params.temperature);
  // Descending score, ties by index: the reference's stable sort order.
  const auto before = [&](std::size_t a, std::size_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  alive.resize(n);  // the tokens not masked yet, in index order
  std::iota(alive.begin(), alive.end(), 0);
  const auto softmax_alive = [&] {  // p[j] for alive[j], summed in index order
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t i : alive) m = std::max(m, scores[i]);
    p.resize(alive.size());
    double sum = 0;
    for (std::size_t j = 0; j < alive.size(); ++j) sum += p[j] = std::exp(scores[alive[j]] - m);
    for (double& v : p) v /= sum;
  };
  const auto top = [&](std::size_t m) {  // the first m alive tokens in `before` order, sorted
    order.assign(alive.begin(), alive.end());
    m = std::min(m, order.size());
    std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(m - 1), order.end(), before);
    order.resize(m);
    std::sort(order.begin(), order.end(), before);
  };
  const auto keep_if = [&](auto&& pred) {  // alive = the alive tokens (j-th) that pass
    std::size_t w = 0;
    for (std::size_t j = 0; j < alive.size(); ++j) {
      if (pred(j)) alive[w++] = alive[j];
    }
    alive.resize(w);
  };

  if (params.top_k > 0 && std::size_t(params.top_k) < n) {
    top(std::size_t(params.top_k));
    const double kth = scores[order.back()];
    keep_if([&](std::size_t j) { return scores[alive[j]] >= kth; });
  }
  if (params.top_p < 1.0f) {
    softmax_alive();
    p_of.resize(n);
    for (std::size_t j = 0; j < alive.size(); ++j) p_of[alive[j]] = p[j];
    for (std::size_t m = 256;; m *= 8) {
      top(m);
      double cum = 0;
      std::size_t kept = order.size();
      for (std::size_t r = 0; r < order.size(); ++r) {
        cum += p_of[order[r]];
        if (cum >= double(params.top_p)) {
          kept = r + 1;
          break;
        }
      }
      if (kept == order.size() && order.size() < alive.size()) continue;  // not reached: look further down
      order.resize(kept);
      std::sort(order.begin(), order.end());
      alive.assign(order.begin(), order.end());
      break;
    }
  }
  if (params.min_p > 0.0f) {
    softmax_alive();
    // The top token (lowest index among the highest scores) is alive: top-k and top-p keep it.
    std::size_t best = 0;
    for (std::size_t j = 1; j < alive.size(); ++j) {
      if (scores[alive[j]] > scores[alive[best]]) best = j;
    }
    const double threshold = double(params.min_p) * p[best];
    keep_if([&](std::size_t j) { return !(p[j] < threshold); });
  }
  softmax_alive();
  kept_out.index.assign(alive.begin(), alive.end());
  kept_out.p.resize(alive.size());
  for (std::size_t j = 0; j < alive.size(); ++j) kept_out.p[j] = float(p[j]);
}

}  // namespace

std::vector<float> sampling_distribution(std::span<const float> logits, const SamplingParams& params) {
  std::vector<float> out(logits.size(), 0.0f);
  if (logits.empty()) return out;
  if (is_greedy(params)) {
    out[std::size_t(argmax(logits))] = 1.0f;
    return out;
  }
  Kept k;
  keep(logits, params, k);
  for (std::size_t j = 0; j < k.index.size(); ++j) out[k.index[j]] = k.p[j];
  return out;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), state_(params.seed ^ 0x6a09e667f3bcc909ull) {}

SampleRequest Sampler::request() {
  SampleRequest r{params_, 0.0};
  if (is_greedy(params_)) return r;
  // splitmix64 step -> uniform in [0, 1).
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  r.u = double(z >> 11) * (1.0 / 9007199254740992.0);
  return r;
}

int32_t Sampler::pick(std::span<const float> logits, const SampleRequest& request) {
  if (is_greedy(request.params)) return argmax(logits);
  thread_local Kept k;
  keep(logits, request.params, k);
  // The walk over the distribution in index order, its zeros left out (they change no sum).
  double total = 0;
  for (float v : k.p) total += v;
  double cum = 0, target = request.u * total;
  int32_t last_nonzero = 0;
  for (std::size_t j = 0; j < k.index.size(); ++j) {
    if (k.p[j] <= 0.0f) continue;
    last_nonzero = int32_t(k.index[j]);
    cum += k.p[j];
    if (target < cum) return int32_t(k.index[j]);
  }
  return last_nonzero;  // rounding left target at the very top
}

int32_t Sampler::sample(std::span<const float> logits) { return pick(logits, request()); }

bool is_stop_token(int32_t token, std::span<const int32_t> stop_ids) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

}  // namespace ft::engine

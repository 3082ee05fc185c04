// Next-token selection from a logits row: greedy, or sampling with temperature, top-k, top-p and
// min-p applied in HF generate's order (temperature -> top-k -> top-p -> min-p), from a seeded RNG
// so a (seed, logits sequence) pair always yields the same tokens on every platform.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ft::engine {

struct SamplingParams {
  bool greedy = false;       // argmax; the fields below are ignored
  float temperature = 1.0f;  // logits / temperature; <= 0 means greedy
  int top_k = 0;             // keep the k highest logits (ties with the k-th kept); 0: off
  float top_p = 1.0f;        // keep the smallest set of top tokens whose probability >= top_p; 1: off
  float min_p = 0.0f;        // drop tokens with probability < min_p * max probability; 0: off
  uint64_t seed = 0;
};

// Index of the largest logit (the lowest index among equal maxima, as torch.argmax).
int32_t argmax(std::span<const float> logits);

// The distribution sample() draws from: softmax(logits / temperature) with the masked tokens at
// 0, renormalised. At least one token always survives. Greedy params give a one-hot at argmax.
std::vector<float> sampling_distribution(std::span<const float> logits, const SamplingParams& params);
// The same from a full sort of the vocabulary, as HF's warpers do it: the definition the one above
// is held to, bit for bit (it selects and sorts only the top tokens).
std::vector<float> sampling_distribution_reference(std::span<const float> logits, const SamplingParams& params);

// One token to draw from a row of logits: the parameters and the draw u in [0, 1) the sampler made
// for it (a backend that samples on its own device needs only these).
struct SampleRequest {
  SamplingParams params;
  double u = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // One token from `logits`; advances the RNG by exactly one draw when sampling.
  int32_t sample(std::span<const float> logits);
  // The same in two halves: the request for the next token (the RNG advanced by one draw when
  // sampling, none when greedy), and the token a request picks from `logits`. sample(l) ==
  // pick(l, request()) with the same RNG state.
  SampleRequest request();
  static int32_t pick(std::span<const float> logits, const SampleRequest& request);
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  uint64_t state_;
};

// Whether `token` is one of the stop ids (generation_config.json eos_token_id).
bool is_stop_token(int32_t token, std::span<const int32_t> stop_ids);

}  // namespace ft::engine

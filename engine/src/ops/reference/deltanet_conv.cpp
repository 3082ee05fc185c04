// Causal depthwise short convolution + SiLU with a carried state (HF torch_causal_conv1d_update
// and the F.conv1d(padding=K-1) prefill path, which is the same thing from a zero state).
#include <cassert>
#include <cstring>

#include "ft/engine/ops_deltanet.h"
#include "ops/reference/deltanet_internal.h"

namespace ft::engine::ref {

void causal_conv1d_silu(const float* x, std::size_t T, std::size_t channels, const float* weight,
                        std::size_t K, float* state, float* out) {
  assert(K >= 1 && x != out);
  const std::size_t S = K - 1;  // state columns
  // Window of output t is x_ext[t .. t+K-1] where x_ext = [S state columns ; T input rows].
  // Summing the taps in the same order whatever their source makes the split invariance exact.
  for (std::size_t t = 0; t < T; ++t) {
    float* o = out + t * channels;
    if (t >= S) {  // the whole window lies in x: contiguous rows, vectorises across channels
      const float* base = x + (t - S) * channels;
      for (std::size_t c = 0; c < channels; ++c) o[c] = 0.f;
      for (std::size_t j = 0; j < K; ++j) {
        const float* row = base + j * channels;
        for (std::size_t c = 0; c < channels; ++c) o[c] += weight[c * K + j] * row[c];
      }
    } else {  // the window starts in the state
      for (std::size_t c = 0; c < channels; ++c) o[c] = 0.f;
      for (std::size_t j = 0; j < K; ++j) {
        const std::size_t p = t + j;  // position in x_ext
        if (p < S) {
          for (std::size_t c = 0; c < channels; ++c) o[c] += weight[c * K + j] * state[c * S + p];
        } else {
          const float* row = x + (p - S) * channels;
          for (std::size_t c = 0; c < channels; ++c) o[c] += weight[c * K + j] * row[c];
        }
      }
    }
    for (std::size_t c = 0; c < channels; ++c) o[c] = dn::silu(o[c]);
  }
  // New state = x_ext[T .. T+S-1]. Index T+i > i, so shifting old columns left in place is safe.
  for (std::size_t c = 0; c < channels; ++c) {
    float* st = state + c * S;
    for (std::size_t i = 0; i < S; ++i) {
      const std::size_t p = T + i;
      st[i] = p < S ? st[p] : x[(p - S) * channels + c];
    }
  }
}

void causal_conv1d_silu_step(const float* x, std::size_t channels, const float* weight,
                             std::size_t K, float* state, float* out) {
  assert(K >= 1 && x != out);
  const std::size_t S = K - 1;
  for (std::size_t c = 0; c < channels; ++c) {
    const float* w = weight + c * K;
    float* st = state + c * S;
    float acc = 0.f;  // same tap order as causal_conv1d_silu, so the two agree bit for bit
    for (std::size_t j = 0; j < S; ++j) acc += w[j] * st[j];
    acc += w[S] * x[c];
    out[c] = dn::silu(acc);
    if (S > 0) {
      std::memmove(st, st + 1, (S - 1) * sizeof(float));
      st[S - 1] = x[c];
    }
  }
}

}  // namespace ft::engine::ref

#include <algorithm>
#include <cmath>
#include <vector>

#include "ft/engine/ops.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_compressor.h"

namespace ft::engine::ref {

void rope_tail(float* x, std::size_t heads, std::size_t dim, std::size_t rope_dims, const float* inv_freq, int64_t pos,
               bool inverse) {
  // The GPT-J rotation of the first rotary_dim dims, applied at the tail's offset.
  RopeSpec spec;
  spec.head_dim = rope_dims;
  spec.rotary_dim = rope_dims;
  spec.layout = RopeLayout::kGptj;
  const std::size_t half = rope_dims / 2;
  std::vector<float> cos_t(half), sin_t(half);
  const float p = float(pos);
  for (std::size_t i = 0; i < half; ++i) {
    const float angle = inv_freq[i] * p;
    cos_t[i] = std::cos(angle);
    sin_t[i] = inverse ? -std::sin(angle) : std::sin(angle);
  }
  for (std::size_t h = 0; h < heads; ++h)
    rope_rotate(x + h * dim + (dim - rope_dims), cos_t.data(), sin_t.data(), spec);
}

namespace {

// The entry of the window whose m raw rows fill state.kv / state.gate, appended to out; then the
// state moves on to the next window (CSA: this window's Ca is carried for it).
void close_window(const float* bias, const float* norm_weight, const float* inv_freq, const CompressorSpec& spec,
                  CompressorState& st, std::vector<float>& out) {
  const std::size_t m = spec.rate, W = spec.width, row = spec.row();
  // The window's slots with a weight, as (kv, gate + bias) rows of W: CSA's carried Ca first (none
  // in window 0: HF gives those slots kv 0 and gate -inf, weight 0, which adds nothing), then this
  // window's own series (Cb for CSA, at offset W of the row).
  const bool carried = spec.overlap && !st.prev_kv.empty();
  const std::size_t slots = carried ? 2 * m : m;
  std::vector<float> kv(slots * W), z(slots * W);
  std::size_t s = 0;
  if (carried) {
    std::copy(st.prev_kv.begin(), st.prev_kv.end(), kv.begin());
    std::copy(st.prev_gate.begin(), st.prev_gate.end(), z.begin());
    s = m;
  }
  const std::size_t own = spec.overlap ? W : 0;
  for (std::size_t j = 0; j < m; ++j, ++s) {
    for (std::size_t c = 0; c < W; ++c) {
      kv[s * W + c] = st.kv[j * row + own + c];
      z[s * W + c] = st.gate[j * row + own + c] + bias[j * row + own + c];
    }
  }

  // Per channel: softmax over the slots in fp32, normalised before the weighted sum (HF multiplies
  // kv by the softmax, then sums over the slots).
  const std::size_t first = out.size();
  out.resize(first + W);
  float* entry = out.data() + first;
  std::vector<float> p(slots);
  for (std::size_t c = 0; c < W; ++c) {
    float max = z[c];
    for (std::size_t j = 1; j < slots; ++j) max = std::max(max, z[j * W + c]);
    float sum = 0.0f;
    for (std::size_t j = 0; j < slots; ++j) {
      p[j] = std::exp(z[j * W + c] - max);
      sum += p[j];
    }
    float acc = 0.0f;
    for (std::size_t j = 0; j < slots; ++j) acc += kv[j * W + c] * (p[j] / sum);
    entry[c] = acc;
  }
  rms_norm(entry, norm_weight, entry, 1, W, spec.norm_eps, false);
  rope_tail(entry, 1, W, spec.rope_dims, inv_freq, st.entries * int64_t(m));

  if (spec.overlap) {
    // The next window's Ca slots: this window's Ca kv and gate, the gate with its bias (§4 overlap).
    st.prev_kv.resize(m * W);
    st.prev_gate.resize(m * W);
    for (std::size_t j = 0; j < m; ++j) {
      for (std::size_t c = 0; c < W; ++c) {
        st.prev_kv[j * W + c] = st.kv[j * row + c];
        st.prev_gate[j * W + c] = st.gate[j * row + c] + bias[j * row + c];
      }
    }
  }
  st.kv.clear();
  st.gate.clear();
  ++st.entries;
}

}  // namespace

std::size_t compress(const float* kv, const float* gate, std::size_t T, const float* position_bias,
                     const float* norm_weight, const float* inv_freq, const CompressorSpec& spec,
                     CompressorState& state, std::vector<float>& entries) {
  const std::size_t row = spec.row();
  const int64_t before = state.entries;
  for (std::size_t t = 0; t < T; ++t) {
    state.kv.insert(state.kv.end(), kv + t * row, kv + (t + 1) * row);
    state.gate.insert(state.gate.end(), gate + t * row, gate + (t + 1) * row);
    if (state.open_tokens(spec) == spec.rate) close_window(position_bias, norm_weight, inv_freq, spec, state, entries);
  }
  return std::size_t(state.entries - before);
}

void compress_rows(const float* kv, const float* gate, std::size_t T, int64_t pos0, const float* position_bias,
                   const float* norm_weight, const float* inv_freq, const CompressorSpec& spec, float* ring_kv,
                   float* ring_gate, std::size_t ld, float* entries) {
  const std::size_t m = spec.rate, W = spec.width, row = spec.row(), R = spec.ring_tokens();
  const auto at = [&](float* ring, int64_t p) { return ring + std::size_t(p % int64_t(R)) * ld; };
  // The state compress() would hold after pos0 tokens, from the rows the ring keeps of them.
  CompressorState st;
  st.entries = pos0 / int64_t(m);
  const int64_t open0 = st.entries * int64_t(m);
  for (int64_t p = open0; p < pos0; ++p) {
    st.kv.insert(st.kv.end(), at(ring_kv, p), at(ring_kv, p) + row);
    st.gate.insert(st.gate.end(), at(ring_gate, p), at(ring_gate, p) + row);
  }
  if (spec.overlap && st.entries > 0) {
    st.prev_kv.resize(m * W);
    st.prev_gate.resize(m * W);
    for (std::size_t j = 0; j < m; ++j) {
      const int64_t p = open0 - int64_t(m) + int64_t(j);
      for (std::size_t c = 0; c < W; ++c) {
        st.prev_kv[j * W + c] = at(ring_kv, p)[c];
        st.prev_gate[j * W + c] = at(ring_gate, p)[c] + position_bias[j * row + c];
      }
    }
  }
  std::vector<float> made;
  compress(kv, gate, T, position_bias, norm_weight, inv_freq, spec, st, made);
  std::fill(entries, entries + T * W, 0.0f);
  // Entry w closes with token w * m + m - 1: the n-th new one with the n-th closing token of the pass.
  std::size_t next = 0;
  for (std::size_t t = 0; t < T; ++t) {
    if ((pos0 + int64_t(t) + 1) % int64_t(m) != 0) continue;
    std::copy_n(made.data() + next * W, W, entries + t * W);
    ++next;
  }
  for (std::size_t t = T > R ? T - R : 0; t < T; ++t) {
    std::copy_n(kv + t * row, row, at(ring_kv, pos0 + int64_t(t)));
    std::copy_n(gate + t * row, row, at(ring_gate, pos0 + int64_t(t)));
  }
}

}  // namespace ft::engine::ref

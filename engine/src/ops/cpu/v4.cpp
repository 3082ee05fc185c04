#include "ops/cpu/v4.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "ft/engine/bf16.h"

namespace ft::engine::cpu {
namespace {

// fn(begin, end) over token ranges: the hyper-connections' work is per token.
template <typename Fn>
void per_token(std::size_t T, const Fn& fn) {
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, T, 4),
                    [&](const tbb::blocked_range<std::size_t>& r) { fn(r.begin(), r.end()); });
}

// `width` values of the K (or, with `value`, V) row of position `pos` in `layer`, from slot `slot`
// on (a row wider than a slot continues in the next slot's block), as fp32.
void read_row(const KvLayout& l, int64_t layer, std::byte* const* pages, int64_t pos, int64_t slot, bool value,
              std::size_t width, float* out) {
  const std::size_t D = std::size_t(l.head_dim_at(layer)), P = std::size_t(l.page_tokens);
  const std::byte* page = pages[pos / l.page_tokens];
  const std::size_t i = std::size_t(pos % l.page_tokens);
  for (std::size_t d0 = 0; d0 < width; d0 += D) {
    const int64_t s = slot + int64_t(d0 / D);
    const std::byte* block = page + (value ? l.v_offset(layer, s) : l.k_offset(layer, s));
    for (std::size_t d = d0; d < std::min(width, d0 + D); ++d) {
      const std::size_t at = value ? (d - d0) * P + i : i * D + (d - d0);
      if (l.dtype == KvDType::kF32) {
        std::memcpy(&out[d], block + at * 4, 4);
      } else {
        bf16_t b;
        std::memcpy(&b, block + at * 2, 2);
        out[d] = bf16_to_f32(b);
      }
    }
  }
}

// Rows of positions first + j, j < n, into out [n, width].
void read_rows(const KvLayout& l, int64_t layer, std::byte* const* pages, int64_t first, std::size_t n, int64_t slot,
               bool value, std::size_t width, float* out) {
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, 16), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t j = r.begin(); j < r.end(); ++j)
      read_row(l, layer, pages, first + int64_t(j), slot, value, width, out + j * width);
  });
}

// The compressed entries of a sequence holding `tokens` positions: entry e sits at the position
// closing its window, e * rate + rate - 1. out [tokens / rate, width].
std::size_t read_entries(const KvLayout& l, int64_t layer, std::byte* const* pages, int64_t tokens, std::size_t rate,
                         int64_t slot, bool value, std::size_t width, float* out) {
  const std::size_t n = std::size_t(tokens) / rate;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, 16), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t e = r.begin(); e < r.end(); ++e)
      read_row(l, layer, pages, int64_t((e + 1) * rate - 1), slot, value, width, out + e * width);
  });
  return n;
}

}  // namespace

void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
            const HyperSpec& spec, float* x, float* post, float* comb) {
  const std::size_t N = spec.streams, D = spec.dim;
  per_token(T, [&](std::size_t a, std::size_t b) {
    ref::hc_pre(h + a * N * D, fn, base, scale, b - a, spec, x + a * D, post + a * N, comb + a * N * N);
  });
}

void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
             const HyperSpec& spec, float* h_new) {
  const std::size_t N = spec.streams, D = spec.dim;
  per_token(T, [&](std::size_t a, std::size_t b) {
    ref::hc_post(h + a * N * D, out + a * D, post + a * N, comb + a * N * N, b - a, spec, h_new + a * N * D);
  });
}

void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
             const HyperSpec& spec, float* y) {
  const std::size_t N = spec.streams, D = spec.dim;
  per_token(
      T, [&](std::size_t a, std::size_t b) { ref::hc_head(h + a * N * D, fn, base, scale, b - a, spec, y + a * D); });
}

void v4_index_select(Scratch& scratch, const KvLayout& layout, int64_t layer, const float* q, const float* w,
                     const IndexerSpec& spec, std::size_t rate, std::span<const AttentionSeq> seqs, int32_t* picks) {
  const std::size_t Hi = spec.heads, Di = spec.head_dim, K = spec.top_k;
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch);
    // The sequence's index keys, read once for all its rows.
    const int64_t tokens = s.pos0 + int64_t(s.rows);
    float* keys = scratch.floats(std::max<std::size_t>(std::size_t(tokens) / rate, 1) * Di);
    const std::size_t n = read_entries(layout, layer, s.pages, tokens, rate, spec.kv_slot, false, Di, keys);
    tbb::parallel_for(std::size_t(0), s.rows, [&](std::size_t r) {
      const std::size_t row = s.row0 + r;
      ref::v4_index_select(q + row * Hi * Di, w + row * Hi, keys, n, s.pos0 + int64_t(r), rate, spec, picks + row * K);
    });
  }
}

void v4_attention(Scratch& scratch, const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                  const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs, const int32_t* picks,
                  std::size_t top_k, float* out) {
  const std::size_t d = spec.head_dim, row_width = spec.heads * d;
  AttentionOptions window;
  window.window = spec.window;
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch);
    const int64_t end = s.pos0 + int64_t(s.rows), first = window.first_key(s.pos0);
    // Every key the pass's rows see: the window of its first row through its last row, then the
    // entries (values of slot 0).
    const std::size_t n_window = std::size_t(end - first);
    float* kv = scratch.floats(n_window * d);
    read_rows(layout, layer, s.pages, first, n_window, 0, false, d, kv);
    float* entries = scratch.floats(std::max<std::size_t>(spec.rate ? std::size_t(end) / spec.rate : 0, 1) * d);
    const std::size_t n = spec.rate ? read_entries(layout, layer, s.pages, end, spec.rate, 0, true, d, entries) : 0;
    std::vector<int32_t> all(n);  // HCA: entries 0 .. visible - 1 of each row
    std::iota(all.begin(), all.end(), 0);
    tbb::parallel_for(std::size_t(0), s.rows, [&](std::size_t r) {
      const std::size_t row = s.row0 + r;
      const int64_t pos = s.pos0 + int64_t(r), from = window.first_key(pos);
      V4RowKeys keys;
      keys.window = kv + std::size_t(from - first) * d;
      keys.window_rows = std::size_t(pos - from + 1);
      keys.entries = entries;
      keys.n_entries = n;
      if (picks) {
        keys.visible = picks + row * top_k;
        keys.n_visible = top_k;
      } else if (spec.rate > 0) {
        keys.visible = all.data();
        keys.n_visible = std::min(v4_causal_entries(pos, spec.rate), n);
      }
      ref::v4_attention_row(q + row * row_width, keys, sinks, inv_freq, pos, spec, out + row * row_width);
    });
  }
}

}  // namespace ft::engine::cpu

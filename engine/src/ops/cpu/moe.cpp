#include "ops/cpu/moe.h"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "ft/engine/ops_moe.h"
#include "ops/cpu/amx.h"
#include "ops/cpu/dequant_rows.h"
#include "ops/cpu/dots.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/int8_dots.h"
#include "ops/cpu/int8_tiles.h"
#include "ops/cpu/linear.h"

namespace ft::engine::cpu {
namespace {

constexpr std::size_t kRowsPerItem = 32;  // weight rows of one expert per work item

// A call's phases (CpuMoePhases), where asked for: mark() adds the time since the last mark to a
// phase, items() wraps a loop's body so that its items' time adds to the threads' busy time. It also
// raises `loops_begun` once, at the mark that ends the preparation (where the first loop begins) or
// at the call's end: the moment CpuExperts::warm's threads stop spinning.
class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PhaseClock(CpuMoePhases* p, std::atomic<unsigned>* loops_begun = nullptr)
      : p_(p), loops_begun_(loops_begun), t_(p ? Clock::now() : Clock::time_point{}) {}
  ~PhaseClock() {
    if (p_) p_->busy += double(busy_ns_.load()) * 1e-9;
    if (loops_begun_ && !begun_) loops_begun_->fetch_add(1, std::memory_order_release);  // a path without the loops
  }
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

  void mark(double CpuMoePhases::*phase) {
    if (loops_begun_ && phase == &CpuMoePhases::prepare && !begun_) {
      loops_begun_->fetch_add(1, std::memory_order_release);
      begun_ = true;
    }
    if (!p_) return;
    const Clock::time_point now = Clock::now();
    p_->*phase += std::chrono::duration<double>(now - t_).count();
    t_ = now;
  }
  template <typename F>
  auto items(const F& f) {
    return [this, &f](std::size_t i) {
      if (!p_) return f(i);
      const Clock::time_point t0 = Clock::now();
      f(i);
      busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
                         std::memory_order_relaxed);
    };
  }

 private:
  CpuMoePhases* p_;
  std::atomic<unsigned>* loops_begun_;
  bool begun_ = false;
  Clock::time_point t_;
  std::atomic<std::int64_t> busy_ns_{0};
};

float silu(float v) { return v / (1.0f + std::exp(-v)); }
float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }
// Row r of expert e's bias (rows per expert: n), 0 without one.
float bias_at(const float* bias, std::size_t e, std::size_t n, std::size_t r) { return bias ? bias[e * n + r] : 0.0f; }

// Expert e's GLU of row r's gate and up outputs g, u, with the family's biases (gpt-oss).
float biased_glu(const MoeWeights& w, std::size_t e, std::size_t I, std::size_t r, float g, float u) {
  return ref::expert_glu(w.glu, g + bias_at(w.gate_bias, e, I, r), u + bias_at(w.up_bias, e, I, r));
}

// out[j * H + r] += expert e's down bias for rows [r0, r1) of n tokens (none without one).
void add_down_bias(const MoeWeights& w, std::size_t e, std::size_t r0, std::size_t r1, float* out, std::size_t n,
                   std::size_t H) {
  if (!w.down_bias) return;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t r = r0; r < r1; ++r) out[j * H + r] += w.down_bias[e * H + r];
}

// The routing of a batch, grouped by expert: assignments [begin[e], begin[e+1]) belong to expert e
// in token order; token_of[a] is the token of assignment a; slot_of[t * K + k] is where token t's
// k-th expert landed.
struct Groups {
  std::vector<std::size_t> begin;
  std::size_t* token_of = nullptr;
  std::size_t* slot_of = nullptr;
};

Groups group_by_expert(Scratch& s, const int32_t* chosen, std::size_t T, std::size_t K, std::size_t E) {
  Groups g;
  g.begin.assign(E + 1, 0);
  g.token_of = s.take<std::size_t>(T * K);
  g.slot_of = s.take<std::size_t>(T * K);
  for (std::size_t i = 0; i < T * K; ++i)
    if (chosen[i] >= 0) ++g.begin[std::size_t(chosen[i]) + 1];
  for (std::size_t e = 0; e < E; ++e) g.begin[e + 1] += g.begin[e];
  std::vector<std::size_t> fill(g.begin.begin(), g.begin.end() - 1);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t k = 0; k < K; ++k) {
      if (chosen[t * K + k] < 0) continue;  // computed elsewhere
      const std::size_t a = fill[std::size_t(chosen[t * K + k])]++;
      g.token_of[a] = t;
      g.slot_of[t * K + k] = a;
    }
  }
  return g;
}

// The rows of x (row_bytes each) in assignment order: row a is the row of assignment a's token.
std::byte* rows_by_assignment(Scratch& s, const Groups& g, const void* x, std::size_t row_bytes) {
  const std::size_t A = g.begin.back();
  std::byte* out = s.take<std::byte>(A * row_bytes);
  const auto* in = static_cast<const std::byte*>(x);
  for (std::size_t a = 0; a < A; ++a) std::memcpy(out + a * row_bytes, in + g.token_of[a] * row_bytes, row_bytes);
  return out;
}

struct Item {
  std::size_t expert, r0, r1;
};

// Work items over `rows` rows of every active expert, `per_item` rows each.
std::vector<Item> items(const Groups& g, std::size_t E, std::size_t rows, std::size_t per_item = kRowsPerItem) {
  std::vector<Item> out;
  for (std::size_t e = 0; e < E; ++e) {
    if (g.begin[e] == g.begin[e + 1]) continue;
    for (std::size_t r = 0; r < rows; r += per_item) out.push_back({e, r, std::min(rows, r + per_item)});
  }
  return out;
}

// AMX items: 128 rows where the matrix allows (a B tile then serves eight weight tiles from L2).
std::size_t amx_rows_per_item(std::size_t rows) { return rows % 128 == 0 ? 128 : kRowsPerItem; }

// Every expert on the bf16 dots kernels. xg: the assignments' activations in group order.
void experts_bf16(Scratch& s, CpuIsa isa, DotsFn dots, const MoeWeights& w, const Groups& g, const PreparedX& xg,
                  std::size_t A, float* y, PhaseClock& clock) {
  const std::size_t E = w.experts.size(), H = std::size_t(w.hidden), I = std::size_t(w.experts[0].inter());
  const bool plain = w.plain_experts();
  // h = silu(gate) * up (or the family's GLU of the biased products) in the path's activation
  // format (bf16x2 or fp32), [hi | lo] per row.
  const std::size_t h_row = I * x_bytes_per_col(isa), h_elem = wants_bf16_x(isa) ? sizeof(bf16_t) : sizeof(float);
  std::byte* h = s.take<std::byte>(A * h_row);

  // Pass 1: gate and up rows of a tile together, h = silu(gate) * up.
  const std::vector<Item> up_items = items(g, E, I);
  clock.mark(&CpuMoePhases::prepare);
  const auto up_item = [&](std::size_t i) {
    const Item& it = up_items[i];
    const SwiGluMatrices& m = w.experts[it.expert];
    const std::size_t a0 = g.begin[it.expert], n = g.begin[it.expert + 1] - a0;
    float gb[kRowTile * kTokenChunk], ub[kRowTile * kTokenChunk];
    for (std::size_t r = it.r0; r < it.r1; r += kRowTile) {
      const std::size_t nr = std::min(kRowTile, it.r1 - r);
      for (std::size_t t = 0; t < n; t += kTokenChunk) {
        const std::size_t nt = std::min(kTokenChunk, n - t);
        const void* xt = xg.row(a0 + t);
        dots(reinterpret_cast<const bf16_t*>(m.gate.row(int64_t(r))), nr, xt, xg.ld(), nt, H, gb);
        dots(reinterpret_cast<const bf16_t*>(m.up.row(int64_t(r))), nr, xt, xg.ld(), nt, H, ub);
        if (plain) {
          for (std::size_t ri = 0; ri < nr; ++ri) {
            for (std::size_t j = 0; j < nt; ++j) {
              put_activation(isa, h + (a0 + t + j) * h_row, I, r + ri, silu(gb[ri * nt + j]) * ub[ri * nt + j]);
            }
          }
        } else {
          for (std::size_t ri = 0; ri < nr; ++ri) {
            for (std::size_t j = 0; j < nt; ++j) {
              put_activation(isa, h + (a0 + t + j) * h_row, I, r + ri,
                             biased_glu(w, it.expert, I, r + ri, gb[ri * nt + j], ub[ri * nt + j]));
            }
          }
        }
      }
    }
  };
  tbb::parallel_for(std::size_t(0), up_items.size(), clock.items(up_item));
  clock.mark(&CpuMoePhases::gate_up);

  // Pass 2: y = down(h).
  const std::vector<Item> down_items = items(g, E, H);
  const auto down_item = [&](std::size_t i) {
    const Item& it = down_items[i];
    const SwiGluMatrices& m = w.experts[it.expert];
    const std::size_t a0 = g.begin[it.expert], n = g.begin[it.expert + 1] - a0;
    float db[kRowTile * kTokenChunk];
    for (std::size_t r = it.r0; r < it.r1; r += kRowTile) {
      const std::size_t nr = std::min(kRowTile, it.r1 - r);
      for (std::size_t t = 0; t < n; t += kTokenChunk) {
        const std::size_t nt = std::min(kTokenChunk, n - t);
        const void* ht = h + (a0 + t) * h_row;
        dots(reinterpret_cast<const bf16_t*>(m.down.row(int64_t(r))), nr, ht, h_row / h_elem, nt, I, db);
        for (std::size_t ri = 0; ri < nr; ++ri) {
          const float bd = bias_at(w.down_bias, it.expert, H, r + ri);
          for (std::size_t j = 0; j < nt; ++j) y[(a0 + t + j) * H + r + ri] = db[ri * nt + j] + bd;
        }
      }
    }
  };
  tbb::parallel_for(std::size_t(0), down_items.size(), clock.items(down_item));
  clock.mark(&CpuMoePhases::down);
}

// An AMX work item: rows [r0, r1) of one expert against its token blocks [b0, b1) (absolute block
// indices of the packed layout) holding `tokens` of its assignments from t0 on.
struct AmxItem {
  std::size_t expert, r0, r1, b0, b1, t0, tokens;
};

// At most this many token blocks (1,024 assignments) an item: a router that sends a tenth of a
// 4,096-token prefill's assignments to one expert (the 48-layer random model does) would otherwise
// make items of ~7 GFLOP, one of which can start last and leave the other cores idle while it runs.
// Each item packs its weight panels (~512 KB) again: at 16 blocks an item that cost a near-uniform
// 4-layer prefill's MoE 8%, at 64 nothing (no expert there has that many).
constexpr std::size_t kAmxItemBlocks = 64;

// Items over `rows` rows (`per_item` a piece) of every active expert, its blocks kAmxItemBlocks at a time.
std::vector<AmxItem> amx_items(const Groups& g, const std::vector<std::size_t>& first_block, std::size_t rows,
                               std::size_t per_item) {
  std::vector<AmxItem> out;
  for (std::size_t e = 0; e + 1 < first_block.size(); ++e) {
    const std::size_t n = g.begin[e + 1] - g.begin[e];
    for (std::size_t b = first_block[e]; b < first_block[e + 1]; b += kAmxItemBlocks) {
      const std::size_t b1 = std::min(first_block[e + 1], b + kAmxItemBlocks), t0 = (b - first_block[e]) * kAmxTokens;
      for (std::size_t r = 0; r < rows; r += per_item)
        out.push_back({e, r, std::min(rows, r + per_item), b, b1, t0, std::min(n - t0, (b1 - b) * kAmxTokens)});
    }
  }
  return out;
}

// Every expert on AMX tiles, with the family's epilogue (GLU, biases). Each active expert's tokens are packed into
// token blocks of its own (block-aligned, so a block never mixes experts); pass 1 writes h straight into the packed
// layout pass 2 reads. Which items share a product does not change any output's sums.
void experts_amx(Scratch& s, const MoeWeights& w, const Groups& g, const float* x, float* y, bool bf16_x) {
  const std::size_t E = w.experts.size(), H = std::size_t(w.hidden), I = std::size_t(w.experts[0].inter());
  std::vector<std::size_t> first_block(E + 1, 0);
  for (std::size_t e = 0; e < E; ++e)
    first_block[e + 1] = first_block[e] + (g.begin[e + 1] - g.begin[e] + kAmxTokens - 1) / kAmxTokens;
  const std::size_t slots = first_block[E] * kAmxTokens;
  const AmxPacked xs = amx_alloc(s, slots, H, amx_halves(bf16_x));
  const AmxPacked hs = amx_alloc(s, slots, I, amx_halves(bf16_x));
  // An expert's assignments fill its blocks in group order, 16 to a block.
  tbb::parallel_for(std::size_t(0), E, [&](std::size_t e) {
    const std::size_t a0 = g.begin[e];
    amx_pack_tokens(
        xs, first_block[e], g.begin[e + 1] - a0, [&](std::size_t j) { return x + g.token_of[a0 + j] * H; }, 0, H);
  });

  // Pass 1: gate and up rows of an item against its token blocks, h = GLU(gate, up) (plus the
  // family's biases: gpt-oss) packed for pass 2.
  const bool plain = w.plain_experts();
  const std::vector<AmxItem> up_items = amx_items(g, first_block, I, amx_rows_per_item(I));
  tbb::parallel_for(std::size_t(0), up_items.size(), [&](std::size_t i) {
    const AmxItem& it = up_items[i];
    const SwiGluMatrices& m = w.experts[it.expert];
    thread_local std::vector<float> gb, ub;
    const std::size_t rows = it.r1 - it.r0, n = it.tokens;
    gb.resize(n * rows);
    ub.resize(n * rows);
    amx_rows(m.gate, it.r0, it.r1, xs, it.b0, it.b1, n, gb.data(), rows);
    amx_rows(m.up, it.r0, it.r1, xs, it.b0, it.b1, n, ub.data(), rows);
    if (plain) {
      silu_mul(CpuIsa::kAmxBf16, gb.data(), ub.data(), gb.data(), n * rows);
    } else {
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t r = 0; r < rows; ++r)
          gb[j * rows + r] = biased_glu(w, it.expert, I, it.r0 + r, gb[j * rows + r], ub[j * rows + r]);
    }
    amx_pack_tokens(
        hs, it.b0, n, [&](std::size_t j) { return gb.data() + j * rows; }, it.r0, rows);
  });

  // Pass 2: y = down(h), a group of rows of an item's tokens.
  const std::vector<AmxItem> down_items = amx_items(g, first_block, H, amx_rows_per_item(H));
  tbb::parallel_for(std::size_t(0), down_items.size(), [&](std::size_t i) {
    const AmxItem& it = down_items[i];
    const SwiGluMatrices& m = w.experts[it.expert];
    float* out = y + (g.begin[it.expert] + it.t0) * H;
    amx_rows(m.down, it.r0, it.r1, hs, it.b0, it.b1, it.tokens, out + it.r0, H);
    add_down_bias(w, it.expert, it.r0, it.r1, out, it.tokens, H);
  });
}

// Whether the active experts of g average `per_expert` assignments or more: a prefill's, for the
// kernels that pay a weight decode per work item.
bool experts_average(const Groups& g, std::size_t per_expert) {
  const std::size_t E = g.begin.size() - 1;
  std::size_t active = 0;
  for (std::size_t e = 0; e < E; ++e) active += g.begin[e + 1] > g.begin[e] ? 1 : 0;
  return active > 0 && g.begin[E] >= per_expert * active;
}

// bf16 experts on AMX at every call size the caller gives (it sends decode-sized calls elsewhere
// unless asked for one kernel family); experts of other dtypes, which amx_rows decodes, when the
// active experts average kAmxDecodedTokens assignments or more (a prefill's), as linear() takes
// them by its token count.
bool amx_experts_fit(CpuIsa isa, const MoeWeights& w, const Groups& g, bool by_size) {
  if (isa != CpuIsa::kAmxBf16 || !amx_usable() || w.experts.empty()) return false;
  bool decoded = false;
  for (const SwiGluMatrices& m : w.experts) {
    for (const Matrix* x : {&m.gate, &m.up, &m.down}) {
      if (!amx_takes(*x) || x->rows % int64_t(kRowsPerItem) != 0) return false;
      decoded = decoded || x->dtype != DType::kBF16;
    }
  }
  if (!decoded) return true;
  return by_size && experts_average(g, kAmxDecodedTokens);
}

// Row r of `m` dotted with n fp32 rows x_j = x + j * ld into out[j]: a few tokens through the
// fused block kernel (the row decoded in registers), more through one decoded row.
void row_dots(CpuIsa isa, BlockDotsFn fused, const Matrix& m, std::size_t r, const float* x, std::size_t ld,
              std::size_t n, float* out) {
  const std::size_t cols = std::size_t(m.cols);
  const auto* row = reinterpret_cast<const std::uint8_t*>(m.row(int64_t(r)));
  if (n <= 2 * kBlockDotTokens) {
    for (std::size_t t = 0; t < n; t += kBlockDotTokens) fused(row, cols, x + t * ld, ld, n - t, out + t);
    return;
  }
  static tbb::enumerable_thread_specific<std::vector<float>> rows;
  std::vector<float>& w = rows.local();
  w.resize(cols);
  decode_row(isa, m, int64_t(r), w.data());
  for (std::size_t t = 0; t < n; ++t) out[t] = dot_decoded(w.data(), x + t * ld, cols);
}

// The same with the integer products where m's dtype has them and x8 holds the rows (x's row j is
// x8's row a0 + j).
void row_dots(CpuIsa isa, BlockDotsFn fused, const X8Rows* x8, std::size_t a0, const Matrix& m, std::size_t r,
              const float* x, std::size_t ld, std::size_t n, float* out) {
  if (const Int8DotsFn dots = x8 ? int8_dots_for(isa, m) : nullptr) {
    int8_row_dots(dots, reinterpret_cast<const std::uint8_t*>(m.row(int64_t(r))), std::size_t(m.cols), *x8, a0, n, out);
    return;
  }
  row_dots(isa, fused, m, r, x, ld, n, out);
}

// Whether the call computes any expert and pred holds for each it computes. Only those are looked at:
// a decode call computes a few of a layer's 128 experts, and a walk over every expert's views (cold
// after the previous layer's weights went through the caches) is work in proportion to the layer,
// not to the call.
template <typename Pred>
bool all_computed(const MoeWeights& w, const Groups& g, const Pred& pred) {
  bool any = false;
  for (std::size_t e = 0; e < w.experts.size(); ++e) {
    if (g.begin[e] == g.begin[e + 1]) continue;
    if (!pred(w.experts[e])) return false;
    any = true;
  }
  return any;
}

// Whether pred holds for any expert the call computes.
template <typename Pred>
bool any_computed(const MoeWeights& w, const Groups& g, const Pred& pred) {
  for (std::size_t e = 0; e < w.experts.size(); ++e)
    if (g.begin[e] != g.begin[e + 1] && pred(w.experts[e])) return true;
  return false;
}

// Whether every matrix of every expert the call computes has a row kernel: the integer products
// (AVX2 and up: Q4_K, Q5_K, Q6_K) or a fused decode + dot (AVX-512: every block dtype).
bool block_rows_fit(CpuIsa isa, const MoeWeights& w, const Groups& g) {
  return all_computed(w, g, [&](const SwiGluMatrices& m) {
    for (const Matrix* x : {&m.gate, &m.up, &m.down})
      if (!int8_dots_for(isa, *x) && !block_dots_for(isa, x->dtype)) return false;
    return true;
  });
}

// Every expert in a GGUF block dtype with a fused kernel: the bf16 path's two passes over work
// items of 32 rows (gate and up rows together, h = GLU in fp32; then down), each row decoded in
// registers against the expert's tokens.
// Whether a prefill-sized call's experts take the VNNI tiles (int8_tiles.h): every matrix of a dtype
// they take, and the active experts averaging kInt8TileTokens assignments.
bool int8_tiles_experts_fit(CpuIsa isa, const MoeWeights& w, const Groups& g, bool by_size) {
  if (!by_size) return false;
  for (const SwiGluMatrices& m : w.experts)
    for (const Matrix* x : {&m.gate, &m.up, &m.down})
      if (!int8_tiles_fit(isa, *x)) return false;
  return experts_average(g, kInt8TileTokens);
}

// Expert e's assignments' rows of x into blocks of their own from first[e] on: x's rows are the
// assignments' (`rows` null) or the tokens' (`rows` = g.token_of).
X8Tiles tiles_by_expert(Scratch& s, CpuIsa isa, const X8Rows& x, const Groups& g, const std::vector<std::size_t>& first,
                        const std::size_t* rows) {
  const std::size_t E = first.size() - 1;
  X8Tiles t = x8_tiles_alloc(s, first[E], x.cols());
  tbb::parallel_for(std::size_t(0), E, [&](std::size_t e) {
    const std::size_t a0 = g.begin[e], n = g.begin[e + 1] - a0;
    if (n > 0) x8_tiles_pack(isa, x, a0, n, t, first[e], rows);
  });
  return t;
}

// A prefill's Q4_K / Q6_K experts without AMX: the bf16 path's two passes over work items of 32
// rows (gate and up rows together, h = GLU in fp32; then down), each item's rows against the
// expert's tokens 16 at a time on the VNNI tiles. The tiles read x's rows through g.token_of (each
// token's row quantised once, not once per choice).
void experts_tiles(Scratch& s, CpuIsa isa, const MoeWeights& w, const Groups& g, const float* x, std::size_t T,
                   float* y, PhaseClock& clock) {
  const std::size_t E = w.experts.size(), H = std::size_t(w.hidden), I = std::size_t(w.experts[0].inter());
  const bool plain = w.plain_experts();
  const std::size_t A = g.begin[E];
  float* h = s.floats(std::max<std::size_t>(A, 1) * I);
  std::vector<std::size_t> first(E + 1, 0);  // each expert's first tile block
  for (std::size_t e = 0; e < E; ++e)
    first[e + 1] = first[e] + (g.begin[e + 1] - g.begin[e] + kTileTokens - 1) / kTileTokens;
  X8Rows xq, hq;
  xq.quantize(s, x, T, H, H, isa);
  const X8Tiles xt = tiles_by_expert(s, isa, xq, g, first, g.token_of);
  const std::vector<Item> up_items = items(g, E, I);
  clock.mark(&CpuMoePhases::prepare);
  const auto up_item = [&](std::size_t i) {
    const Item& it = up_items[i];
    const SwiGluMatrices& m = w.experts[it.expert];
    const std::size_t a0 = g.begin[it.expert], n = g.begin[it.expert + 1] - a0, rows = it.r1 - it.r0;
    thread_local std::vector<float> gb, ub;  // no allocation per item once grown
    gb.resize(n * rows);
    ub.resize(n * rows);
    int8_tile_rows(isa, m.gate, it.r0, it.r1, xt, first[it.expert], first[it.expert + 1], n, gb.data(), rows);
    int8_tile_rows(isa, m.up, it.r0, it.r1, xt, first[it.expert], first[it.expert + 1], n, ub.data(), rows);
    for (std::size_t r = it.r0; r < it.r1; ++r) {
      for (std::size_t j = 0; j < n; ++j) {
        const float gv = gb[j * rows + r - it.r0], uv = ub[j * rows + r - it.r0];
        h[(a0 + j) * I + r] = plain ? silu(gv) * uv : biased_glu(w, it.expert, I, r, gv, uv);
      }
    }
  };
  tbb::parallel_for(std::size_t(0), up_items.size(), clock.items(up_item));
  clock.mark(&CpuMoePhases::gate_up);
  hq.quantize(s, h, A, I, I, isa);
  const X8Tiles ht = tiles_by_expert(s, isa, hq, g, first, nullptr);
  const std::vector<Item> down_items = items(g, E, H);
  const auto down_item = [&](std::size_t i) {
    const Item& it = down_items[i];
    const std::size_t a0 = g.begin[it.expert], n = g.begin[it.expert + 1] - a0;
    int8_tile_rows(isa, w.experts[it.expert].down, it.r0, it.r1, ht, first[it.expert], first[it.expert + 1], n,
                   y + a0 * H + it.r0, H);
    add_down_bias(w, it.expert, it.r0, it.r1, y + a0 * H, n, H);
  };
  tbb::parallel_for(std::size_t(0), down_items.size(), clock.items(down_item));
  clock.mark(&CpuMoePhases::down);
}

// Every expert in a block dtype, row by row: the integer products (int8_dots.h) where the matrix's
// dtype has them, else the fused kernel that decodes a row in registers. Work items of 32 rows,
// gate and up rows together (h = GLU in fp32), then h quantised for down's integer products, then
// down (the bf16 path's two passes).
// x's token rows are quantised once (not once per choice) and read through g.token_of; the fused
// kernels read fp32 rows in assignment order (one token: its row at stride 0, no copy).
void experts_blocks(Scratch& s, CpuIsa isa, const MoeWeights& w, const Groups& g, const float* x, std::size_t T,
                    float* y, PhaseClock& clock) {
  const std::size_t E = w.experts.size(), H = std::size_t(w.hidden), I = std::size_t(w.experts[0].inter());
  const bool plain = w.plain_experts();
  const std::size_t A = g.begin[E];
  float* h = s.floats(std::max<std::size_t>(A, 1) * I);
  const bool x_int8 = any_computed(w, g, [&](const SwiGluMatrices& m) {
    return int8_dots_for(isa, m.gate) != nullptr || int8_dots_for(isa, m.up) != nullptr;
  });
  const bool x_fp32 = any_computed(w, g, [&](const SwiGluMatrices& m) {
    return int8_dots_for(isa, m.gate) == nullptr || int8_dots_for(isa, m.up) == nullptr;
  });
  const bool h_int8 =
      any_computed(w, g, [&](const SwiGluMatrices& m) { return int8_dots_for(isa, m.down) != nullptr; });
  X8Rows xq, hq;  // the inputs as int8 planes, where an expert's dtype has integer products
  if (x_int8) xq.quantize(s, x, T, H, H, isa);
  const X8Rows xa = xq.gathered(g.token_of);  // row a: assignment a's token
  const float* xg = x;
  std::size_t ldx = 0;
  if (x_fp32 && T > 1) {
    xg = reinterpret_cast<const float*>(rows_by_assignment(s, g, x, H * sizeof(float)));
    ldx = H;
  }
  const std::vector<Item> up_items = items(g, E, I), down_items = items(g, E, H);
  clock.mark(&CpuMoePhases::prepare);
  const auto up_item = [&](std::size_t i) {
    const Item& it = up_items[i];
    const SwiGluMatrices& m = w.experts[it.expert];
    const std::size_t a0 = g.begin[it.expert], n = g.begin[it.expert + 1] - a0;
    const BlockDotsFn gate = block_dots_for(isa, m.gate.dtype), up = block_dots_for(isa, m.up.dtype);
    thread_local std::vector<float> gb, ub;  // no allocation per item once grown
    gb.resize(n);
    ub.resize(n);
    for (std::size_t r = it.r0; r < it.r1; ++r) {
      row_dots(isa, gate, x_int8 ? &xa : nullptr, a0, m.gate, r, xg + a0 * ldx, ldx, n, gb.data());
      row_dots(isa, up, x_int8 ? &xa : nullptr, a0, m.up, r, xg + a0 * ldx, ldx, n, ub.data());
      for (std::size_t j = 0; j < n; ++j)
        h[(a0 + j) * I + r] = plain ? silu(gb[j]) * ub[j] : biased_glu(w, it.expert, I, r, gb[j], ub[j]);
    }
  };
  const auto down_item = [&](std::size_t i) {
    const Item& it = down_items[i];
    const SwiGluMatrices& m = w.experts[it.expert];
    const std::size_t a0 = g.begin[it.expert], n = g.begin[it.expert + 1] - a0;
    const BlockDotsFn down = block_dots_for(isa, m.down.dtype);
    thread_local std::vector<float> db;
    db.resize(n);
    for (std::size_t r = it.r0; r < it.r1; ++r) {
      row_dots(isa, down, h_int8 ? &hq : nullptr, a0, m.down, r, h + a0 * I, I, n, db.data());
      const float bd = bias_at(w.down_bias, it.expert, H, r);
      for (std::size_t j = 0; j < n; ++j) y[(a0 + j) * H + r] = db[j] + bd;
    }
  };
  tbb::parallel_for(std::size_t(0), up_items.size(), clock.items(up_item));
  clock.mark(&CpuMoePhases::gate_up);
  if (h_int8) hq.quantize(s, h, A, I, I, isa);
  tbb::parallel_for(std::size_t(0), down_items.size(), clock.items(down_item));
  clock.mark(&CpuMoePhases::down);
}

// Experts in other dtypes: each expert in turn through the generic linear.
void experts_generic(Scratch& s, CpuIsa isa, const MoeWeights& w, const Groups& g, const float* xg, float* y,
                     bool by_size, bool bf16_x) {
  const std::size_t E = w.experts.size(), H = std::size_t(w.hidden);
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t a0 = g.begin[e], n = g.begin[e + 1] - a0;
    if (n == 0) continue;
    Scratch::Frame frame(s);
    const SwiGluMatrices& m = w.experts[e];
    const std::size_t I = std::size_t(m.inter());
    float* gt = s.floats(n * I);
    float* up = s.floats(n * I);
    if (w.plain_experts()) {
      linear(s, isa, xg + a0 * H, n, m.gate, nullptr, gt, by_size, bf16_x);
      linear(s, isa, xg + a0 * H, n, m.up, nullptr, up, by_size, bf16_x);
      silu_mul(isa, gt, up, gt, n * I);
      linear(s, isa, gt, n, m.down, nullptr, y + a0 * H, by_size, bf16_x);
      continue;
    }
    linear(s, isa, xg + a0 * H, n, m.gate, w.gate_bias ? w.gate_bias + e * I : nullptr, gt, by_size, bf16_x);
    linear(s, isa, xg + a0 * H, n, m.up, w.up_bias ? w.up_bias + e * I : nullptr, up, by_size, bf16_x);
    for (std::size_t i = 0; i < n * I; ++i) gt[i] = ref::expert_glu(w.glu, gt[i], up[i]);
    linear(s, isa, gt, n, m.down, w.down_bias ? w.down_bias + e * H : nullptr, y + a0 * H, by_size, bf16_x);
  }
}

}  // namespace

void moe_experts(Scratch& s, CpuIsa isa, const MoeWeights& w, const float* x, std::size_t T, std::size_t K,
                 const int32_t* chosen, const float* weights, float* out, OpProfile* profile, bool by_size,
                 CpuMoePhases* phases, std::atomic<unsigned>* loops_begun, bool bf16_x) {
  Scratch::Frame frame(s);
  PhaseClock clock(phases, loops_begun);
  const std::size_t H = std::size_t(w.hidden), E = w.experts.size();
  const Groups g = group_by_expert(s, chosen, T, K, E);
  const std::size_t A = g.begin[E];  // assignments computed here
  std::optional<Backend::OpTimer> phase(std::in_place, profile, OpProfile::kMoeExperts);
  float* y = s.floats(std::max<std::size_t>(A, 1) * H);
  const bool all_bf16 = all_computed(w, g, [](const SwiGluMatrices& m) {
    return m.gate.dtype == DType::kBF16 && m.up.dtype == DType::kBF16 && m.down.dtype == DType::kBF16;
  });
  const DotsFn dots = all_bf16 ? dots_for(isa) : nullptr;
  if (A == 0) {
    // nothing to compute: every choice is another device's
  } else if (amx_experts_fit(isa, w, g, by_size)) {
    experts_amx(s, w, g, x, y, bf16_x);
  } else if (dots) {
    const PreparedX px = prepare_x(s, isa, x, T, H);
    experts_bf16(s, isa, dots, w, g, {rows_by_assignment(s, g, px.data, px.row_bytes), px.row_bytes, px.elem}, A, y,
                 clock);
  } else if (block_rows_fit(isa, w, g)) {
    if (int8_tiles_experts_fit(isa, w, g, by_size)) {
      experts_tiles(s, isa, w, g, x, T, y, clock);
    } else {
      experts_blocks(s, isa, w, g, x, T, y, clock);
    }
  } else {
    const auto* xg = reinterpret_cast<const float*>(rows_by_assignment(s, g, x, H * sizeof(float)));
    experts_generic(s, isa, w, g, xg, y, by_size, bf16_x);
  }

  phase.emplace(profile, OpProfile::kMoeCombine);
  // Each token's experts in ascending expert order (HF adds them in that order too).
  tbb::parallel_for(std::size_t(0), T, [&](std::size_t t) {
    std::size_t order[64];
    const std::size_t k_n = std::min<std::size_t>(K, 64);
    for (std::size_t k = 0; k < k_n; ++k) order[k] = k;
    std::sort(order, order + k_n, [&](std::size_t a, std::size_t b) { return chosen[t * K + a] < chosen[t * K + b]; });
    float* o = out + t * H;
    std::fill(o, o + H, 0.0f);
    for (std::size_t i = 0; i < k_n; ++i) {
      const std::size_t k = order[i];
      if (chosen[t * K + k] < 0) continue;
      const float wk = weights[t * K + k];
      const float* yk = y + g.slot_of[t * K + k] * H;
      for (std::size_t d = 0; d < H; ++d) o[d] += yk[d] * wk;
    }
  });
  clock.mark(&CpuMoePhases::finish);
  if (phases) {
    ++phases->calls;
    phases->threads = tbb::this_task_arena::max_concurrency();
  }
}

void moe(Scratch& s, CpuIsa isa, const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x,
         int32_t* chosen_out, OpProfile* profile, bool by_size, bool bf16_x) {
  Scratch::Frame frame(s);
  const std::size_t H = std::size_t(w.hidden), E = w.router_spec.num_experts, K = w.router_spec.top_k, A = T * K;
  std::optional<Backend::OpTimer> phase(std::in_place, profile, OpProfile::kMoeRoute);
  float* logits = s.floats(T * E);
  float* weights = s.floats(A);
  int32_t* chosen = s.take<int32_t>(A);
  linear(s, isa, router_x ? router_x : x, T, w.router, w.router_bias, logits, by_size, bf16_x);
  // Top-k per token, tokens spread over the threads (each token's choice is its own).
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, T, 64), [&](const tbb::blocked_range<std::size_t>& r) {
    ref::route_top_k(logits + r.begin() * E, r.size(), w.router_spec, chosen + r.begin() * K, weights + r.begin() * K);
  });
  if (chosen_out) std::memcpy(chosen_out, chosen, A * sizeof(int32_t));
  phase.reset();
  moe_experts(s, isa, w, x, T, K, chosen, weights, out, profile, by_size, nullptr, nullptr, bf16_x);

  if (w.has_shared) {
    const std::size_t I = std::size_t(w.shared.inter());
    float* gt = s.floats(T * I);
    float* up = s.floats(T * I);
    float* shared = s.floats(T * H);
    float* gate = s.floats(T);
    const Backend::LinearOut gate_up[] = {{&w.shared.gate, nullptr, gt}, {&w.shared.up, nullptr, up}};
    linears(s, isa, x, T, gate_up, by_size, bf16_x);
    silu_mul(isa, gt, up, gt, T * I);
    linear(s, isa, gt, T, w.shared.down, nullptr, shared, by_size, bf16_x);
    if (w.shared_gated) linear(s, isa, x, T, w.shared_gate, nullptr, gate, by_size, bf16_x);
    for (std::size_t t = 0; t < T; ++t) {
      const float gv = w.shared_gated ? sigmoid(gate[t]) : 1.0f;
      for (std::size_t d = 0; d < H; ++d) out[t * H + d] += gv * shared[t * H + d];
    }
  }
}

}  // namespace ft::engine::cpu

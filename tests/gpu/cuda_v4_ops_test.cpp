// DeepSeek-V4's ops on the CUDA backend against the fp32 reference backend, through the Backend seam
// the model uses: the hyper-connections, the compressors (and their rings), the CSA indexer's picks,
// the attention over window and entries, and the MoE with sqrt-softplus routing, hash-table choices
// and the clamped GLU. KV pages are bf16 on both sides (the same values), so what differs is fp32
// rounding: 1e-5 relative where the math is plain fp32, exact picks (the scores are the reference's
// arithmetic and the top-k runs on the host), 1e-2 for whole MoE layers (bf16 products). Skips
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ft/engine/backend.h"
#include "ft/engine/bf16.h"
#include "ft/engine/kv_pool.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_hyper.h"
#include "ft/engine/ops_v4_attention.h"
#include "gpu_test_util.h"

namespace ft::engine {
namespace {

class CudaV4Ops : public CudaAndReference {
 protected:
  CudaV4Ops() { rng_.seed(4); }
  // A rope's inverse frequencies for r roped dims.
  static std::vector<float> inv_freq(std::size_t r) {
    std::vector<float> f(r / 2);
    for (std::size_t i = 0; i < f.size(); ++i) f[i] = float(std::pow(10000.0, -2.0 * double(i) / double(r)));
    return f;
  }

  // The KV of a V4 layer in bf16 pages, the same values here and on the GPU (every position of
  // every sequence written, this call's rows included, as the block writes them before it reads),
  // for sequences of different lengths: a decode row after a long context, prefills from 0, rows
  // after a short context, a chunk after a longer one.
  using Seq = KvSeq;
  using Kv = PagedKvTwin;
  static constexpr int64_t kLayer = kKvLayer;
  Kv kv(int64_t slots, int64_t width, int64_t page_tokens, const std::vector<Seq>& shape) {
    return paged_kv(slots, width, page_tokens, shape, [this](std::size_t n) { return random(n); });
  }
  const std::vector<Seq> shape_ = {{1, 300}, {45, 0}, {3, 2}, {20, 50}, {1, 7}};
};

// hc_pre (the collapse, post and the Sinkhorn'd comb), hc_head and hc_post, out of place and in
// place, for one token (decode) and several, streams of different widths.
TEST_F(CudaV4Ops, HyperConnectionsLikeTheReference) {
  for (const auto& [N, D, T] :
       {std::tuple<std::size_t, std::size_t, std::size_t>{4, 64, 1}, {4, 100, 7}, {2, 256, 3}, {3, 33, 20}}) {
    SCOPED_TRACE("N " + std::to_string(N) + " D " + std::to_string(D) + " T " + std::to_string(T));
    HyperSpec spec;
    spec.streams = N;
    spec.dim = D;
    const std::size_t M = spec.mix_rows(), ND = N * D;
    const std::vector<float> h = random(T * ND), fn = random(M * ND, 0.05f), base = random(M, 0.5f);
    const std::vector<float> scale = {0.8f, 1.3f, 0.9f};
    const std::vector<float> head_fn = random(N * ND, 0.05f), head_base = random(N, 0.5f), head_scale = {1.1f};
    const std::vector<float> out = random(T * D);
    std::vector<float> x(T * D), post(T * N), comb(T * N * N), y(T * D), h_new(T * ND);
    on(*ref_, [&] {
      ref_->hc_pre(h.data(), fn.data(), base.data(), scale.data(), T, spec, x.data(), post.data(), comb.data());
      ref_->hc_head(h.data(), head_fn.data(), head_base.data(), head_scale.data(), T, spec, y.data());
      ref_->hc_post(h.data(), out.data(), post.data(), comb.data(), T, spec, h_new.data());
    });
    float* dh = dev(h);
    const float *dfn = param(fn), *dbase = param(base), *dscale = param(scale);
    const float *dhfn = param(head_fn), *dhbase = param(head_base), *dhscale = param(head_scale);
    const float *dout = dev(out), *dpost_in = dev(post), *dcomb_in = dev(comb);
    float *dx = dev_zeros(x.size()), *dpost = dev_zeros(post.size()), *dcomb = dev_zeros(comb.size());
    float *dy = dev_zeros(y.size()), *dnew = dev_zeros(h_new.size());
    on(*cuda_, [&] {
      cuda_->hc_pre(dh, dfn, dbase, dscale, T, spec, dx, dpost, dcomb);
      cuda_->hc_head(dh, dhfn, dhbase, dhscale, T, spec, dy);
      cuda_->hc_post(dh, dout, dpost_in, dcomb_in, T, spec, dnew);
    });
    EXPECT_LT(rel_l2(host(dx, x.size()), x), 1e-5);
    EXPECT_LT(rel_l2(host(dpost, post.size()), post), 1e-5);
    EXPECT_LT(rel_l2(host(dcomb, comb.size()), comb), 1e-5);
    EXPECT_LT(rel_l2(host(dy, y.size()), y), 1e-5);
    const std::vector<float> got_new = host(dnew, h_new.size());
    EXPECT_LT(rel_l2(got_new, h_new), 1e-6);
    // Sinkhorn's last step is a column pass: every column of comb sums to 1 / (1 + eps).
    const std::vector<float> got_comb = host(dcomb, comb.size());
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t k = 0; k < N; ++k) {
        float sum = 0.f;
        for (std::size_t j = 0; j < N; ++j) sum += got_comb[t * N * N + j * N + k];
        EXPECT_NEAR(sum, 1.f, 1e-4f);
      }
    }
    // In place (h_new = h): the same values as out of place.
    on(*cuda_, [&] { cuda_->hc_post(dh, dout, dpost_in, dcomb_in, T, spec, dh); });
    EXPECT_EQ(host(dh, h.size()), got_new);
  }
}

// The compressors over several passes of several sequences each, single tokens among them, so that
// windows close inside a pass, across passes, at a pass's first and last row: the entries (zeros
// where no window closes) and the rings after each pass, HCA and CSA (the carried Ca of the window
// before, none in window 0), with the rings a column block of wider rows as the block keeps them.
TEST_F(CudaV4Ops, CompressorsLikeTheReferenceAcrossPasses) {
  struct Case {
    std::size_t width, rate;
    bool overlap;
    std::size_t rope;
  };
  const std::vector<std::vector<std::size_t>> passes = {{5, 1, 13}, {1, 1, 1},  {7, 3, 1}, {1, 12, 2},
                                                        {1, 1, 1},  {17, 1, 9}, {2, 8, 1}};
  for (const Case c : {Case{32, 8, false, 8}, Case{32, 4, true, 8}, Case{24, 2, true, 4}, Case{64, 3, true, 16}}) {
    SCOPED_TRACE("width " + std::to_string(c.width) + " rate " + std::to_string(c.rate) +
                 (c.overlap ? " CSA" : " HCA"));
    CompressorSpec spec;
    spec.width = c.width;
    spec.rate = c.rate;
    spec.overlap = c.overlap;
    spec.rope_dims = c.rope;
    const std::size_t row = spec.row(), R = spec.ring_tokens(), column = 3, ld = row + 5, ring = R * ld;
    const std::vector<float> bias = random(c.rate * row, 0.5f), freq = inv_freq(c.rope);
    std::vector<float> norm = random(c.width, 0.1f);
    for (float& v : norm) v += 1.f;
    const CompressorParams host_params{bias.data(), norm.data(), freq.data()};
    const CompressorParams dev_params{param(bias), param(norm), param(freq)};
    const std::size_t S = passes[0].size();
    std::vector<std::vector<float>> ring_kv(S, std::vector<float>(ring, 0.f)), ring_gate = ring_kv;
    std::vector<float*> dev_kv(S), dev_gate(S);
    for (std::size_t i = 0; i < S; ++i) {
      dev_kv[i] = dev(ring_kv[i]);
      dev_gate[i] = dev(ring_gate[i]);
    }
    std::vector<int64_t> pos(S, 0);
    for (const std::vector<std::size_t>& rows : passes) {
      std::vector<CompressorSeq> host_seqs, dev_seqs;
      std::size_t T = 0;
      for (std::size_t i = 0; i < S; ++i) {
        host_seqs.push_back({T, rows[i], pos[i], ring_kv[i].data() + column, ring_gate[i].data() + column, ld});
        dev_seqs.push_back({T, rows[i], pos[i], dev_kv[i] + column, dev_gate[i] + column, ld});
        T += rows[i];
      }
      const std::vector<float> kv_in = random(T * row), gate_in = random(T * row);
      std::vector<float> want(T * c.width, -1.f);
      on(*ref_, [&] { ref_->v4_compress(spec, host_params, kv_in.data(), gate_in.data(), host_seqs, want.data()); });
      const float *dkv = dev(kv_in), *dgate = dev(gate_in);
      float* entries = dev(std::vector<float>(T * c.width, -1.f));
      on(*cuda_, [&] { cuda_->v4_compress(spec, dev_params, dkv, dgate, dev_seqs, entries); });
      const std::vector<float> got = host(entries, want.size());
      EXPECT_LT(rel_l2(got, want), 1e-5) << "at positions " << pos[0] << ", " << pos[1] << ", " << pos[2];
      // Rows that close no window are zeros, exactly.
      for (std::size_t t = 0; t < T; ++t) {
        const bool zero =
            std::all_of(want.begin() + std::ptrdiff_t(t * c.width), want.begin() + std::ptrdiff_t((t + 1) * c.width),
                        [](float v) { return v == 0.f; });
        if (zero) {
          for (std::size_t i = 0; i < c.width; ++i) ASSERT_EQ(got[t * c.width + i], 0.f) << "row " << t;
        }
      }
      for (std::size_t i = 0; i < S; ++i) {
        EXPECT_EQ(host(dev_kv[i], ring), ring_kv[i]) << "sequence " << i;
        EXPECT_EQ(host(dev_gate[i], ring), ring_gate[i]) << "sequence " << i;
        pos[i] += int64_t(rows[i]);
      }
    }
  }
}

// The CSA indexer's picks are the reference's exactly (scores in its arithmetic, the top-k on the
// host): index keys a slot wide, a slot and a half, two slots; rows before any entry closes (all
// -1), rows of zero queries (every score 0: the tie rule picks by the row's entry count), a decode
// row after a long context, several sequences in one call; recorded as the trace's selections.
TEST_F(CudaV4Ops, IndexerPicksExactlyAsTheReference) {
  struct Case {
    int64_t width, page;
    std::size_t index_heads, index_dim, top_k, rate;
  };
  for (const Case c : {Case{32, 16, 4, 32, 5, 4}, Case{32, 16, 8, 48, 16, 4}, Case{64, 32, 16, 64, 3, 8},
                       Case{32, 64, 4, 64, 40, 2}}) {
    SCOPED_TRACE("index keys " + std::to_string(c.index_dim) + " in slots of " + std::to_string(c.width) + ", rate " +
                 std::to_string(c.rate));
    const int64_t slots = 1 + (int64_t(c.index_dim) + c.width - 1) / c.width;
    const Kv d = kv(slots, c.width, c.page, shape_);
    IndexerSpec spec = v4_indexer_spec(c.index_heads, c.index_dim, c.top_k);
    spec.kv_slot = 1;
    const std::size_t T = d.T, K = c.top_k, QW = c.index_heads * c.index_dim;
    std::vector<float> q = random(T * QW);
    const std::vector<float> w = random(T * c.index_heads);
    for (std::size_t t = 0; t < T; t += 7) std::fill_n(q.begin() + std::ptrdiff_t(t * QW), QW, 0.f);
    std::vector<int32_t> want(T * K, -7);
    on(*ref_,
       [&] { ref_->v4_index_select(d.layout, kLayer, q.data(), w.data(), spec, c.rate, d.host_seqs, want.data()); });
    const float *dq = dev(q), *dw = dev(w);
    int32_t* picks = dev(std::vector<int32_t>(T * K, -7));
    RoutingTrace trace;
    cuda_->set_routing_trace(&trace);
    on(*cuda_, [&] { cuda_->v4_index_select(d.layout, kLayer, dq, dw, spec, c.rate, d.dev_seqs, picks); });
    cuda_->set_routing_trace(nullptr);
    const std::vector<int32_t> got = host(picks, T * K);
    EXPECT_EQ(got, want);
    ASSERT_EQ(trace.selections.size(), 1u);
    EXPECT_EQ(trace.selections[0], want);
    // Row 46 is the third sequence's first, at position 2: an entry closes at rate - 1 at the earliest.
    const int64_t causal = 3 / int64_t(c.rate);
    for (std::size_t i = 0; i < K; ++i) EXPECT_EQ(got[46 * K + i], int64_t(i) < causal ? int32_t(i) : -1) << i;
  }
}

// Attention over the window (cut at W past it) and the entries: CSA with the indexer's picks (-1s
// among them, rows that pick nothing), HCA with every causal entry, a sliding layer with none; with
// sinks and without; a decode row after a long context and prefills in one call.
TEST_F(CudaV4Ops, AttentionLikeTheReference) {
  struct Case {
    std::size_t heads, head_dim, rope;
    int64_t window;
    std::size_t rate, top_k;
    bool sinks;
    int64_t page;
  };
  for (const Case c :
       {Case{4, 32, 8, 16, 4, 6, true, 16}, Case{3, 64, 16, 8, 8, 0, true, 32}, Case{2, 32, 8, 16, 0, 0, false, 16},
        Case{8, 64, 64, 128, 4, 64, true, 64}, Case{2, 32, 8, 4, 2, 0, false, 8}}) {
    const bool csa = c.top_k > 0;
    const std::string kind = csa ? "CSA" : c.rate ? "HCA" : "sliding";
    SCOPED_TRACE(kind + " heads " + std::to_string(c.heads) + " of " + std::to_string(c.head_dim) + ", window " +
                 std::to_string(c.window));
    const Kv d = kv(csa ? 2 : 1, int64_t(c.head_dim), c.page, shape_);
    V4AttentionSpec spec;
    spec.heads = c.heads;
    spec.head_dim = c.head_dim;
    spec.rope_dims = c.rope;
    spec.scale = 1.f / std::sqrt(float(c.head_dim));
    spec.window = c.window;
    spec.rate = c.rate;
    const std::size_t T = d.T, row = c.heads * c.head_dim, K = c.top_k;
    const std::vector<float> q = random(T * row), sinks = random(c.heads), freq = inv_freq(c.rope);
    // Each row's picks: a random set of its causal entries in ascending order, at most top_k,
    // then -1s; a -1 in the middle on every fifth row.
    std::vector<int32_t> picks(T * K, -1);
    for (const AttentionSeq& s : d.host_seqs) {
      const int64_t n = csa ? (s.pos0 + int64_t(s.rows)) / int64_t(c.rate) : 0;
      for (std::size_t r = 0; r < s.rows && csa; ++r) {
        const int64_t causal = std::min<int64_t>(int64_t(v4_causal_entries(s.pos0 + int64_t(r), c.rate)), n);
        std::vector<int32_t> all(static_cast<std::size_t>(causal));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng_);
        all.resize(std::min(all.size(), K));
        std::sort(all.begin(), all.end());
        int32_t* out = picks.data() + (s.row0 + r) * K;
        std::copy(all.begin(), all.end(), out);
        if ((s.row0 + r) % 5 == 0 && all.size() > 1) out[0] = -1;
      }
    }
    std::vector<float> want(T * row);
    on(*ref_, [&] {
      ref_->v4_attention(d.layout, kLayer, q.data(), spec, c.sinks ? sinks.data() : nullptr, freq.data(), d.host_seqs,
                         csa ? picks.data() : nullptr, K, want.data());
    });
    const float* dq = dev(q);
    const float* dsinks = c.sinks ? param(sinks) : nullptr;
    const float* dfreq = param(freq);
    const int32_t* dpicks = csa ? dev(picks) : nullptr;
    float* out = dev_zeros(want.size());
    on(*cuda_, [&] { cuda_->v4_attention(d.layout, kLayer, dq, spec, dsinks, dfreq, d.dev_seqs, dpicks, K, out); });
    EXPECT_LT(rel_l2(host(out, want.size()), want), 1e-5);
  }
}

// The MoE of a V4 layer: sqrt-softplus scores with a correction bias choosing (routed on the host),
// renormalised and scaled weights, experts with the clamped SwiGLU; and the hash layers' given
// choices (moe_chosen), weighed by the router, recorded as the call's routing.
TEST_F(CudaV4Ops, SqrtSoftplusRoutingHashChoicesAndTheClampedGlu) {
  std::deque<MoeWeights> layers;
  std::deque<std::vector<float>> biases;
  const int64_t E = 16, H = 256, I = 64;
  const std::size_t K = 4;
  MoeWeights& w = layers.emplace_back();
  w.router_spec.num_experts = std::size_t(E);
  w.router_spec.top_k = K;
  w.router_spec.scoring = ref::RouterScoring::kSqrtSoftplus;
  w.router_spec.renormalize = true;
  w.router_spec.scaling = 1.5f;
  w.hidden = H;
  w.router = weight(E, H);
  w.glu.clamped = true;
  w.glu.alpha = 1.f;
  w.glu.limit = 0.5f;  // below the products' spread: the clamp bites
  w.glu.up_offset = 0.f;
  for (int64_t e = 0; e < E; ++e) w.experts.push_back({weight(I, H), weight(I, H), weight(H, I)});
  const std::vector<float>& bias = biases.emplace_back(random(std::size_t(E), 0.1f));
  MoeWeights& on_host = layers.emplace_back(w);
  on_host.router_spec.correction_bias = bias.data();
  w.router_spec.correction_bias = param(bias);
  for (std::size_t T : {1, 3, 16, 70}) expect_moe_like_reference(w, on_host, T);

  for (std::size_t T : {1, 5, 33}) {
    SCOPED_TRACE("hash choices, T " + std::to_string(T));
    std::vector<int32_t> chosen(T * K);
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<int32_t> all(static_cast<std::size_t>(E));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng_);
      std::copy_n(all.begin(), K, chosen.begin() + std::ptrdiff_t(t * K));
    }
    const std::vector<float> x = random(T * std::size_t(H));
    std::vector<float> want(x.size());
    on(*ref_, [&] { ref_->moe_chosen(on_host, x.data(), T, chosen.data(), want.data()); });
    const float* dx = dev(x);
    float* out = dev_zeros(x.size());
    RoutingTrace trace;
    cuda_->set_routing_trace(&trace);
    on(*cuda_, [&] { cuda_->moe_chosen(w, dx, T, chosen.data(), out); });
    cuda_->set_routing_trace(nullptr);
    EXPECT_LT(rel_l2(host(out, x.size()), want), 1e-2);
    ASSERT_EQ(trace.calls.size(), 1u);
    EXPECT_EQ(trace.calls[0], chosen);
  }

  // The shared expert's GLU alone.
  const std::vector<float> g = random(1000, 2.f), u = random(1000, 2.f);
  std::vector<float> want(g.size());
  on(*ref_, [&] { ref_->expert_glu(w.glu, g.data(), u.data(), want.data(), g.size()); });
  const float *dg = dev(g), *du = dev(u);
  float* out = dev_zeros(g.size());
  on(*cuda_, [&] { cuda_->expert_glu(w.glu, dg, du, out, g.size()); });
  EXPECT_LT(rel_l2(host(out, g.size()), want), 1e-6);
}

}  // namespace
}  // namespace ft::engine

// Every op of the CUDA backend against the fp32 reference backend, through the Backend seam the
// models use: the same weights (bf16 bytes, placed in VRAM for the GPU), the same inputs. The GPU
// multiplies fp32-grade activations (split in two bf16 halves) but keeps KV in bf16 where the
// reference keeps fp32, hence relative tolerances of 1e-4 for products, 1e-2 where KV rounding
// enters (and for whole MoE layers) and 1e-5 where the math is plain fp32. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ft/engine/backend.h"
#include "ft/engine/bf16.h"
#include "ft/engine/kv_pool.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_dsa.h"
#include "ft/engine/sampling.h"
#include "gpu_test_util.h"

namespace ft::engine {
namespace {

class CudaOps : public CudaAndReference {
 protected:
  CudaOps() { rng_.seed(99); }
};

TEST_F(CudaOps, LinearAndLinearsMatchTheReference) {
  for (std::size_t T : {1, 5, 64, 300}) {
    const Matrix w = weight(384, 256), w2 = weight(96, 256);
    const std::vector<float> x = random(T * 256), bias = random(384);
    std::vector<float> want(T * 384), want2(T * 96);
    on(*ref_, [&] {
      ref_->linear(x.data(), T, w, bias.data(), want.data());
      ref_->linear(x.data(), T, w2, nullptr, want2.data());
    });
    float *y = dev_zeros(T * 384), *y2 = dev_zeros(T * 96);
    const float* dx = dev(x);
    const float* db = param(bias);
    on(*cuda_, [&] {
      const Backend::LinearOut outs[] = {{&w, db, y}, {&w2, nullptr, y2}};
      cuda_->linears(dx, T, outs);
    });
    // fp32-grade: plain bf16 activations would be ~3e-3 off (the split's second half is what
    // this holds to account, at every T: gemv, one GEMM over 2T columns, two GEMMs).
    EXPECT_LT(rel_l2(host(y, T * 384), want), 1e-4) << "T " << T;
    EXPECT_LT(rel_l2(host(y2, T * 96), want2), 1e-4) << "T " << T;
  }
}

TEST_F(CudaOps, NormsElementwiseEmbeddingAndGathers) {
  const std::size_t rows = 37, dim = 2048;
  const std::vector<float> x = random(rows * dim), w = random(dim), g = random(rows * dim);
  // Rows of one float4 a thread, of two, of four (the widest vector kernel), and of a width that
  // is no multiple of 4 (the scalar kernel).
  for (std::size_t d : {std::size_t(128), dim, std::size_t(5120), std::size_t(16384), std::size_t(36)}) {
    const std::vector<float> xd = random(rows * d), wd = random(d);
    for (bool zero_centered : {false, true}) {
      std::vector<float> want(xd.size());
      on(*ref_, [&] { ref_->rms_norm(xd.data(), wd.data(), want.data(), rows, d, 1e-6f, zero_centered); });
      float* out = dev_zeros(xd.size());
      const float* dx = dev(xd);
      const float* dw = param(wd);
      on(*cuda_, [&] { cuda_->rms_norm(dx, dw, out, rows, d, 1e-6f, zero_centered); });
      EXPECT_LT(rel_l2(host(out, xd.size()), want), 1e-5) << "dim " << d;
    }
  }
  {
    std::vector<float> want_silu(x.size()), want_sig = x, want_add = x;
    on(*ref_, [&] {
      ref_->silu_mul(x.data(), g.data(), want_silu.data(), x.size());
      ref_->mul_sigmoid(want_sig.data(), g.data(), x.size());
      ref_->add(want_add.data(), g.data(), x.size());
    });
    const float *dx = dev(x), *dg = dev(g);
    float *silu = dev_zeros(x.size()), *sig = dev(x), *sum = dev(x);
    on(*cuda_, [&] {
      cuda_->silu_mul(dx, dg, silu, x.size());
      cuda_->mul_sigmoid(sig, dg, x.size());
      cuda_->add(sum, dg, x.size());
    });
    EXPECT_LT(rel_l2(host(silu, x.size()), want_silu), 1e-5);
    EXPECT_LT(rel_l2(host(sig, x.size()), want_sig), 1e-5);
    EXPECT_LT(rel_l2(host(sum, x.size()), want_add), 1e-6);
  }
  {
    const Matrix table = weight(1000, 64);
    const std::vector<int32_t> ids = {3, 999, 0, 3, 517};
    const std::vector<std::size_t> pick = {4, 1, 1};
    std::vector<float> want(ids.size() * 64), want_rows(pick.size() * 64);
    on(*ref_, [&] {
      ref_->embedding(table, ids, want.data());
      ref_->gather_rows(want.data(), pick, 64, want_rows.data());
    });
    float *out = dev_zeros(want.size()), *picked = dev_zeros(want_rows.size());
    on(*cuda_, [&] {
      cuda_->embedding(table, ids, out);
      cuda_->gather_rows(out, pick, 64, picked);
    });
    EXPECT_EQ(host(out, want.size()), want);
    EXPECT_EQ(host(picked, want_rows.size()), want_rows);
  }
}

// Llama 4's row scalings: by the sigmoid of the top router logit (E 16, and 130: wider than a warp
// and no multiple of one) and by the attention temperature at positions either side of floor_scale.
TEST_F(CudaOps, Llama4RowScalingsLikeTheReference) {
  const std::size_t T = 37, H = 640;
  const std::vector<float> x = random(T * H);
  for (std::size_t E : {std::size_t(16), std::size_t(130)}) {
    const std::vector<float> logits = random(T * E);
    std::vector<float> want(x.size());
    on(*ref_, [&] { ref_->scale_by_top_sigmoid(x.data(), logits.data(), T, H, E, want.data()); });
    const float *dx = dev(x), *dl = dev(logits);
    float* out = dev_zeros(x.size());
    on(*cuda_, [&] { cuda_->scale_by_top_sigmoid(dx, dl, T, H, E, out); });
    EXPECT_LT(rel_l2(host(out, x.size()), want), 1e-6) << E;
  }
  std::vector<int64_t> pos(T);
  for (std::size_t t = 0; t < T; ++t) pos[t] = int64_t(8180 + 7 * t);
  std::vector<float> want = x;
  on(*ref_, [&] { ref_->attention_temperature(want.data(), T, H, pos.data(), 8192.f, 0.1f); });
  float* q = dev(x);
  on(*cuda_, [&] { cuda_->attention_temperature(q, T, H, cuda_->stage(pos), 8192.f, 0.1f); });
  EXPECT_LT(rel_l2(host(q, x.size()), want), 1e-6);
}

// Gemma's element-wise ops: the GeGLU product, a scale, the final logits' softcap.
TEST_F(CudaOps, GemmaGeGluScaleAndSoftcapLikeTheReference) {
  const std::size_t n = 10007;
  const std::vector<float> g = random(n, 3.f), u = random(n), x = random(n, 20.f);
  std::vector<float> want(n);
  on(*ref_, [&] { ref_->gelu_tanh_mul(g.data(), u.data(), want.data(), n); });
  const float *dg = dev(g), *du = dev(u);
  float* out = dev_zeros(n);
  on(*cuda_, [&] { cuda_->gelu_tanh_mul(dg, du, out, n); });
  EXPECT_LT(rel_l2(host(out, n), want), 1e-6);
  std::vector<float> scaled = x, capped = x;
  on(*ref_, [&] {
    ref_->scale(scaled.data(), n, 11.3137f);
    ref_->softcap(capped.data(), n, 30.f);
  });
  float *ds = dev(x), *dc = dev(x);
  on(*cuda_, [&] {
    cuda_->scale(ds, n, 11.3137f);
    cuda_->softcap(dc, n, 30.f);
  });
  EXPECT_LT(rel_l2(host(ds, n), scaled), 1e-7);
  EXPECT_LT(rel_l2(host(dc, n), capped), 1e-6);
}

TEST_F(CudaOps, RopeInEveryLayoutAndTheGatedQuerySplit) {
  const std::size_t T = 19, heads = 6;
  for (auto [head_dim, rotary, layout] :
       {std::tuple{128, 128, ref::RopeLayout::kNeox}, {256, 64, ref::RopeLayout::kNeox}, {64, 64, ref::RopeLayout::kGptj}}) {
    ref::RopeSpec spec{std::size_t(head_dim), std::size_t(rotary), 1e6, layout};
    if (head_dim == 64) spec.proportional_angles = 8;  // Gemma 4's proportional RoPE: the rest unrotated
    const std::vector<float> inv = ref::rope_inv_freq(spec), x = random(T * heads * std::size_t(head_dim));
    std::vector<int64_t> positions(T);
    for (std::size_t t = 0; t < T; ++t) positions[t] = int64_t(t * 997 % 40000);
    std::vector<float> want = x;
    on(*ref_, [&] { ref_->rope(want.data(), T, heads, spec, inv.data(), positions.data()); });
    float* dx = dev(x);
    const float* dinv = param(inv);
    on(*cuda_, [&] { cuda_->rope(dx, T, heads, spec, dinv, cuda_->stage(positions)); });
    EXPECT_LT(rel_l2(host(dx, x.size()), want), 1e-5) << "head_dim " << head_dim << " rotary " << rotary;
  }
  const std::size_t D = 128;
  const std::vector<float> qg = random(T * heads * 2 * D);
  std::vector<float> wq(T * heads * D), wg(T * heads * D);
  on(*ref_, [&] { ref_->split_gated_query(qg.data(), T, heads, D, wq.data(), wg.data()); });
  float *q = dev_zeros(wq.size()), *gate = dev_zeros(wg.size());
  const float* dqg = dev(qg);
  on(*cuda_, [&] { cuda_->split_gated_query(dqg, T, heads, D, q, gate); });
  EXPECT_EQ(host(q, wq.size()), wq);
  EXPECT_EQ(host(gate, wg.size()), wg);
}

// One attention call over several sequences against the reference, KV written by the same call
// as a layer does: each sequence's earlier context (pos0 keys) first, then its rows.
struct AttnSeqShape {
  std::size_t rows;
  int64_t pos0;
};
struct AttnCase {
  int heads, kv_heads, D, page, window;
  bool sinks;
  int chunk;
};

class CudaAttention : public CudaOps {
 protected:
  void expect_attention_like_the_reference(const AttnCase& c, const std::vector<AttnSeqShape>& shape) {
    const auto [heads, kv_heads, D, page, window, with_sinks, chunk] = c;
    std::size_t T = 0;
    for (const AttnSeqShape& q : shape) T += q.rows;
    KvLayout lay{2, kv_heads, D, page, KvDType::kF32, {}};
    KvLayout dlay = lay;
    dlay.dtype = KvDType::kBf16;
    int64_t pages = 0;
    for (const AttnSeqShape& q : shape) pages += lay.pages_for(q.pos0 + int64_t(q.rows));
    const std::size_t pool_bytes = std::size_t(pages + 2) * lay.page_bytes();
    auto ref_pool = *KvPool::create(lay, pool_bytes);
    auto dev_pool = *KvPool::create(dlay, pool_bytes, cuda_->memory());
    std::vector<std::vector<KvPageRef>> keep(shape.size() * 2);
    std::vector<std::vector<std::byte*>> ref_tables(shape.size()), dev_tables(shape.size());
    std::vector<AttentionSeq> ref_seqs, dev_seqs;
    std::size_t row = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const int64_t ctx = shape[i].pos0 + int64_t(shape[i].rows);
      for (int64_t p = 0; p < lay.pages_for(ctx); ++p) {
        keep[2 * i].push_back(*ref_pool->allocate());
        keep[2 * i + 1].push_back(*dev_pool->allocate());
        ref_tables[i].push_back(keep[2 * i].back()->data());
        dev_tables[i].push_back(keep[2 * i + 1].back()->data());
      }
      if (shape[i].pos0 > 0) {
        const std::size_t n = std::size_t(shape[i].pos0) * std::size_t(kv_heads * D);
        const std::vector<float> k = random(n), v = random(n);
        const AttentionSeq r{0, std::size_t(shape[i].pos0), 0, ref_tables[i].data()};
        const AttentionSeq d{0, std::size_t(shape[i].pos0), 0, dev_tables[i].data()};
        on(*ref_, [&] { ref_->kv_write(lay, 1, k.data(), v.data(), {&r, 1}); });
        const float *dk = dev(k), *dv = dev(v);
        on(*cuda_, [&] { cuda_->kv_write(dlay, 1, dk, dv, {&d, 1}); });
      }
      ref_seqs.push_back({row, shape[i].rows, shape[i].pos0, ref_tables[i].data()});
      dev_seqs.push_back({row, shape[i].rows, shape[i].pos0, dev_tables[i].data()});
      row += shape[i].rows;
    }
    const std::vector<float> q = random(T * std::size_t(heads * D)), k = random(T * std::size_t(kv_heads * D)),
                             v = random(k.size());
    const float scale = 1.f / std::sqrt(float(D));
    const std::vector<float> sinks = random(std::size_t(heads));
    const AttentionOptions ref_opt{window, with_sinks ? sinks.data() : nullptr, chunk};
    const AttentionOptions dev_opt{window, with_sinks ? param(sinks) : nullptr, chunk};
    std::vector<float> want(q.size());
    on(*ref_, [&] {
      ref_->kv_write(lay, 1, k.data(), v.data(), ref_seqs);
      ref_->attention(lay, 1, q.data(), std::size_t(heads), scale, ref_seqs, want.data(), ref_opt);
    });
    const float *dq = dev(q), *dk = dev(k), *dv = dev(v);
    float* out = dev_zeros(q.size());
    on(*cuda_, [&] {
      cuda_->kv_write(dlay, 1, dk, dv, dev_seqs);
      cuda_->attention(dlay, 1, dq, std::size_t(heads), scale, dev_seqs, out, dev_opt);
    });
    const std::vector<float> got = host(out, q.size());
    EXPECT_LT(rel_l2(got, want), 1e-2) << heads << "/" << kv_heads << " heads, D " << D << ", window " << window
                                       << ", chunk " << chunk << (with_sinks ? ", sinks" : "");
    // Row by row too: a long row's error must not hide a short row's.
    row = 0;
    const std::size_t W = std::size_t(heads * D);
    for (const AttnSeqShape& sq : shape) {
      const auto at = [&](const std::vector<float>& x) {
        return std::vector<float>(x.begin() + std::ptrdiff_t(row * W), x.begin() + std::ptrdiff_t((row + sq.rows) * W));
      };
      EXPECT_LT(rel_l2(at(got), at(want)), 1e-2) << "the sequence at row " << row << " (" << sq.pos0 << " keys before)";
      row += sq.rows;
    }
  }
};

// Four sequences in one call: decoding deep in its context, a fresh prefill, a chunk in the middle
// of a page, and a long chunk after a cache (the tiled prefill kernel's rows); GQA. Plain causal,
// with a sliding window and sinks (gpt-oss), with a window longer than most rows' context, and
// chunked (Llama 4) with chunks shorter and longer than a key tile.
TEST_F(CudaAttention, PagedAttentionOverSeveralSequences) {
  for (const AttnCase& c : {AttnCase{8, 2, 128, 64, 0, false, 0},
                            {4, 4, 256, 16, 0, false, 0},
                            {16, 2, 128, 32, 0, false, 0},
                            {8, 2, 64, 16, 40, true, 0},
                            {16, 2, 128, 32, 40, true, 0},
                            {8, 2, 128, 64, 300, false, 0},
                            {8, 2, 64, 16, 0, false, 24},
                            {16, 2, 128, 32, 0, false, 100}})
    expect_attention_like_the_reference(c, {{1, 700}, {45, 0}, {20, 50}, {150, 37}});
}

// Decode rows alone over long contexts (the steps of a coding agent deep in its conversation): one
// row, then three of very different lengths in one call (the shorter rows leave some of the
// longest row's key splits empty). Qwen3-MoE's heads (32 over 4 kv heads), a group of 16, sinks
// with head_dim 64, gpt-oss's sliding window with sinks, head_dim 256, and Llama 4's chunks of
// 8,192 keys (a group of 5; the row past the first chunk sees only its own chunk's keys, so most
// splits of it are empty). Every case but the window's splits its keys on a GPU of 132 SMs
// (AttentionPlan.TheGpuSuitesLongDecodeShapesSplit); groups of up to 8 heads of 64 or 128 dims run
// on the tensor cores (AttentionPlan.DecodeRowsOfSmallGroupsTakeTheTensorCores).
TEST_F(CudaAttention, DecodeAttentionOverLongContexts) {
  for (const AttnCase& c : {AttnCase{32, 4, 128, 64, 0, false, 0},
                            {32, 2, 128, 16, 0, false, 0},
                            {64, 8, 64, 16, 0, true, 0},
                            {64, 8, 64, 16, 128, true, 0},
                            {16, 2, 256, 32, 0, false, 0},
                            {40, 8, 128, 64, 0, false, 8192}}) {
    expect_attention_like_the_reference(c, {{1, 9000}});
    expect_attention_like_the_reference(c, {{1, 2500}, {1, 40}, {1, 6000}});
    // Rows of several tokens a sequence (a verified draft, a short chunk), some within one key step.
    expect_attention_like_the_reference(c, {{3, 130}, {2, 5}, {4, 1000}});
  }
}

// The fused inputs of an attention layer (q/k norms, RoPE, the KV write: one launch on the GPU)
// against the reference doing them op by op: q and k as left, then attention over the KV written.
TEST_F(CudaOps, AttentionInputsNormRotateAndWriteLikeTheReference) {
  struct Case {
    int heads, kv_heads, D, rotary;
    ref::RopeLayout layout;
    bool norm, zero_centered;
    bool per_head = true;  // false: one norm over all heads (OLMoE), the default composition
    float attention_factor = 1.f;  // YaRN's, on cos/sin
  };
  for (const Case c : {Case{8, 2, 128, 128, ref::RopeLayout::kNeox, true, false},
                       Case{4, 2, 256, 64, ref::RopeLayout::kNeox, true, true},
                       Case{4, 4, 64, 64, ref::RopeLayout::kGptj, false, false},
                       Case{8, 2, 64, 64, ref::RopeLayout::kNeox, true, false, false},
                       // DeepSeek-V3's latent attention: 192-wide heads, 64 interleaved rope dims.
                       Case{4, 4, 192, 64, ref::RopeLayout::kGptj, false, false, true, 1.037f}}) {
    const std::size_t D = std::size_t(c.D), heads = std::size_t(c.heads), KV = std::size_t(c.kv_heads);
    KvLayout lay{1, int64_t(KV), int64_t(D), 32, KvDType::kF32, {}};
    KvLayout dlay = lay;
    dlay.dtype = KvDType::kBf16;
    auto ref_pool = *KvPool::create(lay, 16ull << 20);
    auto dev_pool = *KvPool::create(dlay, 16ull << 20, cuda_->memory());
    // A decode row deep in a page and a 20-row prefill, in one call.
    const std::vector<std::pair<std::size_t, int64_t>> shape = {{1, 45}, {20, 0}};
    std::vector<KvPageRef> keep;
    std::vector<std::vector<std::byte*>> ref_tables(2), dev_tables(2);
    std::vector<AttentionSeq> ref_seqs, dev_seqs;
    std::vector<int64_t> positions;
    std::size_t T = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const auto [rows, pos0] = shape[i];
      for (int64_t p = 0; p < lay.pages_for(pos0 + int64_t(rows)); ++p) {
        keep.push_back(*ref_pool->allocate());
        ref_tables[i].push_back(keep.back()->data());
        keep.push_back(*dev_pool->allocate());
        dev_tables[i].push_back(keep.back()->data());
      }
      if (pos0 > 0) {
        const std::vector<float> k = random(std::size_t(pos0) * KV * D), v = random(k.size());
        const AttentionSeq r{0, std::size_t(pos0), 0, ref_tables[i].data()};
        const AttentionSeq d{0, std::size_t(pos0), 0, dev_tables[i].data()};
        on(*ref_, [&] { ref_->kv_write(lay, 0, k.data(), v.data(), {&r, 1}); });
        const float *dk = dev(k), *dv = dev(v);
        on(*cuda_, [&] { cuda_->kv_write(dlay, 0, dk, dv, {&d, 1}); });
      }
      ref_seqs.push_back({T, rows, pos0, ref_tables[i].data()});
      dev_seqs.push_back({T, rows, pos0, dev_tables[i].data()});
      for (std::size_t r = 0; r < rows; ++r) positions.push_back(pos0 + int64_t(r));
      T += rows;
    }
    ref::RopeSpec rope{D, std::size_t(c.rotary), 1e6, c.layout};
    rope.attention_factor = c.attention_factor;
    const std::vector<float> inv = ref::rope_inv_freq(rope), qn = random(c.per_head ? D : heads * D),
                             kn = random(c.per_head ? D : KV * D);
    const std::vector<float> q = random(T * heads * D), k = random(T * KV * D), v = random(k.size());
    std::vector<float> wq = q, wk = k, want(q.size());
    const float scale = 1.f / std::sqrt(float(D));
    on(*ref_, [&] {
      const Backend::QkNorm norm{qn.data(), kn.data(), 1e-6f, c.zero_centered, c.per_head};
      ref_->attention_inputs(lay, 0, wq.data(), wk.data(), v.data(), T, heads, c.norm ? &norm : nullptr, rope,
                             inv.data(), positions.data(), ref_seqs);
      ref_->attention(lay, 0, wq.data(), heads, scale, ref_seqs, want.data(), {});
    });
    float *dq = dev(q), *dk = dev(k), *out = dev_zeros(q.size());
    const float* dv = dev(v);
    const Backend::QkNorm dnorm{param(qn), param(kn), 1e-6f, c.zero_centered, c.per_head};
    const float* dinv = param(inv);
    on(*cuda_, [&] {
      cuda_->attention_inputs(dlay, 0, dq, dk, dv, T, heads, c.norm ? &dnorm : nullptr, rope, dinv,
                              cuda_->stage(positions), dev_seqs);
      cuda_->attention(dlay, 0, dq, heads, scale, dev_seqs, out, {});
    });
    const std::string what = "D " + std::to_string(D) + " rotary " + std::to_string(c.rotary);
    EXPECT_LT(rel_l2(host(dq, q.size()), wq), 1e-5) << what;
    EXPECT_LT(rel_l2(host(dk, k.size()), wk), 1e-5) << what;
    EXPECT_LT(rel_l2(host(out, q.size()), want), 1e-2) << what;
  }
}

// The residual add and the norm after it, fused, against the two ops.
TEST_F(CudaOps, AddRmsNormAddsTheResidualThenNorms) {
  const std::size_t rows = 5;
  for (std::size_t d : {std::size_t(2048), std::size_t(36)}) {  // the vector kernel; the fallback
    const std::vector<float> x = random(rows * d), delta = random(rows * d), w = random(d);
    std::vector<float> want_x = x, want(x.size());
    on(*ref_, [&] { ref_->add_rms_norm(want_x.data(), delta.data(), w.data(), want.data(), rows, d, 1e-6f, true); });
    float *dx = dev(x), *out = dev_zeros(x.size());
    const float *dd = dev(delta), *dw = param(w);
    on(*cuda_, [&] { cuda_->add_rms_norm(dx, dd, dw, out, rows, d, 1e-6f, true); });
    EXPECT_EQ(host(dx, x.size()), want_x) << "dim " << d;
    EXPECT_LT(rel_l2(host(out, x.size()), want), 1e-5) << "dim " << d;
  }
}

// Tokens drawn on the GPU (only they come back) against the host sampler with the same draws:
// greedy exactly; sampled ones from the same kept set and almost always the same token (fp32 sums
// against the host's doubles can move a draw that falls on a boundary).
TEST_F(CudaOps, SamplingOnTheGpuDrawsWhatTheHostSamplerDraws) {
  const std::size_t V = 6000, rows = 6;
  std::vector<float> logits = random(rows * V, 3.f);
  for (std::size_t i = 0; i < V; i += 7) logits[i] = std::round(logits[i]);  // ties
  const float* dl = dev(logits);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::size_t same = 0, total = 0;
  for (const SamplingParams& p :
       {SamplingParams{.greedy = true}, SamplingParams{.temperature = 0.8f},
        SamplingParams{.temperature = 0.7f, .top_k = 40}, SamplingParams{.temperature = 1.0f, .top_p = 0.9f},
        SamplingParams{.temperature = 1.2f, .top_k = 100, .top_p = 0.8f, .min_p = 0.02f},
        SamplingParams{.temperature = 0.9f, .min_p = 0.1f}}) {
    for (int round = 0; round < 20; ++round) {
      std::vector<SampleRequest> reqs;
      std::vector<std::size_t> picked_rows;
      std::vector<int32_t> got(rows, -1);
      std::vector<int32_t*> outs;
      for (std::size_t r = 0; r < rows; ++r) {
        reqs.push_back({p, uni(rng_)});
        picked_rows.push_back((r * 5 + std::size_t(round)) % rows);
        outs.push_back(&got[r]);
      }
      on(*cuda_, [&] { cuda_->sample(dl, V, picked_rows, reqs, outs); });
      for (std::size_t r = 0; r < rows; ++r) {
        const std::span<const float> row(logits.data() + picked_rows[r] * V, V);
        const int32_t want = Sampler::pick(row, reqs[r]);
        if (p.greedy) {
          EXPECT_EQ(got[r], want);
          continue;
        }
        ASSERT_GE(got[r], 0);
        EXPECT_GT(sampling_distribution(row, p)[std::size_t(got[r])], 0.f) << "a token the warpers drop";
        same += got[r] == want;
        ++total;
      }
    }
  }
  EXPECT_GE(same * 100, total * 97) << same << " of " << total << " draws agree";
}

TEST_F(CudaOps, MoeRoutesAndCombinesLikeTheReference) {
  // 16 experts: the router keeps a token's logits in registers; 300: it reads them from memory.
  // The layers live as long as the backend, as a model's do (it keeps a table per layer).
  std::deque<MoeWeights> layers;
  // 1,280 intermediate rows: more than the decode down kernel's staged rows take (the general one).
  for (const auto& [E, K, I] : {std::tuple<int64_t, std::size_t, int64_t>{16, 4, 64}, {300, 8, 64}, {16, 4, 1280}}) {
    const int64_t H = 256;
    MoeWeights& w = layers.emplace_back();
    w.router_spec = {std::size_t(E), K, ref::RouterScoring::kSoftmax, true, 1.f};
    w.hidden = H;
    w.router = weight(E, H);
    for (int64_t e = 0; e < E; ++e) w.experts.push_back({weight(I, H), weight(I, H), weight(H, I)});
    w.has_shared = true;
    w.shared = {weight(2 * I, H), weight(2 * I, H), weight(H, 2 * I)};
    w.shared_gate = weight(1, H);
    for (std::size_t T : {1, 3, 16, 70}) {
      SCOPED_TRACE("E " + std::to_string(E) + " I " + std::to_string(I));
      expect_moe_like_reference(w, w, T);
    }
  }
}

// A router row of NaNs (a broken checkpoint, an overflowed activation) is ranked last by every
// top-k path (a block ranking one token; a warp per token, its logits in registers or read from
// memory), as the reference ranks it: never chosen while K finite experts remain, never an index
// past the experts (which the expert kernels would read out of bounds); the step stays usable. A
// token whose input is NaN everywhere routes to valid experts too. Sigmoid scores: the finite
// choices' weights stay finite, so the outputs compare.
TEST_F(CudaOps, NanRouterRowsAreChosenLast) {
  std::deque<MoeWeights> layers;
  for (const auto& [E, K] : {std::pair<int64_t, std::size_t>{16, 4}, {300, 8}}) {
    const int64_t H = 256, I = 64;
    MoeWeights& w = layers.emplace_back();
    w.router_spec = {std::size_t(E), K, ref::RouterScoring::kSigmoid, true, 1.f};
    w.hidden = H;
    w.router = weight(E, H, {1, 5});
    for (int64_t e = 0; e < E; ++e) w.experts.push_back({weight(I, H), weight(I, H), weight(H, I)});
    for (std::size_t T : {1, 3, 16}) {
      SCOPED_TRACE("E " + std::to_string(E) + " T " + std::to_string(T));
      expect_moe_like_reference(w, w, T);
      std::vector<float> x = random(T * std::size_t(H));
      std::fill_n(x.begin(), H, std::numeric_limits<float>::quiet_NaN());  // token 0: NaN everywhere
      float* out = dev_zeros(x.size());
      RoutingTrace trace;
      cuda_->set_routing_trace(&trace);
      on(*cuda_, [&] { cuda_->moe(w, dev(x), T, out, nullptr); });
      cuda_->set_routing_trace(nullptr);
      ASSERT_EQ(trace.calls.size(), 1u);
      for (std::size_t i = 0; i < T * K; ++i) {
        const int32_t e = trace.calls[0][i];
        EXPECT_TRUE(e >= 0 && e < E) << "choice " << i << ": expert " << e;
        if (i >= K) {
          EXPECT_TRUE(e != 1 && e != 5) << "token " << i / K << " chose a NaN row";
        }
      }
      const std::vector<float> y = host(out, x.size());
      for (std::size_t i = std::size_t(H); i < y.size(); ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
    }
  }
}

// Gemma 4's MoE: the router reads an input of its own, each chosen weight times its expert's
// per_expert_scale, GeGLU experts (the decode tables up to 16 tokens, the batched GEMMs at 70), no
// shared expert.
TEST_F(CudaOps, GemmaRouterInputPerExpertScalesAndGeGluExpertsLikeTheReference) {
  std::deque<MoeWeights> layers;
  const int64_t E = 32, H = 256, I = 64;
  const std::size_t K = 4;
  MoeWeights& w = layers.emplace_back();
  w.router_spec = {std::size_t(E), K, ref::RouterScoring::kSoftmax, true, 1.f};
  w.hidden = H;
  w.router = weight(E, H);
  w.glu.gelu_tanh = true;
  for (int64_t e = 0; e < E; ++e) w.experts.push_back({weight(I, H), weight(I, H), weight(H, I)});
  std::vector<float> scales = random(std::size_t(E), 0.2f);
  for (float& s : scales) s += 1.f;
  MoeWeights& on_host = layers.emplace_back(w);
  on_host.router_spec.per_expert_scale = scales.data();
  w.router_spec.per_expert_scale = param(scales);
  for (std::size_t T : {1, 3, 16, 70}) expect_moe_like_reference(w, on_host, T, random(T * std::size_t(H)));
}

// gpt-oss's MoE: a biased router, experts with gate, up and down biases and the clamped GLU, in
// bf16 and in MXFP4 (the released checkpoints' experts), through the decode tables (up to 16
// tokens) and the batched GEMMs (70). A limit of 1.5 instead of 7 so the clamp bites on both sides.
TEST_F(CudaOps, GptOssBiasedClampedExpertsLikeTheReference) {
  std::deque<MoeWeights> layers;
  std::deque<std::vector<float>> params;
  std::deque<std::vector<std::uint8_t>> blocks;
  const int64_t E = 32, H = 256, I = 128;
  const std::size_t K = 4;
  // MXFP4 rows of random codes, each 32-value block's E8M0 scale 2^-9 .. 2^-5 (|w| <= 6 x 2^-5).
  std::uniform_int_distribution<int> byte(0, 255), scale(118, 122);
  const auto mxfp4 = [&](int64_t rows, int64_t cols) {
    const std::size_t row_bytes = std::size_t(cols / 32) * 17;
    std::vector<std::uint8_t>& b = blocks.emplace_back(std::size_t(rows) * row_bytes);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint8_t(i % 17 == 0 ? scale(rng_) : byte(rng_));
    Matrix m{DType::kMXFP4, rows, cols, reinterpret_cast<const std::byte*>(b.data()), row_bytes};
    EXPECT_TRUE(cuda_->place(m));
    return m;
  };
  for (const bool fp4 : {false, true}) {
    MoeWeights& w = layers.emplace_back();
    w.router_spec = {std::size_t(E), K, ref::RouterScoring::kSoftmax, true, 1.f};
    w.hidden = H;
    w.router = weight(E, H);
    w.glu.clamped = true;
    w.glu.limit = 1.5f;
    for (int64_t e = 0; e < E; ++e) {
      if (fp4) {
        w.experts.push_back({mxfp4(I, H), mxfp4(I, H), mxfp4(H, I)});
      } else {
        w.experts.push_back({weight(I, H), weight(I, H), weight(H, I)});
      }
    }
    const std::vector<float>& router_bias = params.emplace_back(random(std::size_t(E), 0.5f));
    const std::vector<float>& gate_bias = params.emplace_back(random(std::size_t(E * I)));
    const std::vector<float>& up_bias = params.emplace_back(random(std::size_t(E * I)));
    const std::vector<float>& down_bias = params.emplace_back(random(std::size_t(E * H), 0.3f));
    MoeWeights& on_host = layers.emplace_back(w);  // the reference reads the biases from host memory
    on_host.router_bias = router_bias.data();
    on_host.gate_bias = gate_bias.data();
    on_host.up_bias = up_bias.data();
    on_host.down_bias = down_bias.data();
    w.router_bias = param(router_bias);
    w.gate_bias = param(gate_bias);
    w.up_bias = param(up_bias);
    w.down_bias = param(down_bias);
    for (std::size_t T : {1, 3, 16, 70}) {
      SCOPED_TRACE(fp4 ? "MXFP4 experts" : "bf16 experts");
      expect_moe_like_reference(w, on_host, T);
    }
  }
}

// Layers of different shapes in one page (Gemma 4: full layers with wider heads, fewer of them):
// each layer's K/V written and attended where its own shape puts them.
TEST_F(CudaOps, PagedAttentionInLayersOfDifferentShapes) {
  KvLayout lay{3, 0, 0, 32, KvDType::kF32, {{4, 64}, {1, 128}, {2, 32}}};
  KvLayout dlay = lay;
  dlay.dtype = KvDType::kBf16;
  auto ref_pool = *KvPool::create(lay, 16ull << 20);
  auto dev_pool = *KvPool::create(dlay, 16ull << 20, cuda_->memory());
  const std::size_t T = 70, heads = 8;
  std::vector<KvPageRef> keep;
  std::vector<std::byte*> ref_table, dev_table;
  for (int64_t p = 0; p < lay.pages_for(int64_t(T)); ++p) {
    keep.push_back(*ref_pool->allocate());
    ref_table.push_back(keep.back()->data());
    keep.push_back(*dev_pool->allocate());
    dev_table.push_back(keep.back()->data());
  }
  const AttentionSeq rs{0, T, 0, ref_table.data()}, ds{0, T, 0, dev_table.data()};
  std::vector<std::vector<float>> want(3);
  std::vector<float*> got(3);
  // Every layer written first, then each attended: a layer that wrote over another shows.
  std::vector<std::vector<float>> qs, ks, vs;
  for (int64_t l = 0; l < 3; ++l) {
    const std::size_t D = std::size_t(lay.head_dim_at(l)), KV = std::size_t(lay.kv_heads_at(l));
    qs.push_back(random(T * heads * D));
    ks.push_back(random(T * KV * D));
    vs.push_back(random(T * KV * D));
    on(*ref_, [&] { ref_->kv_write(lay, l, ks[l].data(), vs[l].data(), {&rs, 1}); });
    const float *dk = dev(ks[l]), *dv = dev(vs[l]);
    on(*cuda_, [&] { cuda_->kv_write(dlay, l, dk, dv, {&ds, 1}); });
  }
  for (int64_t l = 0; l < 3; ++l) {
    const std::size_t D = std::size_t(lay.head_dim_at(l));
    want[std::size_t(l)].resize(qs[l].size());
    on(*ref_, [&] {
      ref_->attention(lay, l, qs[l].data(), heads, 1.f / std::sqrt(float(D)), {&rs, 1}, want[std::size_t(l)].data(),
                      {});
    });
    const float* dq = dev(qs[l]);
    float* out = dev_zeros(qs[l].size());
    on(*cuda_, [&] { cuda_->attention(dlay, l, dq, heads, 1.f / std::sqrt(float(D)), {&ds, 1}, out, {}); });
    EXPECT_LT(rel_l2(host(out, qs[l].size()), want[std::size_t(l)]), 1e-2) << "layer " << l;
  }
}

// DeepSeek-V3's router: sigmoid scores, the choice by score + e_score_correction_bias among the best
// groups, weights renormalised and scaled; its shared experts added without a gate. Groups of 4, of
// 32 (DeepSeek-V3's 256 in 8) and one group (GLM-4.5: the bias alone steers the choice); and ERNIE
// 4.5's: softmax scores with the bias, 64 experts top-6.
TEST_F(CudaOps, GroupedSigmoidRouterAndUngatedSharedExpertsLikeTheReference) {
  std::deque<MoeWeights> layers;
  std::deque<std::vector<float>> biases;
  for (const auto& [E, K, G, TG, sigmoid] :
       {std::tuple<int64_t, std::size_t, std::size_t, std::size_t, bool>{16, 4, 4, 2, true},
        {256, 8, 8, 4, true},
        {64, 6, 1, 1, true},
        {64, 6, 1, 1, false}}) {
    const int64_t H = 256, I = 64;
    MoeWeights& w = layers.emplace_back();
    w.router_spec.num_experts = std::size_t(E);
    w.router_spec.top_k = K;
    w.router_spec.scoring = sigmoid ? ref::RouterScoring::kSigmoid : ref::RouterScoring::kSoftmax;
    w.router_spec.renormalize = true;
    w.router_spec.scaling = sigmoid ? 2.5f : 1.f;
    w.router_spec.n_group = G;
    w.router_spec.topk_group = TG;
    w.hidden = H;
    w.router = weight(E, H);
    for (int64_t e = 0; e < E; ++e) w.experts.push_back({weight(I, H), weight(I, H), weight(H, I)});
    w.has_shared = true;
    w.shared_gated = false;
    w.shared = {weight(I, H), weight(I, H), weight(H, I)};
    const std::vector<float>& bias = biases.emplace_back(random(std::size_t(E), 0.1f));
    MoeWeights& on_host = layers.emplace_back(w);  // the reference reads the bias from host memory
    on_host.router_spec.correction_bias = bias.data();
    w.router_spec.correction_bias = param(bias);
    for (std::size_t T : {1, 3, 16, 70}) {
      SCOPED_TRACE("E " + std::to_string(E) + " groups " + std::to_string(G));
      expect_moe_like_reference(w, on_host, T);
    }
  }
}

// Latent attention's data movement (a column block, one row repeated per head, a zero fill) and
// its RoPE: YaRN frequencies, interleaved pairs, an attention factor on cos/sin, alone and fused
// into attention_inputs.
TEST_F(CudaOps, ColumnCopiesAndYarnRopeWithAnAttentionFactor) {
  const std::size_t T = 37, heads = 4, D = 192, R = 64;
  const std::vector<float> src = random(T * 576), zero(D - 128, 0.f);  // a zero row as wide as the fill
  std::vector<float> want(T * heads * D, 1.f);
  on(*ref_, [&] {
    ref_->copy_columns(src.data() + 512, 576, heads, want.data(), D, T * heads, R);
    ref_->copy_columns(zero.data(), 0, T * heads, want.data() + 128, D, T * heads, D - 128);
  });
  float* got = dev(std::vector<float>(want.size(), 1.f));
  const float* dsrc = dev(src);
  const float* dzero = param(zero);
  on(*cuda_, [&] {
    cuda_->copy_columns(dsrc + 512, 576, heads, got, D, T * heads, R);
    cuda_->copy_columns(dzero, 0, T * heads, got + 128, D, T * heads, D - 128);
  });
  EXPECT_EQ(host(got, want.size()), want);

  ref::RopeSpec spec{D, R, 10000.0, ref::RopeLayout::kGptj};
  spec.yarn = {40.0, 32, 1, 4096, true};
  spec.attention_factor = float(ref::yarn_attention_factor(40.0, 1.0, 0.707));
  const std::vector<float> inv = ref::rope_inv_freq(spec), x = random(T * heads * D);
  std::vector<int64_t> positions(T);
  for (std::size_t t = 0; t < T; ++t) positions[t] = int64_t(t * 997 % 40000);
  std::vector<float> rotated = x;
  on(*ref_, [&] { ref_->rope(rotated.data(), T, heads, spec, inv.data(), positions.data()); });
  float* dx = dev(x);
  const float* dinv = param(inv);
  on(*cuda_, [&] { cuda_->rope(dx, T, heads, spec, dinv, cuda_->stage(positions)); });
  EXPECT_LT(rel_l2(host(dx, x.size()), rotated), 1e-5);
}

TEST_F(CudaOps, DeltaNetUpdatesEachSequenceStateLikeTheReference) {
  ref::DeltaNetDims d;
  d.hidden = 64;
  d.num_k_heads = 2;
  d.num_v_heads = 4;
  d.head_k_dim = 128;
  d.head_v_dim = 128;
  d.conv_kernel = 4;
  // Value heads reading their key head as HF groups them, and tiled (Qwen3.5 GGUF files).
  for (const bool tiled : {false, true}) {
    SCOPED_TRACE(tiled ? "tiled value heads" : "grouped value heads");
    d.v_heads_tiled = tiled;
    const std::size_t C = d.conv_dim(), nv = d.num_v_heads, VD = d.value_dim();
    const auto sizes = ref::deltanet_state_sizes(d);
    const std::vector<float> conv1d = random(C * d.conv_kernel, 0.5f), dt_bias = random(nv), a_log = random(nv, 0.5f),
                             norm = random(d.head_v_dim);
    const DeltaNetParams rp{conv1d.data(), dt_bias.data(), a_log.data(), norm.data()};
    const DeltaNetParams dp{param(conv1d), param(dt_bias), param(a_log), param(norm)};
    const std::vector<std::size_t> rows = {1, 30, 70};
    std::size_t T = 0;
    for (std::size_t r : rows) T += r;
    const std::vector<float> qkv = random(T * C), z = random(T * VD), b = random(T * nv), a = random(T * nv);
    std::vector<std::vector<float>> conv, rec;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      conv.push_back(random(sizes.conv_floats));
      rec.push_back(random(sizes.recurrent_floats, 0.1f));
    }
    std::vector<std::vector<float>> ref_conv = conv, ref_rec = rec;
    std::vector<DeltaNetSeq> ref_seqs, dev_seqs;
    std::vector<float*> dconv, drec;
    for (std::size_t i = 0, row = 0; i < rows.size(); row += rows[i], ++i) {
      ref_seqs.push_back({row, rows[i], ref_conv[i].data(), ref_rec[i].data()});
      dconv.push_back(dev(conv[i]));
      drec.push_back(dev(rec[i]));
      dev_seqs.push_back({row, rows[i], dconv[i], drec[i]});
    }
    std::vector<float> want(T * VD);
    on(*ref_, [&] { ref_->deltanet(d, rp, qkv.data(), z.data(), b.data(), a.data(), ref_seqs, want.data()); });
    const float *dqkv = dev(qkv), *dz = dev(z), *db = dev(b), *da = dev(a);
    float* out = dev_zeros(want.size());
    on(*cuda_, [&] { cuda_->deltanet(d, dp, dqkv, dz, db, da, dev_seqs, out); });
    EXPECT_LT(rel_l2(host(out, want.size()), want), 1e-4);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_LT(rel_l2(host(dconv[i], sizes.conv_floats), ref_conv[i]), 1e-6) << "sequence " << i;
      EXPECT_LT(rel_l2(host(drec[i], sizes.recurrent_floats), ref_rec[i]), 1e-4) << "sequence " << i;
    }

    // qwen3_next's fused projections split the same way.
    if (tiled) continue;
    ref::DeltaNetDims f = d;
    const std::vector<float> qkvz = random(T * (2 * d.key_dim() + 2 * VD)), ba = random(T * 2 * nv);
    std::vector<float> wqkv(T * C), wz(T * VD), wb(T * nv), wa(T * nv);
    on(*ref_,
       [&] { ref_->deltanet_unfuse(f, qkvz.data(), ba.data(), T, wqkv.data(), wz.data(), wb.data(), wa.data()); });
    float *gq = dev_zeros(wqkv.size()), *gz = dev_zeros(wz.size()), *gb = dev_zeros(wb.size()),
          *ga = dev_zeros(wa.size());
    const float *dqkvz = dev(qkvz), *dba = dev(ba);
    on(*cuda_, [&] { cuda_->deltanet_unfuse(f, dqkvz, dba, T, gq, gz, gb, ga); });
    EXPECT_EQ(host(gq, wqkv.size()), wqkv);
    EXPECT_EQ(host(gz, wz.size()), wz);
    EXPECT_EQ(host(gb, wb.size()), wb);
    EXPECT_EQ(host(ga, wa.size()), wa);
  }
}

// ---- DeepSeek sparse attention ----

// The KV of a DSA layer as the latent attention block lays it out (the heads' K/V slots, then the
// index key's), the same values in bf16 pages on both sides, for sequences of different lengths over
// several pages each: a decode row after a long context, prefills from 0 (early rows see fewer
// positions than a top-k takes), rows after a short context, and a chunk after a longer one.
class CudaOpsDsa : public CudaOps {
 protected:
  using Seq = KvSeq;
  using Kv = PagedKvTwin;
  const std::vector<Seq> shape_ = {{1, 300}, {45, 0}, {3, 2}, {20, 50}, {150, 37}};
  static constexpr int64_t kLayer = kKvLayer;
  Kv kv(int64_t slots, int64_t width, int64_t page_tokens) { return kv(slots, width, page_tokens, shape_); }
  Kv kv(int64_t slots, int64_t width, int64_t page_tokens, const std::vector<Seq>& shape) {
    return paged_kv(slots, width, page_tokens, shape, [this](std::size_t n) { return random(n); });
  }
};

// The indexer key's LayerNorm: the reference's statistics in double, its fp32 arithmetic after
// them, so the rows agree to the last bit but where a double sum rounds otherwise; in place too.
TEST_F(CudaOpsDsa, LayerNormLikeTheReference) {
  for (auto [rows, dim] : {std::pair<std::size_t, std::size_t>{5, 24}, {33, 128}, {3, 1000}}) {
    std::vector<float> x = random(rows * dim, 3.f);
    for (float& v : x) v += 2.f;  // a mean far from zero, as the variance's two passes must handle
    const std::vector<float> w = random(dim), b = random(dim);
    std::vector<float> want(x.size());
    on(*ref_, [&] { ref_->layer_norm(x.data(), w.data(), b.data(), want.data(), rows, dim, 1e-6f); });
    float* dx = dev(x);
    const float *dw = param(w), *db = param(b);
    float* out = dev_zeros(x.size());
    on(*cuda_, [&] { cuda_->layer_norm(dx, dw, db, out, rows, dim, 1e-6f); });
    const std::vector<float> got = host(out, x.size());
    EXPECT_LT(rel_l2(got, want), 1e-6) << rows << " x " << dim;
    on(*cuda_, [&] { cuda_->layer_norm(dx, dw, db, dx, rows, dim, 1e-6f); });
    EXPECT_EQ(host(dx, x.size()), got) << rows << " x " << dim;
  }
}

// The indexer's choices are the reference's exactly: the scores are its arithmetic bit for bit and
// the top-k is ref::top_k_positions on the host, so even exact ties (rows of zero queries, where
// every score is 0 and torch's tie rule picks by the pass's row length) come out the same. Index
// keys narrower than a slot, two slots wide, and DeepSeek-V3.2's shape (64 heads of 128 in a 192-wide
// slot); the choices recorded in the routing trace as the reference's forced routing reads them.
TEST_F(CudaOpsDsa, IndexerChoosesExactlyAsTheReference) {
  struct Case {
    std::size_t heads;  // the attention's KV slots before the index key's
    int64_t width, page;
    std::size_t index_heads, index_dim, top_k;
  };
  for (const Case c : {Case{3, 32, 16, 4, 24, 10}, Case{2, 32, 16, 8, 48, 20}, Case{4, 64, 32, 16, 64, 32},
                       Case{2, 192, 64, 64, 128, 64}}) {
    const int64_t slots = int64_t(c.heads) + (int64_t(c.index_dim) + c.width - 1) / c.width;
    const Kv d = kv(slots, c.width, c.page);
    IndexerSpec spec;
    spec.heads = c.index_heads;
    spec.head_dim = c.index_dim;
    spec.scale = 1.f / std::sqrt(float(c.index_dim));
    spec.weight_scale = 1.f / std::sqrt(float(c.index_heads));
    spec.top_k = c.top_k;
    spec.kv_slot = int64_t(c.heads);
    const std::size_t T = d.T, K = c.top_k, QW = c.index_heads * c.index_dim;
    std::vector<float> q = random(T * QW);
    const std::vector<float> w = random(T * c.index_heads);
    for (std::size_t t = 0; t < T; t += 7) std::fill_n(q.begin() + std::ptrdiff_t(t * QW), QW, 0.f);
    std::vector<int32_t> want(T * K, -7);
    on(*ref_, [&] { ref_->index_select(d.layout, kLayer, q.data(), w.data(), spec, d.host_seqs, want.data()); });
    const float *dq = dev(q), *dw = dev(w);
    int32_t* selected = dev(std::vector<int32_t>(T * K, -7));
    RoutingTrace trace;
    cuda_->set_routing_trace(&trace);
    on(*cuda_, [&] { cuda_->index_select(d.layout, kLayer, dq, dw, spec, d.dev_seqs, selected); });
    cuda_->set_routing_trace(nullptr);
    const std::vector<int32_t> got = host(selected, T * K);
    EXPECT_EQ(got, want) << "index keys " << c.index_dim << " wide in slots of " << c.width;
    ASSERT_EQ(trace.selections.size(), 1u);
    EXPECT_EQ(trace.selections[0], want);
    EXPECT_EQ(trace.selection_k, K);
    // Row 46 of the batch is the third sequence's first, at position 2: all three of its positions.
    for (std::size_t i = 0; i < K; ++i) EXPECT_EQ(got[46 * K + i], i < 3 ? int32_t(i) : -1) << i;
  }
}

// A prefill long enough that its scores (4.2M floats) come to the host in two chunks, with
// a decode row before it: the rows on either side of the cut choose as the reference does.
TEST_F(CudaOpsDsa, IndexerScoresOfALongPrefillComeOverInChunks) {
  const Kv d = kv(2, 32, 64, {{1, 700}, {2900, 0}});
  IndexerSpec spec;
  spec.heads = 4;
  spec.head_dim = 24;
  spec.scale = 1.f / std::sqrt(24.f);
  spec.weight_scale = 0.5f;
  spec.top_k = 16;
  spec.kv_slot = 1;
  const std::size_t T = d.T, K = spec.top_k;
  const std::vector<float> q = random(T * 4 * 24), w = random(T * 4);
  std::vector<int32_t> want(T * K);
  on(*ref_, [&] { ref_->index_select(d.layout, kLayer, q.data(), w.data(), spec, d.host_seqs, want.data()); });
  int32_t* selected = dev(std::vector<int32_t>(T * K, -7));
  const float *dq = dev(q), *dw = dev(w);
  on(*cuda_, [&] { cuda_->index_select(d.layout, kLayer, dq, dw, spec, d.dev_seqs, selected); });
  EXPECT_EQ(host(selected, T * K), want);
}

// Attention over each row's chosen positions against the reference on the same pages: chosen sets
// smaller than top_k (-1 after them), a row with none (zeros), several sequences over several
// pages, and a top_k whose shared memory needs the opt-in past 48 KB.
TEST_F(CudaOpsDsa, SparseAttentionOverTheChosenPositions) {
  struct Case {
    std::size_t heads;
    int64_t width, page;
    std::size_t top_k;
  };
  for (const Case c : {Case{3, 32, 16, 12}, Case{16, 192, 64, 64}, Case{8, 128, 32, 4096}}) {
    const Kv d = kv(int64_t(c.heads) + 1, c.width, c.page);
    const std::size_t T = d.T, K = c.top_k, D = std::size_t(c.width);
    std::vector<int32_t> selected(T * K, -1);
    for (const AttentionSeq& s : d.host_seqs) {
      for (std::size_t r = 0; r < s.rows; ++r) {
        std::vector<int32_t> order(std::size_t(s.pos0) + r + 1);
        for (std::size_t j = 0; j < order.size(); ++j) order[j] = int32_t(j);
        std::shuffle(order.begin(), order.end(), rng_);
        order.resize(std::min(order.size(), K));
        std::sort(order.begin(), order.end());
        std::copy(order.begin(), order.end(), selected.begin() + std::ptrdiff_t((s.row0 + r) * K));
      }
    }
    std::fill_n(selected.begin() + std::ptrdiff_t(50 * K), K, -1);  // a row that chose nothing
    const std::vector<float> q = random(T * c.heads * D);
    const float scale = 1.f / std::sqrt(float(D));
    std::vector<float> want(q.size());
    on(*ref_, [&] {
      ref_->sparse_attention(d.layout, kLayer, q.data(), c.heads, scale, d.host_seqs, selected.data(), K, want.data());
    });
    const float* dq = dev(q);
    const int32_t* dsel = dev(selected);
    float* out = dev_zeros(q.size());
    on(*cuda_, [&] { cuda_->sparse_attention(d.layout, kLayer, dq, c.heads, scale, d.dev_seqs, dsel, K, out); });
    const std::vector<float> got = host(out, q.size());
    EXPECT_LT(rel_l2(got, want), 1e-5) << c.heads << " heads of " << D << ", top " << K;
    for (std::size_t i = 50 * c.heads * D; i < 51 * c.heads * D; ++i) ASSERT_EQ(got[i], 0.f) << i;
  }
}

}  // namespace
}  // namespace ft::engine

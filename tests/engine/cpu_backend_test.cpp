// Every op of the CPU backend, on every kernel path this CPU runs (scalar, AVX2, AVX-512,
// AVX512-BF16, AMX), against the reference backend's fp32 definition of the same op; and the
// property the runtime is built on: an output row is the same bits whatever the number of rows
// in the call (so batched == alone and restore + suffix == full).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "fixture_moe.h"
#include "ft/engine/backend.h"
#include "ft/engine/bf16.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/expert_kernels.h"
#include "ft/engine/gguf.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::Backend;
using engine::BackendKind;
using engine::CpuIsa;
using engine::Matrix;

std::vector<float> randn(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// x with each value rounded to bf16 (nearest even), as a by-size backend's AMX products take it.
std::vector<float> bf16_rounded(std::vector<float> x) {
  for (float& v : x) v = engine::bf16_to_f32(engine::f32_to_bf16(v));
  return x;
}

// Pages for `tokens` positions of layout l, from a pool of their own, filled with NaNs (0xffff) as
// a recycled page may be: slots no row writes must never be read.
struct NanPages {
  std::shared_ptr<engine::KvPool> pool;
  std::vector<engine::KvPageRef> pages;
  std::vector<std::byte*> table;
};
NanPages nan_pages(const engine::KvLayout& l, std::size_t tokens) {
  NanPages out;
  const int64_t n = l.pages_for(int64_t(tokens));
  auto pool = engine::KvPool::create(l, std::uint64_t(n) * l.page_bytes());
  EXPECT_TRUE(pool.is_ok());
  if (!pool.is_ok()) return out;
  out.pool = *pool;
  for (int64_t p = 0; p < n; ++p) {
    out.pages.push_back(*out.pool->allocate());
    out.table.push_back(out.pages.back()->data());
    std::memset(out.table.back(), 0xff, l.page_bytes());
  }
  return out;
}

std::unique_ptr<Backend> backend(BackendKind kind, CpuIsa isa = CpuIsa::kScalar) {
  engine::BackendOptions o;
  o.kind = kind;
  o.threads = 2;
  o.deterministic = true;  // one kernel family per path, so rows compare bit for bit at any T
  if (kind == BackendKind::kCpu) o.cpu_isa = isa;
  auto b = engine::make_backend(o);
  EXPECT_TRUE(b.is_ok()) << b.status().to_string();
  return b.is_ok() ? std::move(b).value() : nullptr;
}

// The CPU backend as the runtime makes it by default: kernels chosen by a call's size.
std::unique_ptr<Backend> by_size_backend(CpuIsa isa) {
  engine::BackendOptions o;
  o.kind = BackendKind::kCpu;
  o.threads = 2;
  o.cpu_isa = isa;
  auto b = engine::make_backend(o);
  EXPECT_TRUE(b.is_ok()) << b.status().to_string();
  return b.is_ok() ? std::move(b).value() : nullptr;
}

std::vector<CpuIsa> paths() {
  std::vector<CpuIsa> out;
  for (CpuIsa i : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmxBf16})
    if (engine::cpu_isa_supported(i)) out.push_back(i);
  return out;
}

// One matrix of each block dtype of the llama.cpp-made mixed fixture (HF names).
const std::vector<std::string> kMixedBlockTensors = {
    "model.layers.0.self_attn.q_proj.weight",         // Q8_0
    "model.layers.0.self_attn.k_proj.weight",         // Q4_0
    "model.layers.0.self_attn.v_proj.weight",         // Q4_1
    "model.layers.0.self_attn.o_proj.weight",         // Q5_K
    "model.layers.1.mlp.experts.2.gate_proj.weight",  // Q4_K
    "lm_head.weight",                                 // Q6_K
};

// Those, and an MXFP4 expert of the MXFP4 fixture.
std::vector<std::pair<const engine::Checkpoint*, std::string>> gguf_block_weights(const engine::Checkpoint& mixed,
                                                                                  const engine::Checkpoint& mxfp4) {
  std::vector<std::pair<const engine::Checkpoint*, std::string>> out;
  for (const std::string& name : kMixedBlockTensors) out.emplace_back(&mixed, name);
  out.emplace_back(&mxfp4, "model.layers.0.mlp.experts.1.up_proj.weight");
  return out;
}

class CpuOps : public ::testing::TestWithParam<CpuIsa> {
 protected:
  // Products on Q4_K / Q5_K / Q6_K take int8 activations on every vector path (x ~= d1 hi + d2 lo
  // per 256 values: ~3e-5 relative) unless FT_CPU_INT8=0; the others multiply fp32 activations.
  double product_tolerance(engine::DType dt) const {
    const char* env = std::getenv("FT_CPU_INT8");
    const bool on = GetParam() != CpuIsa::kScalar && !(env && std::strcmp(env, "0") == 0);
    const bool int8 = on && (dt == engine::DType::kQ4_K || dt == engine::DType::kQ5_K || dt == engine::DType::kQ6_K);
    return int8 ? 1e-4 : 1e-6;
  }
  void SetUp() override {
    cpu_ = backend(BackendKind::kCpu, GetParam());
    ref_ = backend(BackendKind::kReference);
    ASSERT_TRUE(cpu_ && ref_);
  }
  // Runs fn on the backend's threads, as a forward pass does.
  template <typename Fn>
  void on(Backend& b, const Fn& fn) {
    ASSERT_TRUE(b.execute(fn));
  }
  std::unique_ptr<Backend> cpu_, ref_;
  std::mt19937 rng_{1234};
};

TEST_P(CpuOps, LinearMatchesReferenceAndARowIsTheSameAtAnyT) {
  // 48 rows: three whole 16-row AMX tiles; 37 rows: a remainder on the AVX512-BF16 kernel.
  for (int64_t rows : {48, 37}) {
    for (int64_t cols : {64, 96, 100}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
      const Bf16Matrix w(rows, cols, rng_);
      const std::size_t T = 70;
      const auto x = randn(T * std::size_t(cols), rng_);
      const auto bias = randn(std::size_t(rows), rng_);
      std::vector<float> got(T * std::size_t(rows)), want(got.size());
      on(*cpu_, [&] { cpu_->linear(x.data(), T, w.view(), bias.data(), got.data()); });
      on(*ref_, [&] { ref_->linear(x.data(), T, w.view(), bias.data(), want.data()); });
      EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-5);
      // Each row alone, and in calls of other sizes, gives the same bits.
      for (std::size_t t : {std::size_t(0), std::size_t(17), T - 1}) {
        std::vector<float> one(static_cast<std::size_t>(rows));
        on(*cpu_, [&] { cpu_->linear(x.data() + t * std::size_t(cols), 1, w.view(), bias.data(), one.data()); });
        EXPECT_EQ(0, std::memcmp(one.data(), got.data() + t * std::size_t(rows), one.size() * sizeof(float)))
            << "token " << t;
      }
      std::vector<float> part(20 * std::size_t(rows));
      on(*cpu_, [&] { cpu_->linear(x.data() + 10 * std::size_t(cols), 20, w.view(), bias.data(), part.data()); });
      EXPECT_EQ(0, std::memcmp(part.data(), got.data() + 10 * std::size_t(rows), part.size() * sizeof(float)));
    }
  }
}

TEST_P(CpuOps, MoeMatchesReferenceAndATokenIsTheSameInAnyBatch) {
  const int64_t H = 64, I = 32, E = 8;
  std::vector<Bf16Matrix> mats;
  engine::MoeWeights w;
  w.hidden = H;
  w.router_spec.num_experts = std::size_t(E);
  w.router_spec.top_k = 3;
  mats.emplace_back(E, H, rng_);
  for (int64_t e = 0; e < E; ++e) {
    mats.emplace_back(I, H, rng_);
    mats.emplace_back(I, H, rng_);
    mats.emplace_back(H, I, rng_);
  }
  mats.emplace_back(48, H, rng_);
  mats.emplace_back(48, H, rng_);
  mats.emplace_back(H, 48, rng_);
  mats.emplace_back(1, H, rng_);
  w.router = mats[0].view();
  for (int64_t e = 0; e < E; ++e)
    w.experts.push_back({mats[std::size_t(1 + 3 * e)].view(), mats[std::size_t(2 + 3 * e)].view(),
                         mats[std::size_t(3 + 3 * e)].view()});
  w.has_shared = true;
  const std::size_t s0 = std::size_t(1 + 3 * E);
  w.shared = {mats[s0].view(), mats[s0 + 1].view(), mats[s0 + 2].view()};
  w.shared_gate = mats[s0 + 3].view();

  const std::size_t T = 40;
  const auto x = randn(T * std::size_t(H), rng_);
  std::vector<float> got(x.size()), want(x.size());
  engine::RoutingTrace got_routes, want_routes;
  cpu_->set_routing_trace(&got_routes);
  ref_->set_routing_trace(&want_routes);
  on(*cpu_, [&] { cpu_->moe(w, x.data(), T, got.data(), nullptr); });
  on(*ref_, [&] { ref_->moe(w, x.data(), T, want.data(), nullptr); });
  ASSERT_EQ(got_routes.calls.size(), 1u);
  EXPECT_EQ(got_routes.calls[0], want_routes.calls[0]);  // no near ties in this draw
  EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-5);
  cpu_->set_routing_trace(nullptr);
  for (std::size_t t : {std::size_t(0), std::size_t(13), T - 1}) {
    std::vector<float> one(static_cast<std::size_t>(H));
    on(*cpu_, [&] { cpu_->moe(w, x.data() + t * std::size_t(H), 1, one.data(), nullptr); });
    EXPECT_EQ(0, std::memcmp(one.data(), got.data() + t * std::size_t(H), one.size() * sizeof(float))) << "token " << t;
  }
  // ~1,100 assignments an expert: more token blocks than one AMX work item takes, so an expert's
  // tokens are split over items; a token's result still does not depend on the batch.
  const std::size_t T2 = 3000;
  const auto x2 = randn(T2 * std::size_t(H), rng_);
  std::vector<float> big(x2.size());
  on(*cpu_, [&] { cpu_->moe(w, x2.data(), T2, big.data(), nullptr); });
  for (std::size_t t : {std::size_t(0), std::size_t(1499), std::size_t(2801), T2 - 1}) {
    std::vector<float> one(static_cast<std::size_t>(H));
    on(*cpu_, [&] { cpu_->moe(w, x2.data() + t * std::size_t(H), 1, one.data(), nullptr); });
    EXPECT_EQ(0, std::memcmp(one.data(), big.data() + t * std::size_t(H), one.size() * sizeof(float)))
        << "token " << t << " of " << T2;
  }
}

// A sequence's KV written through the CPU backend (bf16 pages), read by both backends; page sizes
// 16 (the AVX-512 kernel everywhere) and 64 (AMX where the CPU has it), over two key chunks; plain,
// with a sliding window that starts mid-page plus sinks (gpt-oss), with a window wider than a
// key chunk, and chunked (Llama 4) with chunks smaller and larger than a key chunk. Groups of 3
// query heads a kv head with head_dim 32; and 12 (the AVX-512 kernels' groups of 8 and 4) with
// head_dim 80 (a last block of 16 dimensions), plain and windowed.
TEST_P(CpuOps, PagedAttentionMatchesReferenceAndDecodeEqualsPrefill) {
  const std::vector<float> sinks = randn(24, rng_, 2.0f);
  struct Case {
    int64_t page_tokens;
    engine::AttentionOptions opt;
    std::size_t heads, D;
  };
  for (const auto& [page_tokens, opt, heads, D] :
       {Case{16, {}, 6, 32}, Case{64, {}, 6, 32}, Case{16, {100, sinks.data()}, 6, 32},
        Case{64, {1030, nullptr}, 6, 32}, Case{16, {0, nullptr, 40}, 6, 32}, Case{64, {0, nullptr, 1040}, 6, 32},
        Case{64, {}, 24, 80}, Case{16, {100, sinks.data()}, 24, 80}}) {
    SCOPED_TRACE("page " + std::to_string(page_tokens) + " window " + std::to_string(opt.window) + " chunk " +
                 std::to_string(opt.chunk) + (opt.sinks ? " sinks" : "") + " heads " + std::to_string(heads) +
                 " head_dim " + std::to_string(D));
    engine::KvLayout l;
    l.layers = 2;
    l.kv_heads = 2;
    l.head_dim = int64_t(D);
    l.page_tokens = page_tokens;
    l.dtype = engine::KvDType::kBf16;
    const std::size_t KV = 2, T = 1100, layer = 1;  // 1100 > the 1024-key chunk
    NanPages kv = nan_pages(l, T);
    ASSERT_FALSE(kv.table.empty());
    const std::vector<std::byte*>& table = kv.table;
    const auto q = randn(T * heads * D, rng_), k = randn(T * KV * D, rng_), v = randn(T * KV * D, rng_);
    const engine::AttentionSeq all{0, T, 0, table.data()};
    on(*cpu_, [&] { cpu_->kv_write(l, layer, k.data(), v.data(), {&all, 1}); });
    std::vector<float> got(T * heads * D), want(got.size());
    const float scale = 1.0f / std::sqrt(float(D));
    on(*cpu_, [&] { cpu_->attention(l, layer, q.data(), heads, scale, {&all, 1}, got.data(), opt); });
    on(*ref_, [&] { ref_->attention(l, layer, q.data(), heads, scale, {&all, 1}, want.data(), opt); });
    EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-5);
    // Single positions as decode steps (one query over the same pages), and a block of rows
    // batched with another sequence: the same bits.
    for (std::size_t t : {std::size_t(0), std::size_t(63), std::size_t(1023), std::size_t(1024), T - 1}) {
      const engine::AttentionSeq one_seq{0, 1, int64_t(t), table.data()};
      std::vector<float> one(heads * D);
      on(*cpu_, [&] {
        cpu_->attention(l, layer, q.data() + t * heads * D, heads, scale, {&one_seq, 1}, one.data(), opt);
      });
      EXPECT_EQ(0, std::memcmp(one.data(), got.data() + t * heads * D, one.size() * sizeof(float))) << "position " << t;
    }
    const engine::AttentionSeq two[] = {{0, 1, 5, table.data()}, {1, 30, 700, table.data()}};
    std::vector<float> q2(31 * heads * D), out2(q2.size());
    std::memcpy(q2.data(), q.data() + 5 * heads * D, heads * D * sizeof(float));
    std::memcpy(q2.data() + heads * D, q.data() + 700 * heads * D, 30 * heads * D * sizeof(float));
    on(*cpu_, [&] { cpu_->attention(l, layer, q2.data(), heads, scale, two, out2.data(), opt); });
    EXPECT_EQ(0, std::memcmp(out2.data(), got.data() + 5 * heads * D, heads * D * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(out2.data() + heads * D, got.data() + 700 * heads * D, 30 * heads * D * sizeof(float)));
  }
}

// KV writes land where the reference puts them, byte for byte: two sequences in one call, one
// starting mid-page (its first and last pages partly written, the rest of them untouched), with
// enough rows that the CPU spreads the pages over its workers; then a decode step's single row
// (written on the calling thread).
TEST_P(CpuOps, KvWritesFillThePagesAsTheReference) {
  const std::size_t KV = 2, D = 64, layer = 1;
  const engine::KvLayout l{2, int64_t(KV), int64_t(D), 64, engine::KvDType::kBf16, {}};
  static const engine::AttentionSeq shape[] = {{0, 300, 0, nullptr}, {300, 250, 37, nullptr}, {550, 1, 200, nullptr}};
  const std::size_t rows = 551;
  const auto k = randn(rows * KV * D, rng_), v = randn(rows * KV * D, rng_);
  // Each backend writes into pages of its own, pre-filled with the same garbage (one more page for
  // the last sequence's next row).
  struct Pages {
    std::vector<std::vector<std::byte>> bytes;
    std::vector<std::vector<std::byte*>> tables{3};
    std::vector<engine::AttentionSeq> seqs{std::begin(shape), std::end(shape)};
    explicit Pages(const engine::KvLayout& l) {
      for (std::size_t s = 0; s < 3; ++s) {
        for (int64_t p = 0; p < l.pages_for(shape[s].pos0 + int64_t(shape[s].rows) + 1); ++p) {
          bytes.emplace_back(l.page_bytes());
          for (std::size_t i = 0; i < bytes.back().size(); ++i) bytes.back()[i] = std::byte(i * 7 + s);
          tables[s].push_back(bytes.back().data());  // (the buffer stays where it is as `bytes` grows)
        }
        seqs[s].pages = tables[s].data();
      }
    }
  };
  Pages got(l), want(l);
  on(*cpu_, [&] { cpu_->kv_write(l, layer, k.data(), v.data(), got.seqs); });
  on(*ref_, [&] { ref_->kv_write(l, layer, k.data(), v.data(), want.seqs); });
  const engine::AttentionSeq step{0, 1, 201, nullptr};
  engine::AttentionSeq got_step = step, want_step = step;
  got_step.pages = got.tables[2].data();
  want_step.pages = want.tables[2].data();
  on(*cpu_, [&] { cpu_->kv_write(l, layer, k.data(), v.data(), {&got_step, 1}); });
  on(*ref_, [&] { ref_->kv_write(l, layer, k.data(), v.data(), {&want_step, 1}); });
  ASSERT_EQ(got.bytes.size(), want.bytes.size());
  for (std::size_t p = 0; p < got.bytes.size(); ++p) EXPECT_TRUE(got.bytes[p] == want.bytes[p]) << "page " << p;
}

TEST_P(CpuOps, DeltaNetMatchesTheRecurrentReferenceAndAnySplit) {
  engine::ref::DeltaNetDims d;
  d.hidden = 32;
  d.num_k_heads = 2;
  d.num_v_heads = 4;
  d.head_k_dim = 16;
  d.head_v_dim = 16;
  d.conv_kernel = 4;
  for (const bool tiled : {false, true}) {  // value heads grouped by key head (HF) or tiled (GGUF)
    SCOPED_TRACE(tiled ? "tiled value heads" : "grouped value heads");
    d.v_heads_tiled = tiled;
    const std::size_t T = 40, C = d.conv_dim(), nv = d.num_v_heads;
    const auto qkv = randn(T * C, rng_), z = randn(T * d.value_dim(), rng_), b = randn(T * nv, rng_),
               a = randn(T * nv, rng_), conv = randn(C * d.conv_kernel, rng_, 0.5f);
    std::vector<float> dt_bias(nv, 0.5f), a_log(nv, 0.3f), norm(d.head_v_dim, 1.0f);
    const engine::DeltaNetParams p{conv.data(), dt_bias.data(), a_log.data(), norm.data()};
    const auto sizes = engine::ref::deltanet_state_sizes(d);
    const auto run = [&](Backend& be, std::size_t from, std::size_t n, std::vector<float>& cs, std::vector<float>& rs,
                         float* out) {
      const engine::DeltaNetSeq seq{0, n, cs.data(), rs.data()};
      be.execute([&] {
        be.deltanet(d, p, qkv.data() + from * C, z.data() + from * d.value_dim(), b.data() + from * nv,
                    a.data() + from * nv, {&seq, 1}, out);
      });
    };
    std::vector<float> c1(sizes.conv_floats), r1(sizes.recurrent_floats), c2 = c1, r2 = r1;
    std::vector<float> got(T * d.value_dim()), want(got.size());
    run(*cpu_, 0, T, c1, r1, got.data());
    // The reference backend takes the chunked form for T > 1; token by token it is the recurrent one.
    for (std::size_t t = 0; t < T; ++t) run(*ref_, t, 1, c2, r2, want.data() + t * d.value_dim());
    EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-5);
    // Split anywhere: the same bits.
    std::vector<float> c3(sizes.conv_floats), r3(sizes.recurrent_floats), split(got.size());
    run(*cpu_, 0, 17, c3, r3, split.data());
    run(*cpu_, 17, T - 17, c3, r3, split.data() + 17 * d.value_dim());
    EXPECT_EQ(0, std::memcmp(split.data(), got.data(), got.size() * sizeof(float)));
    EXPECT_EQ(r3, r1);
  }
}

TEST_P(CpuOps, NormsAndRopeMatchReference) {
  // RMSNorm: rows of a head (64, 128), of a model (2,048) and of an odd width (the vector paths'
  // remainders). Its sum of squares is in double on every path, in another order on the vector
  // paths: the scale may differ from the reference's in its last bit, nothing more.
  for (const std::size_t dim : {std::size_t(64), std::size_t(128), std::size_t(2048), std::size_t(77)}) {
    const std::size_t rows = 33;
    const auto x = randn(rows * dim, rng_), w = randn(dim, rng_, 0.1f);
    std::vector<float> got(x.size()), want(x.size());
    for (bool zc : {false, true}) {
      on(*cpu_, [&] { cpu_->rms_norm(x.data(), w.data(), got.data(), rows, dim, 1e-6f, zc); });
      on(*ref_, [&] { ref_->rms_norm(x.data(), w.data(), want.data(), rows, dim, 1e-6f, zc); });
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 2.5e-7f * std::fabs(want[i])) << "dim " << dim << " at " << i;
      // In place, as the decoder calls it.
      std::vector<float> inplace = x;
      on(*cpu_, [&] { cpu_->rms_norm(inplace.data(), w.data(), inplace.data(), rows, dim, 1e-6f, zc); });
      EXPECT_EQ(inplace, got);
    }
  }
  engine::ref::RopeSpec spec;
  spec.head_dim = 32;
  spec.rotary_dim = 16;
  spec.theta = 1e6;
  const auto inv = engine::ref::rope_inv_freq(spec);
  const std::size_t T = 9, heads = 3;
  auto a = randn(T * heads * 32, rng_), b = a;
  std::vector<int64_t> pos = {0, 1, 2, 500, 501, 7, 4095, 4096, 30000};
  on(*cpu_, [&] { cpu_->rope(a.data(), T, heads, spec, inv.data(), pos.data()); });
  on(*ref_, [&] { ref_->rope(b.data(), T, heads, spec, inv.data(), pos.data()); });
  EXPECT_LT(rel_l2(a.data(), b.data(), a.size()), 1e-6);
}

// GGUF block dtypes: embedding rows decode exactly as the reference decodes them (on blocks of
// random bytes: every code and scale), and products over llama-quantize's weights of every type
// follow the reference's and give a row the same bits at any T.
TEST_P(CpuOps, BlockDtypesDecodeAsTheReference) {
  const std::filesystem::path gguf = std::filesystem::path(FT_FIXTURES_DIR) / "gguf";
  auto random = engine::GgufFile::open(gguf / "random-blocks.gguf");
  ASSERT_TRUE(random.is_ok()) << random.status().to_string();
  for (const engine::GgufTensor& t : random->tensors()) {
    const Matrix table = engine::matrix_view(*random->tensor(t.name));
    std::vector<int32_t> ids(std::size_t(table.rows));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
    std::vector<float> got(ids.size() * std::size_t(table.cols)), want(got.size());
    on(*cpu_, [&] { cpu_->embedding(table, ids, got.data()); });
    on(*ref_, [&] { ref_->embedding(table, ids, want.data()); });
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << t.name;
  }
  auto mixed = engine::Checkpoint::open(gguf / "models" / "qwen3_moe-mixed.gguf");
  auto mxfp4 = engine::Checkpoint::open(gguf / "models" / "qwen3_moe-mxfp4.gguf");
  ASSERT_TRUE(mixed.is_ok() && mxfp4.is_ok());
  for (const auto& [ckpt, name] : gguf_block_weights(*mixed, *mxfp4)) {
    const Matrix w = engine::matrix_view(*ckpt->tensor(name));
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols), T = 9;
    const auto x = randn(T * K, rng_);
    std::vector<float> got(T * R), want(T * R), one(R);
    on(*cpu_, [&] { cpu_->linear(x.data(), T, w, nullptr, got.data()); });
    on(*ref_, [&] { ref_->linear(x.data(), T, w, nullptr, want.data()); });
    EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), product_tolerance(w.dtype)) << name;
    on(*cpu_, [&] { cpu_->linear(x.data() + 4 * K, 1, w, nullptr, one.data()); });
    EXPECT_EQ(0, std::memcmp(one.data(), got.data() + 4 * R, R * sizeof(float))) << name;
  }
}

// Q4_K, Q5_K and Q6_K products with the activations as int8 planes (every path but scalar): within
// their ~3e-5 of the dequantised reference at every token count, on rows with a block of zeros and a block of values
// 1e8 apart, and a token's outputs the same bits alone and in a batch.
TEST_P(CpuOps, IntegerProductsFollowTheReferenceAtAnyT) {
  const std::filesystem::path gguf = std::filesystem::path(FT_FIXTURES_DIR) / "gguf";
  auto mixed = engine::Checkpoint::open(gguf / "models" / "qwen3_moe-mixed.gguf");
  ASSERT_TRUE(mixed.is_ok());
  for (const char* name : {"model.layers.1.mlp.experts.2.gate_proj.weight", "lm_head.weight",  // Q4_K, Q6_K
                           "model.layers.0.self_attn.o_proj.weight"}) {                        // Q5_K
    const Matrix w = engine::matrix_view(*mixed->tensor(name));
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols);
    for (std::size_t T : {1, 3, 4, 5, 9}) {
      auto x = randn(T * K, rng_);
      std::fill(x.begin(), x.begin() + 256, 0.f);
      for (std::size_t i = 256; i < 512 && i < K; ++i) x[i] *= i % 2 ? 1e4f : 1e-4f;
      std::vector<float> got(T * R), want(T * R), one(R);
      on(*cpu_, [&] { cpu_->linear(x.data(), T, w, nullptr, got.data()); });
      on(*ref_, [&] { ref_->linear(x.data(), T, w, nullptr, want.data()); });
      EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), product_tolerance(w.dtype)) << name << ", T " << T;
      for (std::size_t t = 0; t < T; ++t) {
        on(*cpu_, [&] { cpu_->linear(x.data() + t * K, 1, w, nullptr, one.data()); });
        EXPECT_EQ(0, std::memcmp(one.data(), got.data() + t * R, R * sizeof(float)))
            << name << ", T " << T << ", t " << t;
      }
    }
    // A NaN in the input makes every output NaN, as the fp32 products do (the planes do not hide it).
    auto x = randn(K, rng_);
    x[5] = std::nanf("");
    std::vector<float> y(R);
    on(*cpu_, [&] { cpu_->linear(x.data(), 1, w, nullptr, y.data()); });
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return std::isnan(v); })) << name;
  }
}

// Several products of one input in one call (an attention's q, k and v; a DeltaNet's four) give
// each output the bits of its own linear() call, whatever mix of kernels they take (the integer
// block kernels with x quantised once, the fused block kernels, the bf16 dots), with biases, at
// decode sizes and at prefill sizes.
TEST_P(CpuOps, LinearsGiveEachProductItsOwnBits) {
  const std::filesystem::path gguf = std::filesystem::path(FT_FIXTURES_DIR) / "gguf";
  auto mixed = engine::Checkpoint::open(gguf / "models" / "qwen3_moe-mixed.gguf");
  ASSERT_TRUE(mixed.is_ok());
  const auto view = [&](const char* name) { return engine::matrix_view(*mixed->tensor(name)); };
  const Matrix q4k = view("model.layers.1.mlp.experts.2.gate_proj.weight"), q6k = view("lm_head.weight");
  const Matrix q8_0 = view("model.layers.0.self_attn.q_proj.weight"),
               q4_0 = view("model.layers.0.self_attn.k_proj.weight");
  const Bf16Matrix bf16(12, q4k.cols, rng_);
  const Matrix b16 = bf16.view();
  const std::size_t K = std::size_t(q4k.cols);
  for (const std::vector<const Matrix*>& set : std::vector<std::vector<const Matrix*>>{
           {&q4k, &q6k}, {&q4k, &q8_0, &q6k, &q4_0}, {&b16, &q4k, &q8_0}, {&b16, &b16}}) {
    for (std::size_t T : {1, 3, 9, 20}) {
      SCOPED_TRACE("T " + std::to_string(T) + ", " + std::to_string(set.size()) + " products");
      const auto x = randn(T * K, rng_);
      std::vector<std::vector<float>> got(set.size()), want(set.size()), bias(set.size());
      std::vector<engine::Backend::LinearOut> outs;
      for (std::size_t i = 0; i < set.size(); ++i) {
        ASSERT_EQ(std::size_t(set[i]->cols), K);
        const std::size_t R = std::size_t(set[i]->rows);
        got[i].resize(T * R);
        want[i].resize(T * R);
        bias[i] = randn(R, rng_);
        outs.push_back({set[i], i % 2 ? bias[i].data() : nullptr, got[i].data()});
      }
      on(*cpu_, [&] { cpu_->linears(x.data(), T, outs); });
      for (std::size_t i = 0; i < set.size(); ++i) {
        on(*cpu_, [&] { cpu_->linear(x.data(), T, *set[i], outs[i].bias, want[i].data()); });
        EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)))
            << "product " << i << ": " << engine::dtype_name(set[i]->dtype);
      }
    }
  }
}

// The AVX-512 integer products (VNNI: 64 values a vector) and the AVX2 ones sum the same integers;
// only the fp32 lanes they reduce over differ, so their outputs agree to fp32 rounding.
TEST(CpuIntegerProducts, Avx512AndAvx2AgreeToRounding) {
  if (!engine::cpu_isa_supported(CpuIsa::kAvx512) || !__builtin_cpu_supports("avx512vnni"))
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  const std::filesystem::path gguf = std::filesystem::path(FT_FIXTURES_DIR) / "gguf";
  auto mixed = engine::Checkpoint::open(gguf / "models" / "qwen3_moe-mixed.gguf");
  ASSERT_TRUE(mixed.is_ok());
  auto avx2 = backend(BackendKind::kCpu, CpuIsa::kAvx2), avx512 = backend(BackendKind::kCpu, CpuIsa::kAvx512);
  ASSERT_TRUE(avx2 && avx512);
  std::mt19937 rng(77);
  for (const char* name : {"model.layers.1.mlp.experts.2.gate_proj.weight", "lm_head.weight"}) {  // Q4_K, Q6_K
    const Matrix w = engine::matrix_view(*mixed->tensor(name));
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols), T = 5;
    const auto x = randn(T * K, rng);
    std::vector<float> a(T * R), b(T * R);
    ASSERT_TRUE(avx2->execute([&] { avx2->linear(x.data(), T, w, nullptr, a.data()); }));
    ASSERT_TRUE(avx512->execute([&] { avx512->linear(x.data(), T, w, nullptr, b.data()); }));
    EXPECT_LT(rel_l2(a.data(), b.data(), a.size()), 1e-6) << name;
    EXPECT_NE(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << name << ": the same bits, so the AVX-512 kernel was not the one that ran";
  }
}

// Safetensors' FP8, NVFP4 and MXFP4 weights as row blocks (the fixture PyTorch made, and FP8 blocks
// holding every code, NaNs included): rows decode as the reference decodes them, bit for bit, and
// products follow it and give a row the same bits at any T.
TEST_P(CpuOps, SafetensorsRowBlocksDecodeAsTheReference) {
  TempDir dir;
  std::filesystem::copy_file(std::filesystem::path(FT_FIXTURES_DIR) / "quant" / "quant-formats.safetensors",
                             dir.path() / "model.safetensors");
  { std::ofstream(dir.path() / "config.json") << "{}"; }
  auto ckpt = engine::Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  std::vector<std::byte> every_code(4 * 132);
  for (std::size_t b = 0; b < 4; ++b) {
    const float d = b % 2 ? -0.37f : 1.f;
    std::memcpy(every_code.data() + b * 132, &d, 4);
    for (std::size_t j = 0; j < 128; ++j) every_code[b * 132 + 4 + j] = std::byte((b % 2) * 128 + j);
  }
  const Matrix codes{engine::DType::kF8E4M3B128, 2, 256, every_code.data(), 264, nullptr};
  // Without the NaN codes the decoder takes its 16-bit lanes: the same bits for a subnormal d and
  // for one so large that 256 d overflows (there it falls back).
  std::vector<std::byte> finite_code = every_code;
  const float finite_d[4] = {1.f, -0.37f, 3e-40f, 2e36f};
  for (std::size_t b = 0; b < 4; ++b) {
    std::memcpy(finite_code.data() + b * 132, &finite_d[b], 4);
    finite_code[b * 132 + 4 + 127] = std::byte((b % 2) * 128);
  }
  const Matrix finite{engine::DType::kF8E4M3B128, 2, 256, finite_code.data(), 264, nullptr};
  for (const auto& [name, w] : std::vector<std::pair<std::string, Matrix>>{
           {"every E4M3 code", codes},
           {"every finite E4M3 code", finite},
           {"fp8.weight", engine::matrix_view(*ckpt->tensor("fp8.weight"))},
           {"nvfp4.weight", engine::matrix_view(*ckpt->tensor("nvfp4.weight"))},
           {"mxfp4.gate_up_proj", engine::matrix_view(*ckpt->tensor("mxfp4.gate_up_proj"), 1, 0, 64)}}) {
    std::vector<int32_t> ids(std::size_t(w.rows));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
    std::vector<float> got(ids.size() * std::size_t(w.cols)), want(got.size());
    on(*cpu_, [&] { cpu_->embedding(w, ids, got.data()); });
    on(*ref_, [&] { ref_->embedding(w, ids, want.data()); });
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << name;
    if (name.starts_with("every")) continue;  // NaNs or infinities in every product
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols), T = 9;
    const auto x = randn(T * K, rng_);
    std::vector<float> y(T * R), y_ref(T * R), one(R);
    on(*cpu_, [&] { cpu_->linear(x.data(), T, w, nullptr, y.data()); });
    on(*ref_, [&] { ref_->linear(x.data(), T, w, nullptr, y_ref.data()); });
    EXPECT_LT(rel_l2(y.data(), y_ref.data(), y.size()), 1e-6) << name;
    on(*cpu_, [&] { cpu_->linear(x.data() + 4 * K, 1, w, nullptr, one.data()); });
    EXPECT_EQ(0, std::memcmp(one.data(), y.data() + 4 * R, R * sizeof(float))) << name;
  }
}

// A prefill (96 tokens, 192 assignments over 4 experts) of the fixture's MoE layer, plain and with
// gpt-oss's epilogue (biases on gate, up and down, the clamped GLU), on `fast` (kernels by call
// size), the reference and `fixed` (one kernel family); `check` gets the three outputs. A token's
// output from `fast` is the same bits in another prefill-sized call (64 tokens), and not `fixed`'s.
template <typename Check>
void expect_prefill_moe(Backend& fast, Backend& fixed, Backend& ref, bool gate_as_up, std::uint32_t seed,
                        const Check& check) {
  auto ckpt = engine::Checkpoint::open(mixed_gguf_fixture());
  ASSERT_TRUE(ckpt.is_ok());
  engine::MoeWeights w = fixture_moe(*ckpt, gate_as_up);
  ASSERT_EQ(w.experts[0].gate.dtype, engine::DType::kQ4_K);
  ASSERT_EQ(w.experts[0].down.dtype, engine::DType::kQ6_K);
  std::mt19937 rng(seed);
  const std::size_t T = 96, H = 256;
  const auto x = randn(T * H, rng);
  const auto gate_bias = randn(4 * 256, rng, 0.5f), up_bias = randn(4 * 256, rng, 0.5f),
             down_bias = randn(4 * H, rng, 0.5f);
  for (bool gpt_oss : {false, true}) {
    SCOPED_TRACE(gpt_oss ? "gpt-oss's epilogue" : "SwiGLU");
    if (gpt_oss) {
      w.gate_bias = gate_bias.data();
      w.up_bias = up_bias.data();
      w.down_bias = down_bias.data();
      w.glu.clamped = true;
    }
    std::vector<float> got(T * H), want(T * H), det(T * H), part(64 * H);
    engine::RoutingTrace got_routes, want_routes;
    fast.set_routing_trace(&got_routes);
    ref.set_routing_trace(&want_routes);
    ASSERT_TRUE(fast.execute([&] { fast.moe(w, x.data(), T, got.data(), nullptr); }));
    ASSERT_TRUE(ref.execute([&] { ref.moe(w, x.data(), T, want.data(), nullptr); }));
    ASSERT_TRUE(fixed.execute([&] { fixed.moe(w, x.data(), T, det.data(), nullptr); }));
    fast.set_routing_trace(nullptr);
    ref.set_routing_trace(nullptr);
    ASSERT_EQ(got_routes.calls.size(), 1u);
    EXPECT_EQ(got_routes.calls[0], want_routes.calls[0]);  // no near ties in these draws
    check(got, want, det);
    EXPECT_NE(0, std::memcmp(got.data(), det.data(), got.size() * sizeof(float))) << "the prefill kernels did not run";
    ASSERT_TRUE(fast.execute([&] { fast.moe(w, x.data() + 20 * H, 64, part.data(), nullptr); }));
    EXPECT_EQ(0, std::memcmp(part.data(), got.data() + 20 * H, part.size() * sizeof(float)));
  }
}

// A CPU backend on `isa` that picks kernels by call size (the default), beside a deterministic one
// on the same path and the reference.
struct ByCallSize {
  void make(CpuIsa isa) {
    fast_ = by_size_backend(isa);
    fixed_ = backend(BackendKind::kCpu, isa);
    ref_ = backend(BackendKind::kReference);
    ASSERT_TRUE(fast_ && fixed_ && ref_);
  }
  std::unique_ptr<Backend> fast_, fixed_, ref_;
};

class CpuAmxDecoded : public ::testing::Test, protected ByCallSize {
 protected:
  void SetUp() override {
    if (!engine::cpu_isa_supported(CpuIsa::kAmxBf16)) GTEST_SKIP() << "this CPU has no AMX";
    ASSERT_NO_FATAL_FAILURE(make(CpuIsa::kAmxBf16));
  }
};

// Prefill-sized products on block weights (GGUF's, safetensors' FP8 / NVFP4 / MXFP4) take AMX
// where it exists, the weights decoded 16 rows at a time into bf16 hi + lo panels (three tile
// products a k-step): within ~1e-5 of the dequantised reference, a token's outputs the same bits in
// any call of that size, and not the integer or fused kernels' bits (which decode-sized calls, and
// every call of a deterministic backend, keep).
TEST_F(CpuAmxDecoded, BlockWeightsFollowTheReferenceAtPrefillSizes) {
  Backend* amx = fast_.get();
  Backend* fixed = fixed_.get();
  Backend* ref = ref_.get();
  const std::filesystem::path gguf = std::filesystem::path(FT_FIXTURES_DIR) / "gguf";
  auto mixed = engine::Checkpoint::open(gguf / "models" / "qwen3_moe-mixed.gguf");
  auto mxfp4 = engine::Checkpoint::open(gguf / "models" / "qwen3_moe-mxfp4.gguf");
  TempDir dir;
  std::filesystem::copy_file(std::filesystem::path(FT_FIXTURES_DIR) / "quant" / "quant-formats.safetensors",
                             dir.path() / "model.safetensors");
  { std::ofstream(dir.path() / "config.json") << "{}"; }
  auto quant = engine::Checkpoint::open(dir.path());
  ASSERT_TRUE(mixed.is_ok() && mxfp4.is_ok() && quant.is_ok());
  std::mt19937 rng(99);
  auto weights = gguf_block_weights(*mixed, *mxfp4);
  weights.insert(weights.end(), {{&*quant, "fp8.weight"}, {&*quant, "nvfp4.weight"}});  // FP8 (128 x 128), NVFP4
  for (const auto& [ckpt, name] : weights) {
    SCOPED_TRACE(name);
    const Matrix w = engine::matrix_view(*ckpt->tensor(name));
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols), T = 70;
    const auto x = randn(T * K, rng);
    std::vector<float> got(T * R), want(T * R), det(T * R), part(40 * R);
    ASSERT_TRUE(amx->execute([&] { amx->linear(x.data(), T, w, nullptr, got.data()); }));
    ASSERT_TRUE(ref->execute([&] { ref->linear(x.data(), T, w, nullptr, want.data()); }));
    ASSERT_TRUE(fixed->execute([&] { fixed->linear(x.data(), T, w, nullptr, det.data()); }));
    EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-5);
    EXPECT_NE(0, std::memcmp(got.data(), det.data(), got.size() * sizeof(float))) << "the AMX path did not run";
    ASSERT_TRUE(amx->execute([&] { amx->linear(x.data() + 10 * K, 40, w, nullptr, part.data()); }));
    EXPECT_EQ(0, std::memcmp(part.data(), got.data() + 10 * R, part.size() * sizeof(float)));
  }
}

// The same for a MoE layer of the llama.cpp-made file (Q4_K gate/up, Q6_K down): a prefill's
// experts on AMX follow the reference, a token's output is the same bits in another call of
// prefill size, and differs from the integer kernels' (so the AMX path is the one that ran); and
// with gpt-oss's biases and clamped GLU on the same experts.
TEST_F(CpuAmxDecoded, BlockExpertsFollowTheReferenceAtPrefillSizes) {
  expect_prefill_moe(*fast_, *fixed_, *ref_, false, 5, [](const auto& got, const auto& want, const auto&) {
    EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-5);
  });
}

// A backend asked for bf16 activations (--cpu-activations bf16), on bf16 weights and bf16 KV with
// AMX: prefill-sized products take x rounded to bf16 (the reference on bf16-rounded x, to fp32
// rounding; measurably not the fp32 x), the MoE and attention follow the reference to bf16
// rounding, and a row's bits are the same in any call of prefill size; decode-sized calls keep
// fp32 products.
class CpuAmxBf16Activations : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!engine::cpu_isa_supported(CpuIsa::kAmxBf16)) GTEST_SKIP() << "this CPU has no AMX";
    engine::BackendOptions o;
    o.threads = 2;
    o.cpu_isa = CpuIsa::kAmxBf16;
    o.cpu_bf16_activations = true;
    auto b = engine::make_backend(o);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    fast_ = std::move(b).value();
    ref_ = backend(BackendKind::kReference);
    ASSERT_TRUE(ref_);
  }
  std::unique_ptr<Backend> fast_, ref_;
};

TEST_F(CpuAmxBf16Activations, PrefillProductsTakeBf16Activations) {
  std::mt19937 rng(7);
  const std::size_t R = 64, K = 96, T = 70;
  const Bf16Matrix w(int64_t(R), int64_t(K), rng);
  const auto x = randn(T * K, rng), xr = bf16_rounded(x);
  std::vector<float> got(T * R), want(T * R), exact(T * R), part(40 * R), one(R);
  ASSERT_TRUE(fast_->execute([&] { fast_->linear(x.data(), T, w.view(), nullptr, got.data()); }));
  ASSERT_TRUE(ref_->execute([&] { ref_->linear(xr.data(), T, w.view(), nullptr, want.data()); }));
  ASSERT_TRUE(ref_->execute([&] { ref_->linear(x.data(), T, w.view(), nullptr, exact.data()); }));
  EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-6);
  EXPECT_GT(rel_l2(got.data(), exact.data(), got.size()), 1e-4) << "bf16x2 activations";
  EXPECT_LT(rel_l2(got.data(), exact.data(), got.size()), 5e-3);
  ASSERT_TRUE(fast_->execute([&] { fast_->linear(x.data() + 10 * K, 40, w.view(), nullptr, part.data()); }));
  EXPECT_EQ(0, std::memcmp(part.data(), got.data() + 10 * R, part.size() * sizeof(float)));
  // A decode-sized call: fp32 products on AVX-512.
  ASSERT_TRUE(fast_->execute([&] { fast_->linear(x.data() + 5 * K, 1, w.view(), nullptr, one.data()); }));
  EXPECT_LT(rel_l2(one.data(), exact.data() + 5 * R, R), 1e-6);
}

TEST_F(CpuAmxBf16Activations, PrefillMoeAndAttentionFollowTheReferenceToBf16Rounding) {
  std::mt19937 rng(8);
  const int64_t H = 64, I = 64, E = 4;
  std::vector<Bf16Matrix> mats;
  for (int64_t e = 0; e < E; ++e) {
    mats.emplace_back(I, H, rng);
    mats.emplace_back(I, H, rng);
    mats.emplace_back(H, I, rng);
  }
  engine::MoeWeights w;
  w.hidden = H;
  w.router_spec.num_experts = std::size_t(E);
  w.router_spec.top_k = 2;
  // An fp32 router (as tiny tensors are stored): the routes are the reference's, so the outputs
  // differ by the experts' rounding alone.
  const auto router = randn(std::size_t(E * H), rng, 0.125f);
  w.router = {engine::DType::kF32, E, H, reinterpret_cast<const std::byte*>(router.data()), std::size_t(H) * 4};
  for (int64_t e = 0; e < E; ++e)
    w.experts.push_back(
        {mats[std::size_t(3 * e)].view(), mats[std::size_t(3 * e + 1)].view(), mats[std::size_t(3 * e + 2)].view()});
  const std::size_t T = 80;
  const auto x = randn(T * std::size_t(H), rng);
  std::vector<float> got(x.size()), want(x.size()), part(40 * std::size_t(H));
  ASSERT_TRUE(fast_->execute([&] { fast_->moe(w, x.data(), T, got.data(), nullptr); }));
  ASSERT_TRUE(ref_->execute([&] { ref_->moe(w, x.data(), T, want.data(), nullptr); }));
  EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 5e-3);
  EXPECT_GT(rel_l2(got.data(), want.data(), got.size()), 1e-5) << "bf16x2 activations";
  ASSERT_TRUE(fast_->execute([&] { fast_->moe(w, x.data() + 20 * H, 40, part.data(), nullptr); }));
  EXPECT_EQ(0, std::memcmp(part.data(), got.data() + 20 * H, part.size() * sizeof(float)));

  // Attention: 300 rows over pages of 64, two kv heads of 3 query heads, head_dim 64.
  engine::KvLayout l;
  l.layers = 1;
  l.kv_heads = 2;
  l.head_dim = 64;
  l.page_tokens = 64;
  l.dtype = engine::KvDType::kBf16;
  const std::size_t rows = 300, heads = 6, D = 64;
  NanPages kv = nan_pages(l, rows);
  ASSERT_FALSE(kv.table.empty());
  const std::vector<std::byte*>& table = kv.table;
  const auto q = randn(rows * heads * D, rng), k = randn(rows * 2 * D, rng), v = randn(rows * 2 * D, rng);
  const engine::AttentionSeq all{0, rows, 0, table.data()}, tail{0, 100, 200, table.data()};
  ASSERT_TRUE(fast_->execute([&] { fast_->kv_write(l, 0, k.data(), v.data(), {&all, 1}); }));
  std::vector<float> a_got(rows * heads * D), a_want(a_got.size()), a_tail(100 * heads * D);
  const float scale = 0.125f;
  ASSERT_TRUE(fast_->execute([&] { fast_->attention(l, 0, q.data(), heads, scale, {&all, 1}, a_got.data(), {}); }));
  ASSERT_TRUE(ref_->execute([&] { ref_->attention(l, 0, q.data(), heads, scale, {&all, 1}, a_want.data(), {}); }));
  EXPECT_LT(rel_l2(a_got.data(), a_want.data(), a_got.size()), 5e-3);
  EXPECT_GT(rel_l2(a_got.data(), a_want.data(), a_got.size()), 1e-5) << "bf16x2 queries";
  ASSERT_TRUE(fast_->execute([&] {
    fast_->attention(l, 0, q.data() + 200 * heads * D, heads, scale, {&tail, 1}, a_tail.data(), {});
  }));
  EXPECT_EQ(0, std::memcmp(a_tail.data(), a_got.data() + 200 * heads * D, a_tail.size() * sizeof(float)));
}

// The VNNI tiles' two widths: AVX-512 (16 tokens a vector) and AVX-VNNI (two vectors of 8).
class CpuInt8Tiles : public ::testing::TestWithParam<CpuIsa>, protected ByCallSize {
 protected:
  void SetUp() override {
    const bool wide = GetParam() == CpuIsa::kAvx512;
    const bool vnni = wide ? __builtin_cpu_supports("avx512vnni") : __builtin_cpu_supports("avxvnni");
    if (!engine::cpu_isa_supported(GetParam()) || !vnni)
      GTEST_SKIP() << "this CPU has no " << (wide ? "AVX-512 VNNI" : "AVX-VNNI");
    ASSERT_NO_FATAL_FAILURE(make(GetParam()));
  }
};

// Without AMX (here: the AVX-512 path of this CPU), prefill-sized products on Q4_K, Q6_K, Q4_0, Q8_0,
// Q4_1 and Q5_K take the VNNI tiles (int8_tiles.h): on Q4_K / Q5_K / Q6_K the same integer sums as the decode-sized
// integer kernels, so within fp32 rounding of theirs; on every type within the int8 planes' ~1e-4
// of the reference; a token's outputs the same bits in another call of prefill size, and not the
// decode kernels' bits.
TEST_P(CpuInt8Tiles, QuantisedWeightsMatchTheDecodeKernelsAtPrefillSizes) {
  Backend* tiles = fast_.get();
  Backend* fixed = fixed_.get();
  Backend* ref = ref_.get();
  auto mixed =
      engine::Checkpoint::open(std::filesystem::path(FT_FIXTURES_DIR) / "gguf" / "models" / "qwen3_moe-mixed.gguf");
  ASSERT_TRUE(mixed.is_ok());
  std::mt19937 rng(17);
  for (const std::string& name : kMixedBlockTensors) {
    SCOPED_TRACE(name);  // (Q4_0, Q8_0, Q4_1: their decode kernels are fp32, 1e-7 of the reference)
    // 37 rows of each: groups of 4 rows and a remainder of 1.
    const Matrix w = engine::matrix_view(*mixed->tensor(name)).rows_slice(3, 37);
    // (Q4_0, Q8_0 and Q4_1 decode to fp32 in their decode-sized kernels)
    const bool integer_decode =
        w.dtype == engine::DType::kQ4_K || w.dtype == engine::DType::kQ6_K || w.dtype == engine::DType::kQ5_K;
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols), T = 70;
    auto x = randn(T * K, rng);
    std::fill(x.begin(), x.begin() + 256, 0.f);  // a zero block, and one of values 1e8 apart
    for (std::size_t i = 256; i < 512 && i < K; ++i) x[i] *= i % 2 ? 1e4f : 1e-4f;
    std::vector<float> got(T * R), want(T * R), det(T * R), part(40 * R);
    ASSERT_TRUE(tiles->execute([&] { tiles->linear(x.data(), T, w, nullptr, got.data()); }));
    ASSERT_TRUE(ref->execute([&] { ref->linear(x.data(), T, w, nullptr, want.data()); }));
    ASSERT_TRUE(fixed->execute([&] { fixed->linear(x.data(), T, w, nullptr, det.data()); }));
    EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1e-4);
    if (integer_decode) {
      EXPECT_LT(rel_l2(got.data(), det.data(), got.size()), 1e-6);
    }
    EXPECT_NE(0, std::memcmp(got.data(), det.data(), got.size() * sizeof(float))) << "the tiles did not run";
    ASSERT_TRUE(tiles->execute([&] { tiles->linear(x.data() + 10 * K, 40, w, nullptr, part.data()); }));
    EXPECT_EQ(0, std::memcmp(part.data(), got.data() + 10 * R, part.size() * sizeof(float)));
  }
}

// The same tiles for a prefill's Q4_K / Q6_K experts (the llama.cpp-made file's layer 1, its Q4_K
// gate matrices also as the up ones), plain and with gpt-oss's
// epilogue: within fp32 rounding of the decode kernels, a token's output the same bits in another
// prefill-sized call.
TEST_P(CpuInt8Tiles, QuantisedExpertsMatchTheDecodeKernelsAtPrefillSizes) {
  // h is quantised again for down, so an fp32 rounding apart moves a few of its int8 codes: the
  // tiles and the decode kernels agree to ~1e-5, each ~1e-4 from the reference.
  expect_prefill_moe(*fast_, *fixed_, *ref_, true, 8, [](const auto& got, const auto& want, const auto& det) {
    EXPECT_LT(rel_l2(got.data(), want.data(), got.size()), 1.25 * rel_l2(det.data(), want.data(), got.size()));
    EXPECT_LT(rel_l2(got.data(), det.data(), got.size()), 5e-5);
  });
}

INSTANTIATE_TEST_SUITE_P(Widths, CpuInt8Tiles, ::testing::Values(CpuIsa::kAvx512, CpuIsa::kAvx2),
                         [](const auto& info) { return std::string(engine::cpu_isa_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(Paths, CpuOps, ::testing::ValuesIn(paths()),
                         [](const auto& info) { return std::string(engine::cpu_isa_name(info.param)); });

}  // namespace
}  // namespace ft::test

// Sequence state: prefix -> checkpoint -> restore into a fresh state -> suffix gives the logits of
// the whole sequence, at many split points (inside and at the edges of a DeltaNet chunk of 64 and
// of a KV page of 64), for every family, both expert layouts and both CPU backends; the paged KV
// (snapshots share pages, copy on write, adoption on restore, zeroed tails, the budget).
#include <gtest/gtest.h>

#include <algorithm>

#include "ft/engine/checkpoint.h"
#include "ft/engine/model.h"
#include "ft/engine/ops_deltanet.h"
#include "ft/engine/state_checkpoint.h"
#include "ft/store/host_ram_tier.h"
#include "ft/store/rocksdb_store.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::BackendKind;
using engine::LogitsMode;
using engine::Model;
using engine::ModelFamily;
using engine::SequenceState;

std::unique_ptr<Model> load(const std::filesystem::path& dir, BackendKind backend = BackendKind::kCpu,
                            uint64_t kv_budget = 0) {
  engine::LoadOptions o;
  o.backend = backend;
  o.kv_budget_bytes = kv_budget;
  o.deterministic = true;  // the bit-for-bit comparisons below hold on every CPU
  auto m = engine::load_model(dir, o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

std::vector<float> full_logits(const Model& m, const std::vector<int32_t>& tokens) {
  std::vector<float> logits(tokens.size() * std::size_t(m.vocab_size()));
  SequenceState s = m.new_state();
  const Status st = m.forward(s, tokens, logits.data(), LogitsMode::kAll);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(s.position(), int64_t(tokens.size()));
  return logits;
}

// Whether row `t` of a one-pass trace `a` chose as row `u` of the one-pass trace `b` did, in every
// MoE layer and every indexer.
bool same_routing_rows(const engine::RoutingTrace& a, std::size_t t, const engine::RoutingTrace& b, std::size_t u) {
  const std::size_t K = a.top_k, S = a.selection_k;
  for (std::size_t l = 0; l < a.calls.size(); ++l) {
    std::vector<int32_t> x(&a.calls[l][t * K], &a.calls[l][t * K] + K), y(&b.calls[l][u * K], &b.calls[l][u * K] + K);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    if (x != y) return false;
  }
  for (std::size_t l = 0; l < a.selections.size(); ++l) {
    if (!std::equal(&a.selections[l][t * S], &a.selections[l][t * S] + S, &b.selections[l][u * S])) return false;
  }
  return true;
}

// Prefill tokens[0, split), checkpoint, restore into a fresh state, run tokens[split, T) and compare
// with the full-sequence logits of those positions. The CPU backend must match bit for bit (its
// ops do not depend on how a sequence was split); the reference changes fp32 rounding between the
// chunked and recurrent DeltaNet forms, hence its small tolerance.
// With `full_trace` (the routing of the full sequence's one pass), positions whose experts or
// indexer picks differ between the two runs (a near-tie that the two passes' summation orders broke
// apart) are counted instead of compared, at most 5% of them.
void expect_split_matches(const Model& m, const std::vector<int32_t>& tokens, const std::vector<float>& full,
                          std::size_t split, double tol, const engine::RoutingTrace* full_trace = nullptr) {
  const std::size_t V = std::size_t(m.vocab_size()), T = tokens.size();
  SequenceState prefix = m.new_state();
  ASSERT_TRUE(m.forward(prefix, std::span(tokens).first(split), nullptr, LogitsMode::kNone).is_ok());
  const store::ModelState checkpoint = engine::to_model_state(prefix, engine::store_fingerprint(m));

  SequenceState resumed = m.new_state();
  const Status restored = engine::restore_from_model_state(checkpoint, resumed);
  ASSERT_TRUE(restored.is_ok()) << restored.to_string();
  ASSERT_EQ(resumed.position(), int64_t(split));
  std::vector<float> logits((T - split) * V);
  engine::RoutingTrace suffix_trace;
  if (full_trace) m.set_routing_trace(&suffix_trace);
  ASSERT_TRUE(m.forward(resumed, std::span(tokens).subspan(split), logits.data(), LogitsMode::kAll).is_ok());
  m.set_routing_trace(nullptr);
  std::size_t flips = 0;
  for (std::size_t t = split; t < T; ++t) {
    const double err = rel_l2(&logits[(t - split) * V], &full[t * V], V);
    if (full_trace && !same_routing_rows(*full_trace, t, suffix_trace, t - split)) {
      ++flips;
    } else if (tol == 0) {
      ASSERT_EQ(0, std::memcmp(&logits[(t - split) * V], &full[t * V], V * sizeof(float)))
          << "split " << split << ", position " << t << " (rel L2 " << err << ")";
    } else {
      EXPECT_LT(err, tol) << "split " << split << ", position " << t;
    }
  }
  EXPECT_LE(flips * 20, T - split) << "split " << split << ": " << flips << " positions routed differently";
}

struct Case {
  ModelFamily family;
  bool fused;
  BackendKind backend;
};

// The CPU runtime is bit-exact; the reference's DeltaNet forms round differently; on the GPU a
// GEMM's summation order may depend on the number of rows (cuBLAS picks kernels by shape).
// On the GPU prefill multiplies split bf16 halves in GEMMs and decode fp32 rows in gemv kernels:
// up to 1.3e-3 apart on the tiny OLMoE (biases, whole-width q/k norms), ~5e-4 on the others.
double tolerance(BackendKind b) { return b == BackendKind::kCpu ? 0.0 : b == BackendKind::kCuda ? 2e-3 : 1e-4; }

class TinyModelSplit : public ::testing::TestWithParam<Case> {};

TEST_P(TinyModelSplit, RestoredPrefixPlusSuffixEqualsFullSequence) {
  FT_SKIP_UNLESS_FAMILY_RUNS(GetParam().backend, GetParam().family);
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(GetParam().family, GetParam().fused)).is_ok());
  auto model = load(dir.path(), GetParam().backend);
  ASSERT_TRUE(model);
  const auto tokens = test_tokens(150, model->vocab_size());
  // Off the CPU the two runs sum in different orders (a prefix of a token or two is a decode step),
  // so a near-tie in a router or an indexer may break either way: such positions are counted.
  const bool exact = GetParam().backend == BackendKind::kCpu;
  engine::RoutingTrace full_trace;
  if (!exact) model->set_routing_trace(&full_trace);
  const auto full = full_logits(*model, tokens);
  model->set_routing_trace(nullptr);
  for (std::size_t split : {1, 2, 37, 63, 64, 65, 100, 128, 129, 149}) {
    expect_split_matches(*model, tokens, full, split, tolerance(GetParam().backend), exact ? nullptr : &full_trace);
  }
}

// Whether token `t` of a prefill (trace `full`, one call per MoE layer over all tokens) chose the
// same experts, and the same key positions in each DSA indexer, as its own decode step did (`steps`,
// one call per layer per token, in order).
bool same_routing(const engine::RoutingTrace& full, const engine::RoutingTrace& steps, std::size_t t) {
  const std::size_t K = full.top_k, layers = full.calls.size();
  for (std::size_t l = 0; l < layers; ++l) {
    std::vector<int32_t> a(&full.calls[l][t * K], &full.calls[l][t * K] + K);
    std::vector<int32_t> b = steps.calls[t * layers + l];
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) return false;
  }
  // An indexer's choices are in ascending order, -1 after them, in both.
  const std::size_t S = full.selection_k, indexers = full.selections.size();
  for (std::size_t l = 0; l < indexers; ++l) {
    const std::vector<int32_t> a(&full.selections[l][t * S], &full.selections[l][t * S] + S);
    if (a != steps.selections[t * indexers + l]) return false;
  }
  return true;
}

TEST_P(TinyModelSplit, TokenByTokenDecodeMatchesPrefill) {
  FT_SKIP_UNLESS_FAMILY_RUNS(GetParam().backend, GetParam().family);
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(GetParam().family, GetParam().fused)).is_ok());
  auto model = load(dir.path(), GetParam().backend);
  ASSERT_TRUE(model);
  const std::size_t V = std::size_t(model->vocab_size());
  const auto tokens = test_tokens(70, model->vocab_size(), 3);
  engine::RoutingTrace full_trace, step_trace;
  model->set_routing_trace(&full_trace);
  const auto full = full_logits(*model, tokens);
  model->set_routing_trace(&step_trace);
  SequenceState s = model->new_state();
  std::vector<float> last(V);
  std::size_t flips = 0;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    ASSERT_TRUE(model->forward(s, std::span(tokens).subspan(t, 1), last.data(), LogitsMode::kLast).is_ok());
    if (GetParam().backend == BackendKind::kCpu) {
      ASSERT_EQ(0, std::memcmp(last.data(), &full[t * V], V * sizeof(float))) << "position " << t;
    } else if (!same_routing(full_trace, step_trace, t)) {
      // The decode and prefill products sum in different orders: where two experts' router
      // scores (or two keys' indexer scores) all but tie, the choice may flip, a discontinuity no
      // tolerance covers. Counted.
      ++flips;
    } else {
      EXPECT_LT(rel_l2(last.data(), &full[t * V], V), tolerance(GetParam().backend)) << "position " << t;
    }
  }
  model->set_routing_trace(nullptr);
  EXPECT_LE(flips * 20, tokens.size()) << flips << " positions routed differently in decode and prefill";
}

TEST_P(TinyModelSplit, LogitsAreNotDegenerate) {
  // Guards the init scale: near-constant logits would let most bugs pass the comparisons above.
  FT_SKIP_UNLESS_FAMILY_RUNS(GetParam().backend, GetParam().family);
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(GetParam().family, GetParam().fused)).is_ok());
  auto model = load(dir.path(), GetParam().backend);
  ASSERT_TRUE(model);
  const auto full = full_logits(*model, test_tokens(8, model->vocab_size()));
  const auto [lo, hi] = std::minmax_element(full.begin(), full.end());
  EXPECT_GT(*hi - *lo, 1.0f);
  for (float v : full) ASSERT_TRUE(std::isfinite(v));
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (BackendKind b : {BackendKind::kReference, BackendKind::kCpu, BackendKind::kCuda})
    for (ModelFamily f : engine::model_families())
      for (bool fused : {false, true}) out.push_back({f, fused, b});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, TinyModelSplit, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  return std::string(engine::backend_name(info.param.backend)) + "_" +
         engine::model_family_name(info.param.family) + (info.param.fused ? "_fused" : "_per_expert");
});

// Rewrites a per-expert checkpoint with fused 3-D expert tensors (gate_up_proj [E, 2I, H] with the
// gate rows first, down_proj [E, H, I]), the way HF 5.x's conversion mapping stacks them; Mixtral's
// block_sparse_moe becomes mlp, its w1 the gate, w3 the up and w2 the down projection.
void fuse_experts(const std::filesystem::path& from, const std::filesystem::path& to, const std::string& root,
                  int64_t layers, int64_t E) {
  auto ckpt = engine::Checkpoint::open(from);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  std::vector<engine::OwnedTensor> out;
  auto bytes_of = [&](const std::string& name) {
    auto v = ckpt->tensor(name);
    EXPECT_TRUE(v.is_ok()) << name;
    return std::vector<std::byte>(v->data, v->data + v->nbytes);
  };
  const std::string mixtral_block = ".block_sparse_moe.";
  for (std::string name : ckpt->tensor_names()) {
    if (name.find(".mlp.experts.") != std::string::npos || name.find(".block_sparse_moe.experts.") != std::string::npos)
      continue;
    auto v = ckpt->tensor(name);
    const auto bytes = bytes_of(name);
    if (const auto at = name.find(mixtral_block); at != std::string::npos) {
      name.replace(at, mixtral_block.size(), ".mlp.");
    }
    out.push_back({name, v->dtype, v->shape, bytes});
  }
  struct Names {
    const char *block, *gate, *up, *down;
  };
  for (int64_t l = 0; l < layers; ++l) {
    const std::string layer = root + "layers." + std::to_string(l) + ".";
    for (const Names& n :
         {Names{"mlp.", "gate_proj", "up_proj", "down_proj"}, Names{"block_sparse_moe.", "w1", "w3", "w2"}}) {
      const std::string p = layer + n.block + "experts.";
      if (!ckpt->has(p + "0." + n.gate + ".weight")) continue;  // a dense layer, or the other layout
      const auto gate0 = ckpt->tensor(p + "0." + n.gate + ".weight");
      const int64_t I = gate0->shape[0], H = gate0->shape[1];
      engine::OwnedTensor gate_up{layer + "mlp.experts.gate_up_proj", gate0->dtype, {E, 2 * I, H}, {}};
      engine::OwnedTensor down{layer + "mlp.experts.down_proj", gate0->dtype, {E, H, I}, {}};
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = p + std::to_string(e) + ".";
        for (const char* part : {n.gate, n.up}) {
          const auto b = bytes_of(x + part + ".weight");
          gate_up.data.insert(gate_up.data.end(), b.begin(), b.end());
        }
        const auto b = bytes_of(x + n.down + ".weight");
        down.data.insert(down.data.end(), b.begin(), b.end());
      }
      out.push_back(std::move(gate_up));
      out.push_back(std::move(down));
    }
  }
  std::filesystem::copy_file(from / "config.json", to / "config.json");
  std::filesystem::copy_file(from / "generation_config.json", to / "generation_config.json");
  ASSERT_TRUE(engine::write_safetensors(to / "model.safetensors", out).is_ok());
}

// A page of layers in different shapes: each layer takes its own bytes, back to back, K blocks
// before V blocks; a uniform layout is the same arithmetic with one shape.
TEST(KvLayoutShapes, EachLayerTakesItsOwnShapesBytes) {
  engine::KvLayout mixed{3, 0, 0, 16, engine::KvDType::kBf16, {{4, 64}, {1, 128}, {4, 64}}};
  const std::size_t b0 = 16 * 64 * 2, b1 = 16 * 128 * 2;  // one head's K block
  EXPECT_EQ(mixed.block_bytes(1), b1);
  EXPECT_EQ(mixed.layer_offset(1), 2 * 4 * b0);
  EXPECT_EQ(mixed.layer_offset(2), 2 * 4 * b0 + 2 * b1);
  EXPECT_EQ(mixed.k_offset(2, 3), mixed.layer_offset(2) + 3 * b0);
  EXPECT_EQ(mixed.v_offset(1, 0), mixed.layer_offset(1) + b1);
  EXPECT_EQ(mixed.page_bytes(), 2 * (2 * 4 * b0) + 2 * b1);
  EXPECT_EQ(mixed.token_bytes(), mixed.page_bytes() / 16);
  engine::KvLayout uniform{3, 4, 64, 16, engine::KvDType::kBf16, {}};
  EXPECT_EQ(uniform.page_bytes(), 3 * 2 * 4 * b0);
  EXPECT_EQ(uniform.v_offset(2, 1), 2 * 2 * 4 * b0 + 5 * b0);
}

TEST(ExpertLayouts, FusedAndPerExpertTensorsGiveIdenticalLogits) {
  for (ModelFamily family : engine::model_families()) {
    if (family == ModelFamily::kGptOss) continue;  // one layout of its own (fused, [in, out])
    SCOPED_TRACE(engine::model_family_name(family));
    TempDir per_expert, fused;
    const auto spec = tiny_spec(family, false);
    ASSERT_TRUE(engine::write_random_checkpoint(per_expert.path(), spec).is_ok());
    const std::string root = family == ModelFamily::kQwen3_5Moe ? "model.language_model." : "model.";
    fuse_experts(per_expert.path(), fused.path(), root, spec.num_layers, spec.num_experts);
    auto a = load(per_expert.path()), b = load(fused.path());
    ASSERT_TRUE(a && b);
    const auto tokens = test_tokens(20, a->vocab_size());
    EXPECT_EQ(full_logits(*a, tokens), full_logits(*b, tokens));  // same weights: bit-identical
  }
}

TEST(SequenceStateFixtures, RestoredPrefixPlusSuffixEqualsFullSequence) {
  int ran = 0;
  for (const std::string& name : fixture_names()) {
    if (!fixture_present(name)) continue;
    SCOPED_TRACE(name);
    auto model = load(fixture_checkpoint(name));
    ASSERT_TRUE(model);
    const auto golden = SafetensorsFile::read(fixture_dir(name) / "golden.safetensors");
    const auto tokens = golden.ids("input_ids");
    const auto full = full_logits(*model, tokens);
    for (std::size_t split : {std::size_t(1), std::size_t(31), std::size_t(63), std::size_t(64), std::size_t(65),
                              tokens.size() / 2, tokens.size() - 1}) {
      if (split >= 1 && split < tokens.size()) expect_split_matches(*model, tokens, full, split, 0.0);
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures in tests/fixtures/models/";
}

// ---- Paged KV -------------------------------------------------------------------------------------

class PagedState : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(engine::write_random_checkpoint(dir_.path(), tiny_spec(ModelFamily::kQwen3_5Moe, true)).is_ok());
    model_ = load(dir_.path());
    ASSERT_TRUE(model_);
    tokens_ = test_tokens(300, model_->vocab_size(), 11);
    fp_ = engine::store_fingerprint(*model_);
  }
  int64_t pages_used() const { return int64_t(model_->kv_stats().pages_used); }
  TempDir dir_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> tokens_;
  ModelFingerprint fp_;
};

TEST_F(PagedState, SnapshotsOfAGrowingSequenceShareTheirPages) {
  SequenceState s = model_->new_state();
  std::vector<store::ModelState> snaps;
  for (std::size_t end : {100, 200, 300}) {
    ASSERT_TRUE(model_->forward(s, std::span(tokens_).subspan(s.position(), end - std::size_t(s.position())), nullptr,
                                LogitsMode::kNone).is_ok());
    snaps.push_back(engine::to_model_state(s, fp_));
  }
  // Page 0 (positions 0-63) is the very same memory in all three checkpoints and in the sequence.
  ASSERT_EQ(snaps[0].chunks[0].kind, store::ChunkKind::kKvPage);
  EXPECT_EQ(snaps[0].chunks[0].data.data(), snaps[2].chunks[0].data.data());
  EXPECT_EQ(snaps[1].chunks[0].data.data(), s.pages()[0]->data());
  // The partial page each snapshot ended in was copied once when the sequence wrote on (copy on
  // write): 5 pages live + 2 frozen tails, not 2 + 4 + 5 pages.
  EXPECT_EQ(pages_used(), 5 + 2);
  EXPECT_EQ(model_->kv_stats().copies, 2u);
}

TEST_F(PagedState, ASnapshotNeverChangesAfterTheSequenceWritesOn) {
  SequenceState s = model_->new_state();
  ASSERT_TRUE(model_->forward(s, std::span(tokens_).first(100), nullptr, LogitsMode::kNone).is_ok());
  const store::ModelState snap = engine::to_model_state(s, fp_);
  std::vector<std::vector<std::byte>> before;
  for (const auto& c : snap.chunks) before.emplace_back(c.data.data(), c.data.data() + c.data.size());
  ASSERT_TRUE(model_->forward(s, std::span(tokens_).subspan(100, 50), nullptr, LogitsMode::kNone).is_ok());
  for (std::size_t i = 0; i < snap.chunks.size(); ++i)
    EXPECT_EQ(0, std::memcmp(before[i].data(), snap.chunks[i].data.data(), before[i].size())) << "chunk " << i;
}

TEST_F(PagedState, RestoreFromHostRamAdoptsThePagesWithoutCopying) {
  store::HostRamTier ram(1ull << 30);
  const store::StoreKey key{"t", fp_, {1, 2}};
  SequenceState s = model_->new_state();
  ASSERT_TRUE(model_->forward(s, std::span(tokens_).first(150), nullptr, LogitsMode::kNone).is_ok());
  ASSERT_TRUE(ram.save_shared(key, std::make_shared<const store::ModelState>(engine::to_model_state(s, fp_))).is_ok());
  const int64_t used = pages_used();
  SequenceState back = model_->new_state();
  ASSERT_TRUE(engine::restore_model_state(ram, key, back).is_ok());
  EXPECT_EQ(back.position(), 150);
  EXPECT_EQ(pages_used(), used);  // adopted, not copied
  for (std::size_t p = 0; p < 3; ++p) EXPECT_EQ(back.pages()[p].get(), s.pages()[p].get());
  // Both sequences go on from the shared pages and agree with each other.
  const std::size_t V = std::size_t(model_->vocab_size());
  std::vector<float> a(V), b(V);
  ASSERT_TRUE(model_->forward(s, std::span(tokens_).subspan(150, 10), a.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(model_->forward(back, std::span(tokens_).subspan(150, 10), b.data(), LogitsMode::kLast).is_ok());
  EXPECT_EQ(a, b);
}

TEST_F(PagedState, RestoreFromDiskStreamsIntoFreshPages) {
  TempDir store_dir;
  store::StoreOptions o;
  o.path = store_dir.path();
  auto db = store::RocksDbStore::open(o);
  ASSERT_TRUE(db.is_ok()) << db.status().to_string();
  const store::StoreKey key{"t", fp_, {3, 4}};
  SequenceState s = model_->new_state();
  ASSERT_TRUE(model_->forward(s, std::span(tokens_).first(130), nullptr, LogitsMode::kNone).is_ok());
  ASSERT_TRUE((*db)->save(key, engine::to_model_state(s, fp_)).is_ok());
  SequenceState back = model_->new_state();
  ASSERT_TRUE(engine::restore_model_state(**db, key, back).is_ok());
  EXPECT_EQ(back.position(), 130);
  EXPECT_NE(back.pages()[0].get(), s.pages()[0].get());
  const std::size_t V = std::size_t(model_->vocab_size());
  std::vector<float> a(V), b(V);
  ASSERT_TRUE(model_->forward(s, std::span(tokens_).subspan(130, 5), a.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(model_->forward(back, std::span(tokens_).subspan(130, 5), b.data(), LogitsMode::kLast).is_ok());
  EXPECT_EQ(a, b);
}

TEST_F(PagedState, AReusedPageComesBackZeroed) {
  {
    SequenceState s = model_->new_state();
    ASSERT_TRUE(model_->forward(s, std::span(tokens_).first(10), nullptr, LogitsMode::kNone).is_ok());
  }  // its page goes back to the pool with ten positions of keys in it
  SequenceState t = model_->new_state();
  ASSERT_TRUE(model_->forward(t, std::span(tokens_).first(1), nullptr, LogitsMode::kNone).is_ok());
  // Everything past position 0 of every layer and head is zero: no other sequence's keys.
  const engine::KvLayout l = *model_->kv_layout();
  const std::byte* page = t.pages()[0]->data();
  const std::size_t e = l.elem_bytes(), D = std::size_t(l.head_dim), P = std::size_t(l.page_tokens);
  for (int64_t layer = 0; layer < l.layers; ++layer) {
    for (int64_t h = 0; h < l.kv_heads; ++h) {
      for (std::size_t i = D * e; i < l.block_bytes(layer); ++i)
        ASSERT_EQ(page[l.k_offset(layer, h) + i], std::byte{0});
      for (std::size_t d = 0; d < D; ++d)  // V blocks are [head_dim][page_tokens]: slot 0 of each row
        for (std::size_t i = e; i < P * e; ++i) ASSERT_EQ(page[l.v_offset(layer, h) + d * P * e + i], std::byte{0});
    }
  }
}

TEST_F(PagedState, ACheckpointOfAnotherModelIsAMiss) {
  TempDir other_dir;
  ASSERT_TRUE(engine::write_random_checkpoint(other_dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto other = load(other_dir.path());
  ASSERT_TRUE(other);
  SequenceState s = model_->new_state();
  ASSERT_TRUE(model_->forward(s, std::span(tokens_).first(20), nullptr, LogitsMode::kNone).is_ok());
  SequenceState o = other->new_state();
  EXPECT_EQ(engine::restore_from_model_state(engine::to_model_state(s, fp_), o).code(), ErrorCode::kNotFound);
  EXPECT_EQ(o.position(), 0);
}

TEST(KvBudget, AForwardBeyondTheBudgetFailsCleanlyAndTheStateStaysUsable) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto probe = load(dir.path());
  ASSERT_TRUE(probe);
  const uint64_t page = probe->kv_layout()->page_bytes();
  auto model = load(dir.path(), BackendKind::kCpu, 2 * page);  // two pages: 128 positions
  ASSERT_TRUE(model);
  const auto tokens = test_tokens(200, model->vocab_size());
  SequenceState s = model->new_state();
  ASSERT_TRUE(model->forward(s, std::span(tokens).first(100), nullptr, LogitsMode::kNone).is_ok());
  const Status st = model->forward(s, std::span(tokens).subspan(100, 50), nullptr, LogitsMode::kNone);
  EXPECT_EQ(st.code(), ErrorCode::kUnavailable) << st.to_string();
  EXPECT_NE(st.message().find("KV budget"), std::string::npos) << st.message();
  EXPECT_EQ(s.position(), 100);
  EXPECT_TRUE(model->forward(s, std::span(tokens).subspan(100, 20), nullptr, LogitsMode::kNone).is_ok());
}

TEST(ForwardErrors, BadTokensAndForeignStateAreRejected) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto model = load(dir.path());
  ASSERT_TRUE(model);
  SequenceState s = model->new_state();
  std::vector<float> logits(std::size_t(model->vocab_size()));
  const std::vector<int32_t> out_of_range = {1, 256};
  EXPECT_EQ(model->forward(s, out_of_range, logits.data()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(model->forward(s, std::span<const int32_t>(), logits.data()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.position(), 0);
  SequenceState foreign;
  const std::vector<int32_t> ok = {1};
  EXPECT_EQ(model->forward(foreign, ok, logits.data()).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ft::test

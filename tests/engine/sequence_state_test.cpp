// Sequence state: prefix -> snapshot -> restore into a fresh state -> suffix gives the logits of
// the whole sequence, at many split points (inside and at the edges of a DeltaNet chunk of 64),
// for every family and both expert layouts; and the snapshot blob's error handling.
#include <gtest/gtest.h>

#include <algorithm>

#include "ft/engine/checkpoint.h"
#include "ft/engine/model.h"
#include "ft/engine/ops_deltanet.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::LogitsMode;
using engine::Model;
using engine::ModelFamily;
using engine::SequenceState;

std::unique_ptr<Model> load(const std::filesystem::path& dir) {
  auto m = engine::load_model(dir);
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

// Prefill tokens[0, split), snapshot, restore into a fresh state, run tokens[split, T) and compare
// with the full-sequence logits of those positions. Chunked vs recurrent DeltaNet and a different
// chunking of the sequence change fp32 rounding only, hence the small tolerance.
void expect_split_matches(const Model& m, const std::vector<int32_t>& tokens, const std::vector<float>& full,
                          std::size_t split, double tol) {
  const std::size_t V = std::size_t(m.vocab_size()), T = tokens.size();
  SequenceState prefix = m.new_state();
  ASSERT_TRUE(m.forward(prefix, std::span(tokens).first(split), nullptr, LogitsMode::kNone).is_ok());
  auto blob = prefix.snapshot();
  ASSERT_TRUE(blob.is_ok()) << blob.status().to_string();

  SequenceState resumed = m.new_state();
  const Status restored = resumed.restore(*blob);
  ASSERT_TRUE(restored.is_ok()) << restored.to_string();
  ASSERT_EQ(resumed.position(), int64_t(split));
  std::vector<float> logits((T - split) * V);
  ASSERT_TRUE(m.forward(resumed, std::span(tokens).subspan(split), logits.data(), LogitsMode::kAll).is_ok());
  for (std::size_t t = split; t < T; ++t) {
    const double err = rel_l2(&logits[(t - split) * V], &full[t * V], V);
    EXPECT_LT(err, tol) << "split " << split << ", position " << t;
  }
}

struct Case {
  ModelFamily family;
  bool fused;
};

class TinyModelSplit : public ::testing::TestWithParam<Case> {};

TEST_P(TinyModelSplit, RestoredPrefixPlusSuffixEqualsFullSequence) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(GetParam().family, GetParam().fused)).is_ok());
  auto model = load(dir.path());
  ASSERT_TRUE(model);
  const auto tokens = test_tokens(150, model->vocab_size());
  const auto full = full_logits(*model, tokens);
  for (std::size_t split : {1, 2, 37, 63, 64, 65, 100, 128, 129, 149}) {
    expect_split_matches(*model, tokens, full, split, 1e-4);
  }
}

TEST_P(TinyModelSplit, TokenByTokenDecodeMatchesPrefill) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(GetParam().family, GetParam().fused)).is_ok());
  auto model = load(dir.path());
  ASSERT_TRUE(model);
  const std::size_t V = std::size_t(model->vocab_size());
  const auto tokens = test_tokens(70, model->vocab_size(), 3);
  const auto full = full_logits(*model, tokens);
  SequenceState s = model->new_state();
  std::vector<float> last(V);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    ASSERT_TRUE(model->forward(s, std::span(tokens).subspan(t, 1), last.data(), LogitsMode::kLast).is_ok());
    EXPECT_LT(rel_l2(last.data(), &full[t * V], V), 1e-4) << "position " << t;
  }
}

TEST_P(TinyModelSplit, LogitsAreNotDegenerate) {
  // Guards the init scale: near-constant logits would let most bugs pass the comparisons above.
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(GetParam().family, GetParam().fused)).is_ok());
  auto model = load(dir.path());
  ASSERT_TRUE(model);
  const auto full = full_logits(*model, test_tokens(8, model->vocab_size()));
  const auto [lo, hi] = std::minmax_element(full.begin(), full.end());
  EXPECT_GT(*hi - *lo, 1.0f);
  for (float v : full) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(Families, TinyModelSplit,
                         ::testing::Values(Case{ModelFamily::kQwen3Moe, false}, Case{ModelFamily::kQwen3Moe, true},
                                           Case{ModelFamily::kQwen3Next, false}, Case{ModelFamily::kQwen3Next, true},
                                           Case{ModelFamily::kQwen3_5Moe, false},
                                           Case{ModelFamily::kQwen3_5Moe, true}),
                         [](const auto& info) {
                           return std::string(engine::model_family_name(info.param.family)) +
                                  (info.param.fused ? "_fused" : "_per_expert");
                         });

// Rewrites a per-expert checkpoint with fused 3-D expert tensors (gate_up_proj [E, 2I, H] with the
// gate rows first, down_proj [E, H, I]), the way HF 5.x's conversion mapping stacks them.
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
  for (const std::string& name : ckpt->tensor_names()) {
    if (name.find(".mlp.experts.") != std::string::npos) continue;
    auto v = ckpt->tensor(name);
    out.push_back({name, v->dtype, v->shape, bytes_of(name)});
  }
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = root + "layers." + std::to_string(l) + ".mlp.experts.";
    if (!ckpt->has(p + "0.gate_proj.weight")) continue;  // a dense layer
    const auto gate0 = ckpt->tensor(p + "0.gate_proj.weight");
    const int64_t I = gate0->shape[0], H = gate0->shape[1];
    engine::OwnedTensor gate_up{p + "gate_up_proj", gate0->dtype, {E, 2 * I, H}, {}};
    engine::OwnedTensor down{p + "down_proj", gate0->dtype, {E, H, I}, {}};
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = p + std::to_string(e) + ".";
      for (const char* part : {"gate_proj.weight", "up_proj.weight"}) {
        const auto b = bytes_of(x + part);
        gate_up.data.insert(gate_up.data.end(), b.begin(), b.end());
      }
      const auto b = bytes_of(x + "down_proj.weight");
      down.data.insert(down.data.end(), b.begin(), b.end());
    }
    out.push_back(std::move(gate_up));
    out.push_back(std::move(down));
  }
  std::filesystem::copy_file(from / "config.json", to / "config.json");
  std::filesystem::copy_file(from / "generation_config.json", to / "generation_config.json");
  ASSERT_TRUE(engine::write_safetensors(to / "model.safetensors", out).is_ok());
}

TEST(ExpertLayouts, FusedAndPerExpertTensorsGiveIdenticalLogits) {
  for (ModelFamily family : {ModelFamily::kQwen3Moe, ModelFamily::kQwen3Next, ModelFamily::kQwen3_5Moe}) {
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
    auto model = load(fixture_dir(name) / "checkpoint");
    ASSERT_TRUE(model);
    const auto golden = SafetensorsFile::read(fixture_dir(name) / "golden.safetensors");
    const auto tokens = golden.ids("input_ids");
    const auto full = full_logits(*model, tokens);
    for (std::size_t split : {std::size_t(1), std::size_t(31), std::size_t(63), std::size_t(64), std::size_t(65),
                              tokens.size() / 2, tokens.size() - 1}) {
      if (split >= 1 && split < tokens.size()) expect_split_matches(*model, tokens, full, split, 1e-4);
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures in tests/fixtures/models/{qwen3_moe,qwen3_next,qwen3_5_moe}";
}

// ---- The snapshot blob ---------------------------------------------------------------------------

class SnapshotBlob : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(engine::write_random_checkpoint(dir_.path(), tiny_spec(ModelFamily::kQwen3_5Moe, true)).is_ok());
    model_ = load(dir_.path());
    ASSERT_TRUE(model_);
    state_ = model_->new_state();
    ASSERT_TRUE(model_->forward(state_, test_tokens(10, model_->vocab_size()), nullptr, LogitsMode::kNone).is_ok());
    auto blob = state_.snapshot();
    ASSERT_TRUE(blob.is_ok());
    blob_ = std::move(blob).value();
  }
  TempDir dir_;
  std::unique_ptr<Model> model_;
  SequenceState state_;
  std::vector<std::byte> blob_;
};

TEST_F(SnapshotBlob, RoundTripRestoresEveryTensorExactly) {
  SequenceState fresh = model_->new_state();
  ASSERT_TRUE(fresh.restore(blob_).is_ok());
  EXPECT_EQ(fresh.position(), 10);
  ASSERT_EQ(fresh.layers().size(), state_.layers().size());
  for (std::size_t i = 0; i < fresh.layers().size(); ++i) {
    EXPECT_EQ(fresh.layers()[i].kv.k, state_.layers()[i].kv.k);
    EXPECT_EQ(fresh.layers()[i].kv.v, state_.layers()[i].kv.v);
    EXPECT_EQ(fresh.layers()[i].linear.conv, state_.layers()[i].linear.conv);
    EXPECT_EQ(fresh.layers()[i].linear.recurrent, state_.layers()[i].linear.recurrent);
  }
  auto again = fresh.snapshot();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, blob_);
}

TEST_F(SnapshotBlob, TruncatedBlobIsCorrupt) {
  SequenceState fresh = model_->new_state();
  for (std::size_t n : {std::size_t(0), std::size_t(3), std::size_t(12), blob_.size() / 2, blob_.size() - 1}) {
    const Status s = fresh.restore(std::span(blob_).first(n));
    EXPECT_EQ(s.code(), ErrorCode::kCorrupt) << n << ": " << s.to_string();
  }
  EXPECT_EQ(fresh.position(), 0);  // unchanged on error
}

TEST_F(SnapshotBlob, FlippedByteIsCorrupt) {
  SequenceState fresh = model_->new_state();
  auto bad = blob_;
  bad[bad.size() / 2] ^= std::byte{0x01};
  const Status s = fresh.restore(bad);
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.message();
}

TEST_F(SnapshotBlob, BadMagicIsCorrupt) {
  auto bad = blob_;
  bad[0] = std::byte{'X'};
  SequenceState fresh = model_->new_state();
  const Status s = fresh.restore(bad);
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.message();
}

TEST_F(SnapshotBlob, OtherVersionIsUnsupported) {
  auto bad = blob_;
  const uint32_t v = engine::kSnapshotVersion + 1;
  std::memcpy(bad.data() + 4, &v, 4);
  SequenceState fresh = model_->new_state();
  const Status s = fresh.restore(bad);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("version " + std::to_string(v)), std::string::npos) << s.message();
}

TEST_F(SnapshotBlob, AnotherModelsBlobIsRefused) {
  TempDir other_dir;
  ASSERT_TRUE(engine::write_random_checkpoint(other_dir.path(), tiny_spec(ModelFamily::kQwen3_5Moe, true, 99)).is_ok());
  auto other = load(other_dir.path());
  ASSERT_TRUE(other);
  SequenceState s = other->new_state();
  const Status st = s.restore(blob_);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("model"), std::string::npos) << st.message();
}

TEST_F(SnapshotBlob, RecurrentStateCannotBeRewound) {
  auto blob = state_.snapshot(5);
  EXPECT_EQ(blob.status().code(), ErrorCode::kInvalidArgument);
}

TEST(SnapshotPrefix, AttentionOnlyModelMaySnapshotAnyPrefix) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto model = load(dir.path());
  ASSERT_TRUE(model);
  const auto tokens = test_tokens(30, model->vocab_size());
  const auto full = full_logits(*model, tokens);
  SequenceState s = model->new_state();
  ASSERT_TRUE(model->forward(s, tokens, nullptr, LogitsMode::kNone).is_ok());
  auto blob = s.snapshot(12);  // rewind to token 12 of 30
  ASSERT_TRUE(blob.is_ok());
  SequenceState resumed = model->new_state();
  ASSERT_TRUE(resumed.restore(*blob).is_ok());
  const std::size_t V = std::size_t(model->vocab_size());
  std::vector<float> logits(18 * V);
  ASSERT_TRUE(model->forward(resumed, std::span(tokens).subspan(12), logits.data(), LogitsMode::kAll).is_ok());
  EXPECT_LT(rel_l2(logits.data(), &full[12 * V], 18 * V), 1e-5);
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

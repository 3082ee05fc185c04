// deepseek_v4's config.json (docs/deepseek-v4.md §1): the form HF 5.17 saves (the golden fixture's),
// the published DeepSeek-V4-Flash keys HF folds into it, DeepseekV4Config's defaults, the op specs
// made from the result, the errors for what HF cannot run either, and the state layout load_model
// builds from it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "deepseek_v4_test_util.h"
#include "ft/engine/deepseek_v4_specs.h"
#include "ft/engine/device.h"
#include "ft/engine/model.h"
#include "ft/engine/model_config.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::ModelConfig;
using engine::ModelFamily;
using engine::V4AttentionKind;
using engine::V4RouterKind;
constexpr V4AttentionKind kSwa = V4AttentionKind::kSliding, kCsa = V4AttentionKind::kCsa, kHca = V4AttentionKind::kHca;
constexpr V4RouterKind kHash = V4RouterKind::kHashMoe, kMoe = V4RouterKind::kMoe;

Result<ModelConfig> parse_fixture() {
  const auto dir = fixture_dir("deepseek_v4") / "checkpoint";
  return engine::parse_model_config(read_file(dir / "config.json"), read_file(dir / "generation_config.json"));
}

// A frequency against a value written to 5 or 6 significant digits (docs/deepseek-v4.md's).
void expect_near_rel(float got, double want, const char* what) {
  EXPECT_NEAR(got, want, std::abs(want) * 4e-5) << what;
}

TEST(DeepseekV4Config, TheSavedFixtureParses) {
  auto c = parse_fixture();
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kDeepseekV4);
  EXPECT_EQ(c->architecture, "DeepseekV4ForCausalLM");
  EXPECT_EQ(c->vocab_size, 1024);
  EXPECT_EQ(c->hidden_size, 128);
  EXPECT_EQ(c->num_hidden_layers, 4);
  EXPECT_EQ(c->num_attention_heads, 4);
  EXPECT_EQ(c->num_key_value_heads, 1);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->q_lora_rank, 48);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.25);
  EXPECT_EQ(c->qk_rope_head_dim, 16);
  EXPECT_EQ(c->rotary_dim(), 16);
  EXPECT_EQ(c->sliding_window, 16);
  EXPECT_EQ(c->index_n_heads, 16);
  EXPECT_EQ(c->index_head_dim, 32);
  EXPECT_EQ(c->index_topk, 8);
  EXPECT_EQ(c->num_experts, 16);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->moe_intermediate_size, 64);
  EXPECT_EQ(c->shared_expert_intermediate_size, 64);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.5);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{1023});
  EXPECT_EQ(c->bos_token_id, 0);
  for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(c->is_moe_layer(i)) << i;

  const ModelConfig::DeepseekV4& v4 = c->deepseek_v4;
  EXPECT_EQ(v4.attention, (std::vector<V4AttentionKind>{kSwa, kCsa, kHca, kCsa}));
  EXPECT_EQ(v4.csa_rate, 4);
  EXPECT_EQ(v4.hca_rate, 16);
  EXPECT_EQ(std::vector<int64_t>({v4.compress_rate(0), v4.compress_rate(1), v4.compress_rate(2), v4.compress_rate(3)}),
            (std::vector<int64_t>{0, 4, 16, 4}));
  EXPECT_EQ(v4.routers, (std::vector<V4RouterKind>{kHash, kMoe, kMoe, kMoe}));
  EXPECT_EQ(v4.hc_mult, 4);
  EXPECT_EQ(v4.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(v4.hc_eps, 1e-6);
  EXPECT_EQ(v4.o_groups, 2);
  EXPECT_EQ(v4.o_lora_rank, 32);
  EXPECT_DOUBLE_EQ(v4.swiglu_limit, 1.5);
  EXPECT_EQ(v4.scoring_func, "sqrtsoftplus");
  EXPECT_FALSE(v4.mlp_bias);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->rope_type, "default");
  EXPECT_DOUBLE_EQ(v4.compress_rope_theta, 160000.0);
  EXPECT_EQ(v4.compress_rope_type, "yarn");
  EXPECT_DOUBLE_EQ(v4.compress_yarn.factor, 16.0);
  EXPECT_EQ(v4.compress_yarn.original_max_position_embeddings, 256);
  EXPECT_DOUBLE_EQ(v4.compress_yarn.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(v4.compress_yarn.beta_slow, 1.0);
  EXPECT_TRUE(v4.compress_yarn.truncate);
  EXPECT_DOUBLE_EQ(v4.compress_yarn.attention_factor, 1.0);
}

// The specs the fixture's layers would be built with, against the ops tests' own constants.
TEST(DeepseekV4Config, TheFixtureGivesItsOpSpecs) {
  auto c = parse_fixture();
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const engine::HyperSpec hc = engine::v4_hyper_spec(*c);
  EXPECT_EQ(hc.streams, 4u);
  EXPECT_EQ(hc.dim, 128u);
  EXPECT_EQ(hc.sinkhorn_iters, 20u);
  EXPECT_FLOAT_EQ(hc.eps, 1e-6f);
  EXPECT_FLOAT_EQ(hc.norm_eps, 1e-6f);
  EXPECT_EQ(hc.mix_rows(), 24u);

  // Layer 0 slides with the main rope; CSA and HCA layers share the compress one (the ops tests'
  // YaRN x16 over 256 positions at theta 160000).
  const std::vector<float> compress = compress_inv_freq(16);
  for (int64_t layer : {1, 2, 3}) {
    EXPECT_EQ(engine::ref::rope_inv_freq(engine::v4_layer_rope_spec(*c, layer)), compress) << layer;
  }
  const std::vector<float> main = engine::ref::rope_inv_freq(engine::v4_layer_rope_spec(*c, 0));
  ASSERT_EQ(main.size(), 8u);
  EXPECT_FLOAT_EQ(main[0], 1.0f);
  expect_near_rel(main[1], 1.0 / std::pow(10000.0, 2.0 / 16.0), "main inv_freq[1]");
  EXPECT_NE(main, compress);

  const engine::V4AttentionSpec swa = engine::v4_attention_spec(*c, 0), hca = engine::v4_attention_spec(*c, 2);
  EXPECT_EQ(swa.rate, 0u);
  EXPECT_EQ(hca.heads, 4u);
  EXPECT_EQ(hca.head_dim, 64u);
  EXPECT_EQ(hca.rope_dims, 16u);
  EXPECT_EQ(hca.scale, 0.125f);
  EXPECT_EQ(hca.window, 16);
  EXPECT_EQ(hca.rate, 16u);

  const engine::CompressorSpec csa_kv = engine::v4_compressor_spec(*c, 1), hca_kv = engine::v4_compressor_spec(*c, 2);
  EXPECT_EQ(csa_kv.width, 64u);
  EXPECT_EQ(csa_kv.rate, 4u);
  EXPECT_TRUE(csa_kv.overlap);
  EXPECT_EQ(csa_kv.row(), 128u);
  EXPECT_EQ(csa_kv.rope_dims, 16u);
  EXPECT_EQ(hca_kv.rate, 16u);
  EXPECT_FALSE(hca_kv.overlap);
  EXPECT_EQ(engine::v4_compressor_spec(*c, 0).rate, 0u);
  const engine::CompressorSpec index_kv = engine::v4_index_compressor_spec(*c, 3);
  EXPECT_EQ(index_kv.width, 32u);
  EXPECT_EQ(index_kv.rate, 4u);
  EXPECT_TRUE(index_kv.overlap);
  EXPECT_EQ(engine::v4_index_compressor_spec(*c, 2).rate, 0u);  // HCA: no indexer
  const engine::IndexerSpec indexer = engine::v4_indexer_spec(*c);
  EXPECT_EQ(indexer.heads, 16u);
  EXPECT_EQ(indexer.head_dim, 32u);
  EXPECT_EQ(indexer.top_k, 8u);
  EXPECT_EQ(indexer.weight_scale, 0.25f);

  const engine::ref::RouterSpec router = engine::v4_router_spec(*c);
  EXPECT_EQ(router.num_experts, 16u);
  EXPECT_EQ(router.top_k, 4u);
  EXPECT_EQ(router.scoring, engine::ref::RouterScoring::kSqrtSoftplus);
  EXPECT_TRUE(router.renormalize);
  EXPECT_EQ(router.scaling, 1.5f);
  EXPECT_EQ(router.n_group, 1u);
  const engine::ref::ExpertGlu glu = engine::v4_expert_glu(*c);
  EXPECT_TRUE(glu.clamped);
  EXPECT_EQ(glu.limit, 1.5f);
  // silu(min(g, 1.5)) * clamp(u, -1.5, 1.5): no gpt-oss alpha or +1.
  EXPECT_FLOAT_EQ(engine::ref::expert_glu(glu, 3.0f, -2.0f), -1.5f * 1.5f / (1.0f + std::exp(-1.5f)));
}

// DeepSeek-V4-Flash's published config.json (the keys HF 5.17 folds into the saved ones): 43 layers
// with a 44th compress_ratios entry for the MTP layer, hash routing on the first 3, r from
// qk_rope_head_dim, the compress rope's YaRN from rope_scaling at compress_rope_theta.
const char* kFlash = R"({
  "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "vocab_size": 129280,
  "hidden_size": 4096, "moe_intermediate_size": 2048, "num_hidden_layers": 43, "num_attention_heads": 64,
  "num_key_value_heads": 1, "head_dim": 512, "q_lora_rank": 1024, "qk_rope_head_dim": 64,
  "num_experts_per_tok": 6, "n_routed_experts": 256, "n_shared_experts": 1, "scoring_func": "sqrtsoftplus",
  "norm_topk_prob": true, "routed_scaling_factor": 1.5, "topk_method": "noaux_tc", "rope_theta": 10000,
  "compress_rope_theta": 160000, "max_position_embeddings": 1048576,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32,
                   "beta_slow": 1},
  "compress_ratios": [0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                      4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0],
  "num_hash_layers": 3, "sliding_window": 128, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
  "swiglu_limit": 10.0, "o_groups": 8, "o_lora_rank": 1024, "index_n_heads": 64, "index_head_dim": 128,
  "index_topk": 512, "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": false,
  "num_nextn_predict_layers": 1, "bos_token_id": 0, "eos_token_id": 1, "expert_dtype": "fp4",
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                          "weight_block_size": [128, 128], "activation_scheme": "dynamic"}})";

TEST(DeepseekV4Config, TheFlashLegacyKeysParseToItsLayout) {
  auto c = engine::parse_model_config(kFlash);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const ModelConfig::DeepseekV4& v4 = c->deepseek_v4;
  // §6: layers 0-1 sliding, then CSA on even and HCA on odd layers, layer 42 CSA; the MTP entry cut.
  ASSERT_EQ(v4.attention.size(), 43u);
  ASSERT_EQ(v4.routers.size(), 43u);
  for (int64_t i = 0; i < 43; ++i) {
    EXPECT_EQ(v4.attention[i], i < 2 ? kSwa : i % 2 == 0 ? kCsa : kHca) << i;
    EXPECT_EQ(v4.compress_rate(i), i < 2 ? 0 : i % 2 == 0 ? 4 : 128) << i;
    EXPECT_EQ(v4.routers[i], i < 3 ? kHash : kMoe) << i;
  }
  EXPECT_EQ(c->layer_types.size(), 43u);
  EXPECT_EQ(c->qk_rope_head_dim, 64);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.125);
  EXPECT_EQ(c->head_dim, 512);
  EXPECT_EQ(c->num_key_value_heads, 1);
  EXPECT_EQ(v4.scoring_func, "sqrtsoftplus");
  EXPECT_EQ(v4.compress_rope_type, "yarn");
  EXPECT_DOUBLE_EQ(v4.compress_rope_theta, 160000.0);
  EXPECT_DOUBLE_EQ(v4.compress_yarn.factor, 16.0);
  EXPECT_EQ(v4.compress_yarn.original_max_position_embeddings, 65536);
  EXPECT_DOUBLE_EQ(v4.compress_yarn.attention_factor, 1.0);
  EXPECT_EQ(c->rope_type, "default");
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);

  // §2.2's compress frequencies for Flash (ramp 15..25 of 32 pairs) and §8's check of [14..17].
  const std::vector<float> f = engine::ref::rope_inv_freq(engine::v4_rope_spec(*c, true));
  ASSERT_EQ(f.size(), 32u);
  const double want_head[] = {1.0, 0.687656, 0.472871, 0.325172};
  for (int i = 0; i < 4; ++i) expect_near_rel(f[i], want_head[i], "inv_freq head");
  const double want_ramp[] = {0.00528686, 0.00363554, 0.00226563, 0.0013968};
  for (int i = 0; i < 4; ++i) expect_near_rel(f[14 + i], want_ramp[i], "inv_freq ramp");
  expect_near_rel(f[31], 5.68053e-07, "inv_freq last");
  // The main rope stays plain.
  expect_near_rel(engine::ref::rope_inv_freq(engine::v4_rope_spec(*c, false))[31], std::pow(10000.0, -62.0 / 64.0),
                  "main inv_freq last");

  const engine::V4AttentionSpec a = engine::v4_attention_spec(*c, 3);
  EXPECT_EQ(a.rate, 128u);
  EXPECT_EQ(a.window, 128);
  EXPECT_EQ(a.scale, float(std::pow(512.0, -0.5)));
  const engine::ref::RouterSpec r = engine::v4_router_spec(*c);
  EXPECT_EQ(r.num_experts, 256u);
  EXPECT_EQ(r.top_k, 6u);
  EXPECT_EQ(engine::v4_expert_glu(*c).limit, 10.0f);
}

// DeepseekV4Config's defaults (V4-Pro's layer pattern: no sliding layer), and the legacy scalars
// over compress_rates.
TEST(DeepseekV4Config, DefaultsFollowTheConfigClass) {
  const std::string base = R"({"model_type": "deepseek_v4", "vocab_size": 100, "hidden_size": 64,
      "num_attention_heads": 4, "num_hidden_layers": )";
  auto c = engine::parse_model_config(base + "4}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const ModelConfig::DeepseekV4& v4 = c->deepseek_v4;
  EXPECT_EQ(v4.attention, (std::vector<V4AttentionKind>{kHca, kHca, kHca, kCsa}));
  EXPECT_EQ(v4.routers, (std::vector<V4RouterKind>{kHash, kHash, kHash, kMoe}));
  EXPECT_EQ(v4.csa_rate, 4);
  EXPECT_EQ(v4.hca_rate, 128);
  EXPECT_EQ(c->head_dim, 512);
  EXPECT_EQ(c->qk_rope_head_dim, 64);
  EXPECT_EQ(c->q_lora_rank, 1024);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_EQ(c->num_experts, 256);
  EXPECT_EQ(c->num_experts_per_tok, 6);
  EXPECT_EQ(c->moe_intermediate_size, 2048);
  EXPECT_EQ(c->index_topk, 512);
  EXPECT_EQ(c->max_position_embeddings, 1048576);
  EXPECT_EQ(v4.o_groups, 8);
  EXPECT_DOUBLE_EQ(v4.swiglu_limit, 10.0);
  EXPECT_EQ(v4.compress_rope_type, "default");  // no rope dict: the compress rope is plain at 160000
  expect_near_rel(engine::ref::rope_inv_freq(engine::v4_rope_spec(*c, true))[1], std::pow(160000.0, -2.0 / 64),
                  "plain compress inv_freq[1]");

  auto two = engine::parse_model_config(base + R"(2, "num_hash_layers": 0, "compress_rate_hca": 64,
      "compress_rates": {"compressed_sparse_attention": 8, "heavily_compressed_attention": 32}})");
  ASSERT_TRUE(two.is_ok()) << two.status().to_string();
  EXPECT_EQ(two->deepseek_v4.attention, (std::vector<V4AttentionKind>{kHca, kHca}));
  EXPECT_EQ(two->deepseek_v4.routers, (std::vector<V4RouterKind>{kMoe, kMoe}));
  EXPECT_EQ(two->deepseek_v4.csa_rate, 8);
  EXPECT_EQ(two->deepseek_v4.hca_rate, 64);
  auto sigmoid = engine::parse_model_config(base + R"(1, "scoring_func": "sigmoid", "num_hash_layers": 5})");
  ASSERT_TRUE(sigmoid.is_ok()) << sigmoid.status().to_string();
  EXPECT_EQ(engine::v4_router_spec(*sigmoid).scoring, engine::ref::RouterScoring::kSigmoid);
  EXPECT_EQ(sigmoid->deepseek_v4.routers, (std::vector<V4RouterKind>{kHash}));
}

// What HF cannot run either is refused with the field named, not read as something else.
TEST(DeepseekV4Config, BadInputsAreRefusedNamingTheirField) {
  const std::string base = R"({"model_type": "deepseek_v4", "vocab_size": 100, "hidden_size": 64,
      "num_attention_heads": 4, "num_hidden_layers": 4, )";
  struct Bad {
    const char* keys;
    ErrorCode code;
    const char* says;
  };
  const Bad bad[] = {
      {R"("scoring_func": "softmax")", ErrorCode::kUnsupported, "scoring_func 'softmax'"},
      {R"("scoring_func": "tanh")", ErrorCode::kUnsupported, "scoring_func 'tanh'"},
      {R"("compress_ratios": [0, 4, 16, 128])", ErrorCode::kInvalidArgument, "compress_ratios[2] is 16"},
      {R"("compress_ratios": [0, 4, 128])", ErrorCode::kInvalidArgument, "'compress_ratios' has 3 entries"},
      {R"("layer_types": ["sliding_attention", "compressed_sparse_attention", "sliding_attention"])",
       ErrorCode::kInvalidArgument, "'layer_types' has 3 entries but num_hidden_layers is 4"},
      {R"("layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"])",
       ErrorCode::kInvalidArgument, "layer type 'full_attention'"},
      {R"("mlp_layer_types": ["hash_moe", "dense", "moe", "moe"])", ErrorCode::kInvalidArgument, "'dense'"},
      {R"("mlp_layer_types": ["moe"])", ErrorCode::kInvalidArgument, "'mlp_layer_types' has 1 entries"},
      {R"("compress_rates": {"compressed_sparse_attention": 4})", ErrorCode::kInvalidArgument,
       "heavily_compressed_attention must be positive"},
      {R"("rope_scaling": {"type": "llama3", "factor": 8})", ErrorCode::kUnsupported, "compress rope_type 'llama3'"},
      {R"("rope_scaling": {"type": "yarn", "factor": 16, "attention_factor": 1.3})", ErrorCode::kUnsupported,
       "attention_factor"},
      {R"("rope_parameters": {"main": {"rope_type": "default", "partial_rotary_factor": 0.5},
          "compress": {"rope_type": "default"}})",
       ErrorCode::kInvalidArgument, "rope_parameters.main partial_rotary_factor"},
      {R"("index_head_dim": 32)", ErrorCode::kInvalidArgument, "index_head_dim must be at least"},
      {R"("hc_sinkhorn_iters": 0)", ErrorCode::kInvalidArgument, "hc_sinkhorn_iters"},
      {R"("o_groups": 3)", ErrorCode::kInvalidArgument, "o_groups"},
      // The releases' formats only (FP8 E4M3 linears with UE8M0 tiles, FP4 or FP8 experts).
      {R"("quantization_config": {"quant_method": "mxfp4"})", ErrorCode::kUnsupported, "quant_method 'mxfp4'"},
      {R"("quantization_config": {"weight_block_size": [128, 128]})", ErrorCode::kUnsupported, "quant_method ''"},
      {R"("quantization_config": {"quant_method": "fp8", "fmt": "e5m2"})", ErrorCode::kUnsupported, "fmt 'e5m2'"},
      {R"("quantization_config": {"quant_method": "fp8", "scale_fmt": "e4m3"})", ErrorCode::kUnsupported,
       "scale_fmt 'e4m3'"},
      {R"("quantization_config": {"quant_method": "fp8", "activation_scheme": "static"})", ErrorCode::kUnsupported,
       "activation_scheme 'static'"},
      {R"("quantization_config": {"quant_method": "fp8", "weight_block_size": [128]})", ErrorCode::kInvalidArgument,
       "weight_block_size"},
      {R"("quantization_config": "fp8")", ErrorCode::kInvalidArgument, "'quantization_config' must be an object"},
      {R"("expert_dtype": "int4")", ErrorCode::kUnsupported, "expert_dtype 'int4'"},
  };
  for (const Bad& b : bad) {
    auto c = engine::parse_model_config(base + b.keys + "}");
    ASSERT_FALSE(c.is_ok()) << b.keys;
    EXPECT_EQ(c.status().code(), b.code) << b.keys << ": " << c.status().to_string();
    EXPECT_NE(c.status().message().find(b.says), std::string::npos) << b.keys << ": " << c.status().message();
  }
  // The same keys with acceptable values parse, so each refusal above is its value's.
  auto ok = engine::parse_model_config(base + R"("compress_ratios": [0, 4, 128, 4, 0], "index_head_dim": 64,
      "mlp_layer_types": ["hash_moe", "moe", "moe", "moe"], "o_groups": 4, "hc_sinkhorn_iters": 1,
      "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                              "weight_block_size": [128, 128], "activation_scheme": "dynamic"}})");
  EXPECT_TRUE(ok.is_ok()) << ok.status().to_string();
  // Flash-Base's shape: FP8 experts, fp32 tile scales (no scale_fmt).
  for (const char* experts : {R"("expert_dtype": "fp8")", R"("expert_dtype": null)", R"("expert_dtype": "fp4")"}) {
    auto base_ok = engine::parse_model_config(base + experts + R"(, "quantization_config": {"quant_method": "fp8"}})");
    EXPECT_TRUE(base_ok.is_ok()) << experts << ": " << base_ok.status().to_string();
  }
}

// The golden fixture (sliding, CSA, HCA, CSA; head_dim 64, index_head_dim 32) loads with the state
// layout v4_attention_block.h describes: a KV slot per layer for the kv rows and entries, one more
// on CSA layers for the index keys; the compressed layers' open windows as sequence state, rings of
// 2m tokens (CSA, the attention's and the indexer's rows side by side) or m (HCA).
TEST(DeepseekV4Config, LoadModelBuildsTheFamilyWithItsStateLayout) {
  auto m = engine::load_model(fixture_checkpoint("deepseek_v4"));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto kv = (*m)->kv_layout();
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->layers, 4);
  const std::vector<engine::KvLayerShape> shapes = {{1, 64}, {2, 64}, {1, 64}, {2, 64}};
  EXPECT_EQ(kv->per_layer, shapes);
  const engine::SequenceState s = (*m)->new_state();
  ASSERT_EQ(s.linear().size(), 3u);
  EXPECT_EQ(s.linear()[0].layer, 1);
  EXPECT_EQ(s.linear()[0].conv_shape, (std::vector<int64_t>{8, 2 * 64 + 2 * 32}));
  EXPECT_EQ(s.linear()[1].layer, 2);
  EXPECT_EQ(s.linear()[1].recurrent_shape, (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(s.linear()[2].layer, 3);
}

// The GPU runs the family resident and with its routed experts in host RAM (8 slots): the host-
// routed, clamped experts of the offloaded model give the resident model's logits (the offload
// tests' 1e-4: only the order a token's experts are added in differs).
TEST(DeepseekV4Config, TheGpuRunsTheFamilyResidentAndOffloaded) {
  if (!engine::query_cuda_device()) GTEST_SKIP() << "no GPU";
  engine::LoadOptions o;
  o.backend = engine::BackendKind::kCuda;
  o.kv_budget_bytes = 64ull << 20;
  auto m = engine::load_model(fixture_checkpoint("deepseek_v4"), o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  o.expert_slots = 8;
  auto offloaded = engine::load_model(fixture_checkpoint("deepseek_v4"), o);
  ASSERT_TRUE(offloaded.is_ok()) << offloaded.status().to_string();
  ASSERT_TRUE((*offloaded)->placement().experts_on_host);
  const auto ids = test_tokens(24, (*m)->vocab_size(), 3);
  const std::size_t V = std::size_t((*m)->vocab_size());
  std::vector<float> want(V), got(V);
  engine::SequenceState a = (*m)->new_state(), b = (*offloaded)->new_state();
  ASSERT_TRUE((*m)->forward(a, ids, want.data(), engine::LogitsMode::kLast).is_ok());
  ASSERT_TRUE((*offloaded)->forward(b, ids, got.data(), engine::LogitsMode::kLast).is_ok());
  EXPECT_LT(rel_l2(got.data(), want.data(), V), 1e-4);
}

}  // namespace
}  // namespace ft::test

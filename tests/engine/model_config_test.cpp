// config.json parsing: families, nested text_config, RoPE keys old and new, layer types, MoE
// layer selection, stop tokens, and the errors for unknown architectures.
#include "ft/engine/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ft::engine {
namespace {

const char* kQwen3Moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
  "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128, "rms_norm_eps": 1e-6,
  "rope_theta": 1000000.0, "rope_scaling": null, "num_experts": 8, "num_experts_per_tok": 2,
  "moe_intermediate_size": 16, "norm_topk_prob": true, "decoder_sparse_step": 2,
  "mlp_only_layers": [3], "eos_token_id": 5, "tie_word_embeddings": false })";

TEST(ModelConfig, ParsesQwen3MoeWithLegacyRopeKeys) {
  auto c = parse_model_config(kQwen3Moe);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kQwen3Moe);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 1.0);
  EXPECT_EQ(c->rotary_dim(), 32);
  EXPECT_EQ(c->layer_types, std::vector<LayerKind>(4, LayerKind::kFullAttention));
  // decoder_sparse_step 2: layers 1 and 3 are sparse, but 3 is in mlp_only_layers.
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_FALSE(c->is_moe_layer(2));
  EXPECT_FALSE(c->is_moe_layer(3));
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{5});
}

TEST(ModelConfig, GenerationConfigEosListWins) {
  auto c = parse_model_config(kQwen3Moe, R"({"eos_token_id": [7, 9], "bos_token_id": 1})");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(c->bos_token_id, 1);
}

TEST(ModelConfig, Qwen3MoeDefaultsNormTopkProbToFalse) {
  auto c = parse_model_config(R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
      "moe_intermediate_size": 4})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->num_key_value_heads, 2);  // defaults to num_attention_heads
  EXPECT_EQ(c->head_dim, 4);             // hidden / heads
}

TEST(ModelConfig, NestedTextConfigWithRopeParameters) {
  auto c = parse_model_config(R"({
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "tie_word_embeddings": false,
    "text_config": {"model_type": "qwen3_5_moe_text", "vocab_size": 100, "hidden_size": 32,
      "num_hidden_layers": 8, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
      "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
      "shared_expert_intermediate_size": 16, "norm_topk_prob": false,
      "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
      "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                          "mrope_section": [11, 11, 10], "mrope_interleaved": true}},
    "vision_config": {"depth": 2}})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kQwen3_5Moe);
  EXPECT_TRUE(c->nested_text_config);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e7);
  EXPECT_EQ(c->rotary_dim(), 16);
  EXPECT_EQ(c->mrope_section, (std::vector<int64_t>{11, 11, 10}));
  EXPECT_TRUE(c->norm_topk_prob);  // Qwen3.5's router always renormalises
  EXPECT_EQ(c->shared_expert_intermediate_size, 16);
  // No layer_types: derived from full_attention_interval (default 4).
  ASSERT_EQ(c->layer_types.size(), 8u);
  EXPECT_EQ(c->count_layers(LayerKind::kFullAttention), 2);
  EXPECT_EQ(c->layer_types[3], LayerKind::kFullAttention);
  EXPECT_EQ(c->layer_types[7], LayerKind::kFullAttention);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(c->is_moe_layer(i));
}

TEST(ModelConfig, Qwen3NextLayerTypesAndDefaultPartialRotary) {
  auto c = parse_model_config(R"({"model_type": "qwen3_next", "vocab_size": 10, "hidden_size": 8,
      "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
      "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "intermediate_size": 8,
      "rope_theta": 5000, "layer_types": ["linear_attention", "mamba", "attention"],
      "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 4,
      "linear_value_head_dim": 4})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->layer_types, (std::vector<LayerKind>{LayerKind::kLinearAttention, LayerKind::kLinearAttention,
                                                    LayerKind::kFullAttention}));
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(c->rope_theta, 5000);
  EXPECT_TRUE(c->norm_topk_prob);
}

TEST(ModelConfig, UnknownArchitectureIsUnsupportedAndNamed) {
  auto c = parse_model_config(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(c.status().message(),
            "unsupported architecture 'LlamaForCausalLM' (supported: qwen3_moe, qwen3_next, qwen3_5_moe, mixtral, "
            "qwen2_moe, olmoe, deepseek_v3, glm4_moe, dots1, ernie4_5_moe, minimax_m2, gpt_oss, glm4_moe_lite, "
            "hunyuan_v1_moe, exaone_moe, afmoe, llama4_text, deepseek_v32, glm_moe_dsa, gemma4_text, deepseek_v4)");
}

// Mixtral-8x7B's config.json (shrunk): the experts' width is intermediate_size, their count
// num_local_experts; no rope_theta or rms_norm_eps here takes MixtralConfig's defaults.
const char* kMixtral = R"({
  "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 100, "hidden_size": 64,
  "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": null, "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": null,
  "router_jitter_noise": 0.0, "eos_token_id": 2, "bos_token_id": 1})";

TEST(ModelConfig, ParsesMixtral) {
  auto c = parse_model_config(kMixtral);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kMixtral);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->moe_intermediate_size, 96);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c->norm_topk_prob);  // Mixtral's router always renormalises
  EXPECT_FALSE(c->attention_bias || c->qkv_bias);
  EXPECT_EQ(c->shared_expert_intermediate_size, 0);
  EXPECT_TRUE(c->is_moe_layer(0) && c->is_moe_layer(1));
}

TEST(ModelConfig, MixtralWithASlidingWindowIsRefusedNamingIt) {
  std::string text = kMixtral;
  const std::string from = "\"sliding_window\": null";
  text.replace(text.find(from), from.size(), "\"sliding_window\": 4096");
  auto c = parse_model_config(text);
  EXPECT_EQ(c.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(c.status().message().find("sliding_window"), std::string::npos) << c.status().message();
}

TEST(ModelConfig, ParsesQwen2MoeWithItsDefaults) {
  // Qwen1.5-MoE-A2.7B's keys: no qkv_bias (always on), no norm_topk_prob (off), a shared expert.
  auto c = parse_model_config(R"({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
      "num_attention_heads": 4, "num_key_value_heads": 4, "moe_intermediate_size": 16,
      "shared_expert_intermediate_size": 32, "num_experts": 6, "num_experts_per_tok": 2,
      "decoder_sparse_step": 1, "mlp_only_layers": [2], "rope_theta": 1000000.0, "sliding_window": 32768,
      "use_sliding_window": false, "max_window_layers": 21})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kQwen2Moe);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->attention_bias);  // o_proj has none
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->shared_expert_intermediate_size, 32);
  EXPECT_EQ(c->moe_intermediate_size, 16);
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_FALSE(c->is_moe_layer(2));
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
}

TEST(ModelConfig, Qwen2MoeSlidingLayersAreRefused) {
  auto c = parse_model_config(R"({"model_type": "qwen2_moe", "vocab_size": 10, "hidden_size": 8,
      "num_hidden_layers": 2, "num_attention_heads": 2, "moe_intermediate_size": 4, "num_experts": 4,
      "num_experts_per_tok": 2, "shared_expert_intermediate_size": 4,
      "layer_types": ["sliding_attention", "full_attention"]})");
  EXPECT_EQ(c.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(c.status().message().find("sliding_attention"), std::string::npos) << c.status().message();
}

const char* kOlmoe = R"({
  "architectures": ["OlmoeForCausalLM"], "model_type": "olmoe", "vocab_size": 100, "hidden_size": 64,
  "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
  "num_experts": 8, "num_experts_per_tok": 2, "clip_qkv": null, "attention_bias": false,
  "rope_theta": 10000.0, "pad_token_id": 1, "eos_token_id": 50279})";

TEST(ModelConfig, ParsesOlmoe) {
  auto c = parse_model_config(kOlmoe);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kOlmoe);
  EXPECT_EQ(c->moe_intermediate_size, 32);  // the experts are intermediate_size wide
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->shared_expert_intermediate_size, 0);
  EXPECT_TRUE(c->is_moe_layer(0) && c->is_moe_layer(1));
}

TEST(ModelConfig, OlmoeFeaturesNotImplementedAreRefusedNamingTheirField) {
  const std::string from = "\"clip_qkv\": null";
  const std::pair<std::string, std::string> cases[] = {{"\"clip_qkv\": 8.0", "clip_qkv"},
                                                       {"\"sliding_window\": 128", "sliding_window"},
                                                       {"\"head_dim\": 32", "head_dim"}};
  for (const auto& [to, field] : cases) {
    std::string text = kOlmoe;
    text.replace(text.find(from), from.size(), to);
    auto c = parse_model_config(text);
    EXPECT_EQ(c.status().code(), ErrorCode::kUnsupported) << field;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().message();
  }
}

TEST(ModelConfig, UnsupportedRopeTypeAndBadJson) {
  auto longrope = parse_model_config(R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8,
      "rope_scaling": {"rope_type": "longrope", "factor": 4.0}})");
  EXPECT_EQ(longrope.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(longrope.status().message().find("longrope"), std::string::npos);
  EXPECT_EQ(parse_model_config("{not json").status().code(), ErrorCode::kInvalidArgument);
  auto missing = parse_model_config(R"({"model_type": "qwen3_moe", "vocab_size": 10})");
  EXPECT_EQ(missing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("hidden_size"), std::string::npos) << missing.status().message();
}

// Qwen3's long-context setting: YaRN in the legacy rope_scaling dict, the original context in it.
TEST(ModelConfig, YarnFromRopeScalingWithHfDefaults) {
  auto c = parse_model_config(R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c->yarn.factor, 4.0);
  EXPECT_EQ(c->yarn.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c->yarn.beta_fast, 32);
  EXPECT_DOUBLE_EQ(c->yarn.beta_slow, 1);
  EXPECT_TRUE(c->yarn.truncate);
  EXPECT_NEAR(c->yarn.attention_factor, 0.1 * std::log(4.0) + 1, 1e-12);  // neither mscale given
  // Without original_max_position_embeddings the context is max_position_embeddings; without any, an error.
  auto no_orig = parse_model_config(R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "max_position_embeddings": 4096,
      "rope_parameters": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.25, "truncate": false}})");
  ASSERT_TRUE(no_orig.is_ok()) << no_orig.status().to_string();
  EXPECT_EQ(no_orig->yarn.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(no_orig->yarn.attention_factor, 1.25);
  EXPECT_FALSE(no_orig->yarn.truncate);
  auto none = parse_model_config(R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
  EXPECT_EQ(none.status().code(), ErrorCode::kInvalidArgument);
}

// DeepSeek-V3's config.json (shrunk; the release's keys, its legacy rope_scaling).
const char* kDeepseekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 100,
  "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16, "num_hidden_layers": 4,
  "num_attention_heads": 4, "num_key_value_heads": 4, "n_shared_experts": 1, "n_routed_experts": 16,
  "routed_scaling_factor": 2.5, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 16,
  "v_head_dim": 24, "qk_nope_head_dim": 32, "n_group": 4, "topk_group": 2, "num_experts_per_tok": 4,
  "first_k_dense_replace": 3, "norm_topk_prob": true, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
  "moe_layer_freq": 1, "hidden_act": "silu", "max_position_embeddings": 163840, "rms_norm_eps": 1e-06,
  "rope_theta": 10000, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
  "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
  "num_nextn_predict_layers": 1, "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": false})";

TEST(ModelConfig, ParsesDeepseekV3) {
  auto c = parse_model_config(kDeepseekV3);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kDeepseekV3);
  EXPECT_TRUE(c->mla);
  EXPECT_EQ(c->q_lora_rank, 48);
  EXPECT_EQ(c->kv_lora_rank, 32);
  EXPECT_EQ(c->head_dim, 64);  // the KV pages' width: max(32 + 16, 24), rounded up to 32s
  EXPECT_EQ(c->rotary_dim(), 16);
  EXPECT_TRUE(c->rope_interleave);  // DeepseekV3Config's default
  EXPECT_EQ(c->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c->yarn.factor, 40);
  EXPECT_DOUBLE_EQ(c->yarn.attention_factor, 1.0);  // mscale == mscale_all_dim
  EXPECT_TRUE(c->sigmoid_router);
  EXPECT_EQ(c->num_experts, 16);
  EXPECT_EQ(c->n_group, 4);
  EXPECT_EQ(c->topk_group, 2);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_EQ(c->shared_expert_intermediate_size, 16);
  EXPECT_TRUE(c->norm_topk_prob);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(c->is_moe_layer(i)) << i;
  EXPECT_TRUE(c->is_moe_layer(3));
}

TEST(ModelConfig, DeepseekV3NullQLoraAndKimiK2) {
  std::string text = kDeepseekV3;
  text.replace(text.find("\"q_lora_rank\": 48"), 17, "\"q_lora_rank\": null");
  auto c = parse_model_config(text);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->q_lora_rank, 0);
  text.replace(text.find("\"deepseek_v3\""), 13, "\"kimi_k2\"");
  auto kimi = parse_model_config(text);
  ASSERT_TRUE(kimi.is_ok()) << kimi.status().to_string();
  EXPECT_EQ(kimi->family, ModelFamily::kDeepseekV3);
}

TEST(ModelConfig, DeepseekV2RoutersAreRefusedNamingTheirField) {
  for (const auto& [from, to, field] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\"", "scoring_func"},
           {"\"topk_method\": \"noaux_tc\"", "\"topk_method\": \"group_limited_greedy\"", "topk_method"},
           {"\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2", "moe_layer_freq"},
           {"\"num_key_value_heads\": 4", "\"num_key_value_heads\": 2", "num_key_value_heads"}}) {
    std::string text = kDeepseekV3;
    text.replace(text.find(from), from.size(), to);
    auto c = parse_model_config(text);
    EXPECT_EQ(c.status().code(), ErrorCode::kUnsupported) << field;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().message();
  }
  std::string groups = kDeepseekV3;
  groups.replace(groups.find("\"n_group\": 4"), 12, "\"n_group\": 3");  // 16 experts do not split in 3
  EXPECT_EQ(parse_model_config(groups).status().code(), ErrorCode::kInvalidArgument);
}

// GLM-4.5-Air's config.json (shrunk): transformers 5.x names the expert count num_local_experts.
TEST(ModelConfig, ParsesGlm4MoeWithItsDefaults) {
  auto c = parse_model_config(R"({"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16,
      "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
      "num_local_experts": 8, "num_experts_per_tok": 2, "attention_bias": true,
      "rope_parameters": {"rope_type": "default", "rope_theta": 1000000}})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kGlm4Moe);
  EXPECT_FALSE(c->mla);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.5);  // Glm4MoeConfig's default
  EXPECT_EQ(c->rotary_dim(), 16);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->n_group, 1);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.0);
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->shared_expert_intermediate_size, 16);
  EXPECT_FALSE(c->use_qk_norm);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
}

// dots.llm1's config.json (shrunk): Dots1Config's None defaults (routed and shared expert counts)
// make those keys required; a sliding window from max_window_layers on is refused.
TEST(ModelConfig, ParsesDots1AndRefusesItsSlidingLayers) {
  const std::string base = R"({"architectures": ["Dots1ForCausalLM"], "model_type": "dots1", "vocab_size": 100,
      "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16, "num_hidden_layers": 3,
      "num_attention_heads": 4, "num_key_value_heads": 2, "n_routed_experts": 8, "num_experts_per_tok": 2,
      "n_shared_experts": 2, "first_k_dense_replace": 1, "sliding_window": null, "max_window_layers": 3)";
  auto c = parse_model_config(base + "}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kDots1);
  EXPECT_TRUE(c->sigmoid_router);
  EXPECT_FALSE(c->norm_topk_prob);  // Dots1Config's default
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->shared_expert_intermediate_size, 32);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.0);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(2));
  std::string sliding = base;
  sliding.replace(sliding.find("\"sliding_window\": null, \"max_window_layers\": 3"), 46,
                  "\"sliding_window\": 4096, \"max_window_layers\": 1");
  auto s = parse_model_config(sliding + "}");
  EXPECT_EQ(s.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.status().message().find("sliding_window"), std::string::npos) << s.status().message();
  std::string no_shared = base;
  no_shared.replace(no_shared.find("\"n_shared_experts\": 2, "), 23, "");
  auto missing = parse_model_config(no_shared + "}");
  EXPECT_EQ(missing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("n_shared_experts"), std::string::npos) << missing.status().message();
}

// ERNIE-4.5-21B-A3B's config.json (shrunk): MoE layers from moe_layer_start_index to
// moe_layer_end_index every moe_layer_interval; Ernie4_5_MoeConfig's defaults (theta 500000, tied
// embeddings); the attribute_map spellings num_experts / num_experts_per_tok; use_bias refused.
TEST(ModelConfig, ParsesErnie4_5MoeAndRefusesUseBias) {
  const std::string base = R"({"architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 6,
      "num_attention_heads": 4, "num_key_value_heads": 2, "moe_intermediate_size": 16, "moe_k": 2,
      "moe_num_experts": 8, "moe_num_shared_experts": 2, "moe_layer_start_index": 1, "moe_layer_end_index": 4,
      "moe_layer_interval": 2, "use_bias": false)";
  auto c = parse_model_config(base + "}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kErnie4_5Moe);
  EXPECT_TRUE(c->biased_softmax_router);
  EXPECT_TRUE(c->rope_interleave);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->num_experts_per_tok, 2);
  EXPECT_EQ(c->shared_expert_intermediate_size, 32);
  // (i + 1) % 2 == 0 within [1, 4]: layers 1 and 3.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c->is_moe_layer(i), i == 1 || i == 3) << i;
  std::string aliases = base;
  aliases.replace(aliases.find("\"moe_k\""), 7, "\"num_experts_per_tok\"");
  aliases.replace(aliases.find("\"moe_num_experts\""), 17, "\"num_experts\"");
  aliases.replace(aliases.find("\"moe_layer_end_index\": 4"), 24, "\"moe_layer_end_index\": -1");
  auto a = parse_model_config(aliases + "}");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->num_experts, 8);
  EXPECT_EQ(a->num_experts_per_tok, 2);
  EXPECT_TRUE(a->is_moe_layer(5));  // end -1: the last layer
  std::string biased = base;
  biased.replace(biased.find("\"use_bias\": false"), 17, "\"use_bias\": true");
  auto b = parse_model_config(biased + "}");
  EXPECT_EQ(b.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(b.status().message().find("use_bias"), std::string::npos) << b.status().message();
}

// MiniMax-M2's config.json (shrunk, its release's keys): rotary_dim gives the partial RoPE, the
// experts are intermediate_size wide, every layer is MoE behind a sigmoid router.
TEST(ModelConfig, ParsesMinimaxM2) {
  auto c = parse_model_config(R"({"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 24, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "rotary_dim": 16,
      "num_local_experts": 8, "num_experts_per_tok": 2, "use_qk_norm": true, "qk_norm_type": "per_layer",
      "scoring_func": "sigmoid", "use_routing_bias": true, "rope_theta": 5000000, "attention_bias": true})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kMinimaxM2);
  EXPECT_EQ(c->rotary_dim(), 16);
  EXPECT_TRUE(c->sigmoid_router);
  EXPECT_EQ(c->moe_intermediate_size, 24);
  EXPECT_EQ(c->shared_expert_intermediate_size, 0);
  EXPECT_FALSE(c->attention_bias);  // MiniMaxM2Attention builds its projections without biases
  EXPECT_TRUE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
}

// gpt-oss as a bare config (GptOssConfig's defaults): sliding and full layers alternating from a
// sliding one, window 128, YaRN x32 over 4096 positions not truncated, biased attention, experts
// intermediate_size wide and renormalised; a null sliding_window means none, and explicit
// layer_types are followed.
TEST(ModelConfig, ParsesGptOssWithItsDefaults) {
  const std::string base = R"({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 24, "num_hidden_layers": 3,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "num_local_experts": 8)";
  auto c = parse_model_config(base + "}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kGptOss);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_TRUE(c->is_sliding_layer(0));
  EXPECT_FALSE(c->is_sliding_layer(1));
  EXPECT_TRUE(c->is_sliding_layer(2));
  EXPECT_EQ(c->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c->rope_theta, 150000.0);
  EXPECT_DOUBLE_EQ(c->yarn.factor, 32.0);
  EXPECT_EQ(c->yarn.original_max_position_embeddings, 4096);
  EXPECT_FALSE(c->yarn.truncate);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->moe_intermediate_size, 24);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  auto none = parse_model_config(base + R"(, "sliding_window": null,
      "layer_types": ["full_attention", "sliding_attention", "full_attention"]})");
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  EXPECT_EQ(none->sliding_window, 0);
  EXPECT_FALSE(none->is_sliding_layer(0));
  EXPECT_TRUE(none->is_sliding_layer(1));
  // Other families still refuse sliding layers, naming the type.
  auto qwen = parse_model_config(R"({"model_type": "qwen3_moe", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "layer_types": ["sliding_attention"]})");
  EXPECT_EQ(qwen.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(qwen.status().message().find("sliding_attention"), std::string::npos) << qwen.status().message();
}

// GLM-4.7-Flash's keys left out take Glm4MoeLiteConfig's defaults: latent attention with the q
// LoRA, 64 experts top-4 behind the sigmoid router scaled by 1.8, one shared expert, the first
// layer dense, whatever first_k_dense_replace says (HF reads only mlp_layer_types).
TEST(ModelConfig, Glm4MoeLiteTakesItsConfigClassDefaults) {
  auto c = parse_model_config(R"({"architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite",
      "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
      "first_k_dense_replace": 2})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kGlm4MoeLite);
  EXPECT_TRUE(c->mla);
  EXPECT_EQ(c->q_lora_rank, 768);
  EXPECT_EQ(c->kv_lora_rank, 512);
  EXPECT_EQ(c->qk_nope_head_dim, 192);
  EXPECT_EQ(c->qk_rope_head_dim, 64);
  EXPECT_EQ(c->v_head_dim, 256);
  EXPECT_EQ(c->head_dim, 256);  // max(192 + 64, 256): what the KV pages hold per head
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_TRUE(c->rope_interleave);
  EXPECT_EQ(c->rotary_dim(), 64);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c->sigmoid_router);
  EXPECT_EQ(c->num_experts, 64);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->moe_intermediate_size, 1536);
  EXPECT_EQ(c->shared_expert_intermediate_size, 1536);
  EXPECT_EQ(c->intermediate_size, 10240);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.8);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->n_group, 1);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_TRUE(c->is_moe_layer(2));
}

TEST(ModelConfig, Glm4MoeLiteReadsItsDenseLayersFromMlpLayerTypes) {
  const std::string base = R"({"model_type": "glm4_moe_lite", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 3, "num_attention_heads": 4, "rope_interleave": false, )";
  auto c = parse_model_config(base + R"("mlp_layer_types": ["sparse", "dense", "sparse"]})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE(c->is_moe_layer(0));
  EXPECT_FALSE(c->is_moe_layer(1));
  EXPECT_TRUE(c->is_moe_layer(2));
  EXPECT_FALSE(c->rope_interleave);
  auto short_list = parse_model_config(base + R"("mlp_layer_types": ["dense", "sparse"]})");
  EXPECT_EQ(short_list.status().code(), ErrorCode::kInvalidArgument);
  auto odd = parse_model_config(base + R"("mlp_layer_types": ["dense", "moe", "sparse"]})");
  EXPECT_EQ(odd.status().code(), ErrorCode::kInvalidArgument);
  auto gqa = parse_model_config(base + R"("num_key_value_heads": 2})");
  EXPECT_EQ(gqa.status().code(), ErrorCode::kUnsupported);
}

// Hunyuan-A13B's keys left out take HunYuanMoEV1Config's defaults: one expert top-1, experts and
// shared MLP intermediate_size wide, every layer sparse, head_dim hidden / heads (null as HF's).
TEST(ModelConfig, HunyuanV1MoeTakesItsConfigClassDefaults) {
  auto c = parse_model_config(R"({"architectures": ["HunYuanMoEV1ForCausalLM"], "model_type": "hunyuan_v1_moe",
      "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": null})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kHunyuanV1Moe);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->num_experts, 1);
  EXPECT_EQ(c->num_experts_per_tok, 1);
  EXPECT_EQ(c->intermediate_size, 11008);
  EXPECT_EQ(c->moe_intermediate_size, 11008);
  EXPECT_EQ(c->shared_expert_intermediate_size, 11008);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FALSE(c->sigmoid_router);
  EXPECT_FALSE(c->rope_interleave);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
}

// The release's shape of the keys: moe_topk one per layer, and the "dynamic" RoPE with an NTK alpha
// that raises the base to theta * alpha^(d / (d - 2)).
TEST(ModelConfig, HunyuanV1MoeReadsPerLayerTopKAndTheAlphaRope) {
  const std::string base = R"({"model_type": "hunyuan_v1_moe", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
      "intermediate_size": 24, "num_experts": 8, )";
  auto c = parse_model_config(base + R"("moe_topk": [3, 3],
      "rope_scaling": {"alpha": 1000.0, "beta_fast": 32, "beta_slow": 1, "factor": 1.0, "mscale": 1.0,
                       "mscale_all_dim": 1.0, "type": "dynamic"}, "rope_theta": 10000.0})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->num_experts_per_tok, 3);
  EXPECT_EQ(c->rope_type, "default");
  EXPECT_NEAR(c->rope_theta, 10000.0 * std::pow(1000.0, 32.0 / 30.0), 1e-6 * c->rope_theta);
  auto mixed = parse_model_config(base + R"("moe_topk": [2, 3]})");
  EXPECT_EQ(mixed.status().code(), ErrorCode::kUnsupported);
  auto dynamic = parse_model_config(base + R"("rope_parameters": {"rope_type": "dynamic", "factor": 2.0}})");
  EXPECT_EQ(dynamic.status().code(), ErrorCode::kUnsupported);
}

// EXAONE MoE with ExaoneMoeConfig's defaults: sliding layers but every fourth (which takes no
// RoPE: the model file's business), window 4096, one dense layer first, 64 experts top-8 behind the
// sigmoid router scaled by 2.5 with one shared expert; mlp_layer_types wins over
// first_k_dense_replace; without a window no layer slides.
TEST(ModelConfig, ParsesExaoneMoeWithItsDefaults) {
  const std::string base = R"({"architectures": ["ExaoneMoeForCausalLM"], "model_type": "exaone_moe",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 5,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16)";
  auto c = parse_model_config(base + "}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kExaoneMoe);
  EXPECT_EQ(c->sliding_window, 4096);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(c->is_sliding_layer(i), i != 3) << i;
  EXPECT_TRUE(c->sigmoid_router);
  EXPECT_EQ(c->num_experts, 64);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 1024);
  EXPECT_EQ(c->shared_expert_intermediate_size, 1024);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  auto typed = parse_model_config(base + R"(, "mlp_layer_types": ["sparse", "dense", "sparse", "sparse", "sparse"],
      "sliding_window": null})");
  ASSERT_TRUE(typed.is_ok()) << typed.status().to_string();
  EXPECT_TRUE(typed->is_moe_layer(0));
  EXPECT_FALSE(typed->is_moe_layer(1));
  EXPECT_EQ(typed->sliding_window, 0);
  for (int64_t i = 0; i < 5; ++i) EXPECT_FALSE(typed->is_sliding_layer(i)) << i;
  auto text_pattern = parse_model_config(base + R"(, "sliding_window_pattern": "LLLG"})");
  EXPECT_EQ(text_pattern.status().code(), ErrorCode::kUnsupported);
}

// AFMoE with AfmoeConfig's defaults: a global layer every fourth, window 1024, one dense layer,
// 64 experts top-6 behind the sigmoid router (renormalised, route_scale) with two shared experts;
// muP embedding scaling is refused, not ignored.
TEST(ModelConfig, ParsesAfmoeWithItsDefaults) {
  const std::string base = R"({"architectures": ["AfmoeForCausalLM"], "model_type": "afmoe",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 8,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16)";
  auto c = parse_model_config(base + "}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kAfmoe);
  EXPECT_EQ(c->sliding_window, 1024);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(c->is_sliding_layer(i), i % 4 != 3) << i;
  EXPECT_TRUE(c->sigmoid_router);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->num_experts, 64);
  EXPECT_EQ(c->num_experts_per_tok, 6);
  EXPECT_EQ(c->shared_expert_intermediate_size, 2 * 1408);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.0);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  auto every_other = parse_model_config(base + R"(, "global_attn_every_n_layers": 2, "route_scale": 2.5,
      "num_dense_layers": 2})");
  ASSERT_TRUE(every_other.is_ok()) << every_other.status().to_string();
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(every_other->is_sliding_layer(i), i % 2 == 0) << i;
  EXPECT_DOUBLE_EQ(every_other->routed_scaling_factor, 2.5);
  EXPECT_FALSE(every_other->is_moe_layer(1));
  EXPECT_EQ(parse_model_config(base + R"(, "mup_enabled": true})").status().code(), ErrorCode::kUnsupported);
}

// Llama 4 with Llama4TextConfig's defaults: every layer MoE, every fourth without RoPE (and not
// chunked), chunks of 8192, the temperature on; moe_layers and no_rope_layers win; Scout's Llama 3
// RoPE scaling; routing other than top-1 is refused.
TEST(ModelConfig, ParsesLlama4TextWithItsDefaults) {
  const std::string base = R"({"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text",
      "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 16)";
  auto c = parse_model_config(base + "}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kLlama4Text);
  EXPECT_EQ(c->num_experts, 16);
  EXPECT_EQ(c->num_experts_per_tok, 1);
  EXPECT_EQ(c->moe_intermediate_size, 8192);
  EXPECT_EQ(c->shared_expert_intermediate_size, 8192);
  EXPECT_EQ(c->intermediate_size, 16384);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_TRUE(c->rope_interleave);
  EXPECT_EQ(c->attention_chunk_size, 8192);
  EXPECT_TRUE(c->attn_temperature_tuning);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(c->is_moe_layer(i)) << i;
    EXPECT_EQ(c->is_nope_layer(i), i == 3) << i;
    EXPECT_EQ(c->is_chunked_layer(i), i != 3) << i;
  }
  auto listed = parse_model_config(base + R"(, "moe_layers": [1, 3], "no_rope_layers": [0, 1, 1, 1],
      "attention_chunk_size": null, "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0,
      "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
  EXPECT_FALSE(listed->is_moe_layer(0));
  EXPECT_TRUE(listed->is_moe_layer(1));
  EXPECT_TRUE(listed->is_nope_layer(0));
  EXPECT_EQ(listed->attention_chunk_size, 0);
  EXPECT_EQ(listed->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(listed->llama3.factor, 16.0);
  EXPECT_DOUBLE_EQ(listed->llama3.high_freq_factor, 1.0);
  EXPECT_EQ(parse_model_config(base + R"(, "num_experts_per_tok": 2})").status().code(), ErrorCode::kUnsupported);
  auto wrapped = parse_model_config(R"({"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
      "text_config": {"model_type": "llama4_text", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}})");
  ASSERT_TRUE(wrapped.is_ok()) << wrapped.status().to_string();
  EXPECT_EQ(wrapped->family, ModelFamily::kLlama4Text);
}

// DeepSeek-V3.2 with DeepseekV32Config's defaults: DeepSeek-V3's latent attention (interleaved
// rope pairs whatever rope_interleave says) and router, three dense layers first, and the indexer
// (top 2048 of 64 heads of 128, NeoX rope halves); "deepseek_sparse_attention" layer types.
TEST(ModelConfig, ParsesDeepseekV32WithItsDefaults) {
  auto c = parse_model_config(R"({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
      "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
      "rope_interleave": false,
      "layer_types": ["deepseek_sparse_attention", "deepseek_sparse_attention", "deepseek_sparse_attention",
                      "deepseek_sparse_attention", "deepseek_sparse_attention"]})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kDeepseekV32);
  EXPECT_TRUE(c->mla);
  EXPECT_TRUE(c->rope_interleave);
  EXPECT_EQ(c->q_lora_rank, 1536);
  EXPECT_EQ(c->qk_nope_head_dim, 128);
  EXPECT_EQ(c->v_head_dim, 128);
  EXPECT_EQ(c->head_dim, 192);
  EXPECT_EQ(c->index_topk, 2048);
  EXPECT_EQ(c->index_head_dim, 128);
  EXPECT_EQ(c->index_n_heads, 64);
  EXPECT_FALSE(c->index_rope_interleave);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_EQ(c->num_experts, 256);
  EXPECT_EQ(c->n_group, 8);
  EXPECT_EQ(c->topk_group, 4);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_EQ(c->intermediate_size, 18432);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(c->is_moe_layer(i), i >= 3) << i;
  auto no_lora = parse_model_config(R"({"model_type": "deepseek_v32", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "n_group": 1, "topk_group": 1, "q_lora_rank": null})");
  EXPECT_EQ(no_lora.status().code(), ErrorCode::kInvalidArgument);
}

// GLM-5 with GlmMoeDsaConfig's defaults: the indexer's rope interleaved, 32 heads; mlp_layer_types
// wins over first_k_dense_replace; layers sharing an earlier layer's top-k are refused.
TEST(ModelConfig, ParsesGlmMoeDsaAndRefusesSharedIndexers) {
  const std::string base = R"({"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
      "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4)";
  auto c = parse_model_config(base + "}");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kGlmMoeDsa);
  EXPECT_EQ(c->q_lora_rank, 2048);
  EXPECT_EQ(c->qk_nope_head_dim, 192);
  EXPECT_EQ(c->v_head_dim, 256);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->index_topk, 2048);
  EXPECT_EQ(c->index_n_heads, 32);
  EXPECT_TRUE(c->index_rope_interleave);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->n_group, 1);
  EXPECT_EQ(c->intermediate_size, 12288);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(c->is_moe_layer(i), i >= 3) << i;
  auto typed = parse_model_config(base + R"(, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
      "indexer_types": ["full", "full", "full", "full"]})");
  ASSERT_TRUE(typed.is_ok()) << typed.status().to_string();
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(typed->is_moe_layer(i), i >= 1) << i;
  for (const char* shared : {R"(, "indexer_types": ["full", "shared", "full", "full"]})",
                             R"(, "index_topk_pattern": "FSFF"})", R"(, "index_topk_freq": 2})"}) {
    auto refused = parse_model_config(base + shared);
    EXPECT_EQ(refused.status().code(), ErrorCode::kUnsupported) << shared;
  }
}

// Gemma 4 as a release's config.json says it (no per_layer_config): every sixth layer full (and the
// last), its heads global_head_dim wide, num_global_key_value_heads of them where the keys are the
// values; Gemma4TextConfig's RoPE per layer type; the MoE beside the MLP; softcapping and the
// embedding scale. per_layer_config (what transformers 5.17 writes) wins; per-layer embeddings,
// shared KV layers, bidirectional attention and other activations are refused, not ignored.
TEST(ModelConfig, ParsesGemma4TextWithItsDefaults) {
  const std::string base = R"({"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
      "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 8,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 16, "hidden_size_per_layer_input": 0,
      "enable_moe_block": true, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 32)";
  auto c = parse_model_config(base + R"(, "attention_k_eq_v": true, "global_head_dim": 32,
      "num_global_key_value_heads": 2, "final_logit_softcapping": 30.0})");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->family, ModelFamily::kGemma4Text);
  EXPECT_EQ(c->sliding_window, 512);
  for (int64_t i = 0; i < 8; ++i) {
    const bool full = i == 5 || i == 7;
    EXPECT_EQ(c->is_sliding_layer(i), !full) << i;
    EXPECT_EQ(c->attention_head_dim(i), full ? 32 : 16) << i;
    EXPECT_EQ(c->attention_kv_heads(i), full ? 2 : 4) << i;
    EXPECT_TRUE(c->is_moe_layer(i)) << i;
  }
  EXPECT_TRUE(c->attention_k_eq_v);
  EXPECT_TRUE(c->parallel_moe);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->num_experts_per_tok, 2);
  EXPECT_DOUBLE_EQ(c->final_logit_softcapping, 30.0);
  EXPECT_DOUBLE_EQ(c->embedding_scale, 8.0);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->full_rope.theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c->full_rope.partial_rotary_factor, 0.25);
  EXPECT_TRUE(c->full_rope.proportional);

  // Without attention_k_eq_v the full layers keep the sliding ones' KV head count.
  auto separate_v = parse_model_config(base + R"(, "global_head_dim": 32, "num_global_key_value_heads": 2})");
  ASSERT_TRUE(separate_v.is_ok()) << separate_v.status().to_string();
  EXPECT_EQ(separate_v->attention_kv_heads(7), 4);
  EXPECT_EQ(separate_v->attention_head_dim(7), 32);
  EXPECT_DOUBLE_EQ(separate_v->final_logit_softcapping, 0.0);

  auto listed = parse_model_config(base + R"(, "layer_types": ["sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention",
      "sliding_attention"], "per_layer_config": {"1": {"head_dim": 64}, "3": {"head_dim": 64,
      "num_key_value_heads": 1}}, "rope_parameters": {"sliding_attention": {"rope_type": "default",
      "rope_theta": 5000.0}, "full_attention": {"rope_type": "default", "rope_theta": 20000.0}}})");
  ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
  EXPECT_EQ(listed->attention_head_dim(1), 64);
  EXPECT_EQ(listed->attention_kv_heads(1), 4);
  EXPECT_EQ(listed->attention_kv_heads(3), 1);
  EXPECT_EQ(listed->attention_head_dim(6), 16);  // not in per_layer_config: the common shape
  EXPECT_FALSE(listed->is_sliding_layer(7));     // the last layer is always full
  EXPECT_DOUBLE_EQ(listed->rope_theta, 5000.0);
  EXPECT_DOUBLE_EQ(listed->full_rope.theta, 20000.0);
  EXPECT_FALSE(listed->full_rope.proportional);

  for (const char* refused : {R"(, "hidden_size_per_layer_input": 256})", R"(, "num_kv_shared_layers": 2})",
                              R"(, "use_bidirectional_attention": "all"})", R"(, "hidden_activation": "relu"})",
                              R"(, "rope_parameters": {"sliding_attention": {"rope_type": "yarn"}}})"}) {
    auto c2 = parse_model_config(base + refused);
    EXPECT_EQ(c2.status().code(), ErrorCode::kUnsupported) << refused << ": " << c2.status().to_string();
  }
  // Without the key the per-layer embeddings default on (Gemma4TextConfig's 256): refused too.
  std::string no_ple = base;
  const std::string ple_key = R"("hidden_size_per_layer_input": 0,)";
  no_ple.erase(no_ple.find(ple_key), ple_key.size());
  EXPECT_EQ(parse_model_config(no_ple + "}").status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(parse_model_config(base + R"(, "per_layer_config": {"x": {"head_dim": 8}}})").status().code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ft::engine

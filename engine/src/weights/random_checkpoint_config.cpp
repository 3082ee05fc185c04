// config.json and generation_config.json of a RandomCheckpointSpec, in the layout transformers 5.x
// saves for each family (the qwen3_5_moe multimodal wrapper nests the text model in text_config).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "ft/engine/random_checkpoint.h"
#include "weights/random_checkpoint_layout.h"

namespace ft::engine {
namespace {

using nlohmann::json;

double partial_rotary(const RandomCheckpointSpec& s) {
  return s.partial_rotary_factor > 0 ? s.partial_rotary_factor : is_hybrid(s) ? 0.25 : 1.0;
}

std::vector<int32_t> eos_ids(const RandomCheckpointSpec& s) {
  if (!s.eos_token_ids.empty()) return s.eos_token_ids;
  return {int32_t(s.vocab_size - 1)};
}

json eos_json(const RandomCheckpointSpec& s) {
  const std::vector<int32_t> eos = eos_ids(s);
  return eos.size() == 1 ? json(eos[0]) : json(eos);
}

// Mixtral and OLMoE: no dense layers, the experts' width is "intermediate_size", and each has its
// own keys beside the common ones.
void mixtral_or_olmoe_keys(const RandomCheckpointSpec& s, json& c) {
  c.erase("moe_intermediate_size");
  c["intermediate_size"] = s.moe_intermediate_size;
  c["rms_norm_eps"] = 1e-5;
  c["sliding_window"] = nullptr;
  if (s.family == ModelFamily::kMixtral) {
    c.erase("num_experts");
    c.erase("attention_bias");
    c["num_local_experts"] = s.num_experts;
    c["router_jitter_noise"] = 0.0;
  } else {
    c.erase("sliding_window");  // OlmoeConfig has none
    c["norm_topk_prob"] = s.norm_topk_prob;
    c["clip_qkv"] = nullptr;
  }
}

json text_config(const RandomCheckpointSpec& s) {
  const bool all_bias = s.family == ModelFamily::kQwen3Moe || s.family == ModelFamily::kOlmoe;
  json c = {
      {"vocab_size", s.vocab_size},
      {"hidden_size", s.hidden_size},
      {"num_hidden_layers", s.num_layers},
      {"num_attention_heads", s.num_heads},
      {"num_key_value_heads", s.num_kv_heads},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", s.max_position_embeddings},
      {"initializer_range", 0.02},
      {"rms_norm_eps", 1e-6},
      {"attention_bias", s.attention_bias && all_bias},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", s.tie_word_embeddings},
      {"num_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"bos_token_id", s.bos_token_id},
      {"eos_token_id", eos_json(s)},
      {"dtype", "bfloat16"},
  };
  json rope = {{"rope_type", "default"}, {"rope_theta", s.rope_theta}};
  if (s.family == ModelFamily::kMixtral || s.family == ModelFamily::kOlmoe) {
    mixtral_or_olmoe_keys(s, c);
    c["rope_parameters"] = rope;
    return c;
  }
  if (s.family != ModelFamily::kQwen3_5Moe) {
    c["intermediate_size"] = s.intermediate_size;
    c["decoder_sparse_step"] = s.decoder_sparse_step;
    c["mlp_only_layers"] = s.mlp_only_layers;
    c["norm_topk_prob"] = s.norm_topk_prob;
  }
  if (s.family == ModelFamily::kQwen2Moe) {
    c.erase("attention_bias");
    c["qkv_bias"] = true;  // every Qwen2-MoE release has q/k/v biases
    c["shared_expert_intermediate_size"] = s.shared_expert_intermediate_size;
    c["layer_types"] = std::vector<std::string>(std::size_t(s.num_layers), "full_attention");
  }
  if (!is_hybrid(s)) {
    c["use_sliding_window"] = false;
    c["sliding_window"] = nullptr;
  } else {
    rope["partial_rotary_factor"] = partial_rotary(s);
    c["shared_expert_intermediate_size"] = s.shared_expert_intermediate_size;
    c["linear_conv_kernel_dim"] = s.linear_conv_kernel_dim;
    c["linear_key_head_dim"] = s.linear_key_head_dim;
    c["linear_value_head_dim"] = s.linear_value_head_dim;
    c["linear_num_key_heads"] = s.linear_num_key_heads;
    c["linear_num_value_heads"] = s.linear_num_value_heads;
    json types = json::array();
    for (int64_t i = 0; i < s.num_layers; ++i) types.push_back(is_linear_layer(s, i) ? "linear_attention" : "full_attention");
    c["layer_types"] = types;
    c["full_attention_interval"] = s.full_attention_interval;
  }
  if (s.family == ModelFamily::kQwen3_5Moe) {
    // mRoPE sections over the rotary half (text-only input makes them irrelevant, but real
    // checkpoints carry them).
    const int64_t half = int64_t(double(s.head_dim) * partial_rotary(s)) / 2;
    json section = s.mrope_section;
    if (s.mrope_section.empty()) section = {half - 2 * (half / 3), half / 3, half / 3};
    rope["mrope_section"] = section;
    rope["mrope_interleaved"] = true;
    c["model_type"] = "qwen3_5_moe_text";
  }
  c["rope_parameters"] = rope;
  return c;
}

json rope_json(const RandomCheckpointSpec& s, double partial) {
  json rope = {{"rope_type", "default"}, {"rope_theta", s.rope_theta}};
  if (partial != 1.0) rope["partial_rotary_factor"] = partial;
  if (s.yarn_factor > 0) {
    rope["rope_type"] = "yarn";
    rope["factor"] = s.yarn_factor;
    rope["original_max_position_embeddings"] = s.yarn_original_max_position_embeddings;
    rope["beta_fast"] = 32.0;
    rope["beta_slow"] = 1.0;
    if (s.yarn_mscale > 0) rope["mscale"] = s.yarn_mscale;
    if (s.yarn_mscale_all_dim > 0) rope["mscale_all_dim"] = s.yarn_mscale_all_dim;
  }
  return rope;
}

// deepseek_v3, glm4_moe, dots1 and glm4_moe_lite, as DeepseekV3Config / Glm4MoeConfig / Dots1Config /
// Glm4MoeLiteConfig save them.
json sigmoid_moe_config(const RandomCheckpointSpec& s) {
  const bool deepseek = s.family == ModelFamily::kDeepseekV3, dots1 = s.family == ModelFamily::kDots1;
  const bool lite = s.family == ModelFamily::kGlm4MoeLite;
  json c = {
      {"architectures",
       {deepseek ? "DeepseekV3ForCausalLM"
        : dots1  ? "Dots1ForCausalLM"
        : lite   ? "Glm4MoeLiteForCausalLM"
                 : "Glm4MoeForCausalLM"}},
      {"model_type", model_family_name(s.family)},
      {"vocab_size", s.vocab_size},
      {"hidden_size", s.hidden_size},
      {"intermediate_size", s.intermediate_size},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"num_hidden_layers", s.num_layers},
      {"num_attention_heads", s.num_heads},
      {"num_key_value_heads", deepseek || lite ? s.num_heads : s.num_kv_heads},
      {"n_shared_experts", s.n_shared_experts},
      {"n_routed_experts", s.num_experts},
      {"routed_scaling_factor", s.routed_scaling_factor},
      {"n_group", s.n_group},
      {"topk_group", s.topk_group},
      {"num_experts_per_tok", s.top_k},
      {"first_k_dense_replace", s.first_k_dense_replace},
      {"norm_topk_prob", s.norm_topk_prob},
      {"hidden_act", "silu"},
      {"max_position_embeddings", s.max_position_embeddings},
      {"initializer_range", 0.02},
      {"rms_norm_eps", s.family == ModelFamily::kGlm4Moe || lite ? 1e-5 : 1e-6},
      {"attention_bias", s.attention_bias},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", s.tie_word_embeddings},
      {"bos_token_id", s.bos_token_id},
      {"eos_token_id", eos_json(s)},
      {"dtype", "bfloat16"},
  };
  if (lite) {  // Glm4MoeLiteConfig: each layer's MLP named, first_k_dense_replace unknown to it
    c.erase("first_k_dense_replace");
    std::vector<std::string> types;
    for (int64_t i = 0; i < s.num_layers; ++i) types.push_back(i < s.first_k_dense_replace ? "dense" : "sparse");
    c["mlp_layer_types"] = types;
  }
  if (deepseek || lite) {
    c["q_lora_rank"] = s.q_lora_rank > 0 ? json(s.q_lora_rank) : json(nullptr);
    c["kv_lora_rank"] = s.kv_lora_rank;
    c["qk_nope_head_dim"] = s.qk_nope_head_dim;
    c["qk_rope_head_dim"] = s.qk_rope_head_dim;
    c["v_head_dim"] = s.v_head_dim;
    if (deepseek) c["head_dim"] = s.qk_rope_head_dim;  // DeepseekV3Config sets head_dim to the rope dims
    c["rope_interleave"] = s.rope_interleave;
    c["rope_parameters"] = rope_json(s, 1.0);
  } else if (dots1) {
    c["head_dim"] = s.head_dim;
    c["sliding_window"] = nullptr;
    c["max_window_layers"] = s.num_layers;
    c["layer_types"] = std::vector<std::string>(std::size_t(s.num_layers), "full_attention");
    c["rope_parameters"] = rope_json(s, 1.0);
  } else {
    c["head_dim"] = s.head_dim;
    c["use_qk_norm"] = s.use_qk_norm;
    c["rope_parameters"] = rope_json(s, s.partial_rotary_factor > 0 ? s.partial_rotary_factor : 0.5);
  }
  return c;
}

// The keys every family's config class saves alike: the trunk's sizes, the stop tokens, the dtype.
json trunk_keys(const RandomCheckpointSpec& s, const char* architecture, const char* model_type, double eps) {
  return {
      {"architectures", {architecture}},
      {"model_type", model_type},
      {"vocab_size", s.vocab_size},
      {"hidden_size", s.hidden_size},
      {"num_hidden_layers", s.num_layers},
      {"num_attention_heads", s.num_heads},
      {"num_key_value_heads", s.num_kv_heads},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", s.max_position_embeddings},
      {"initializer_range", 0.02},
      {"rms_norm_eps", eps},
      {"tie_word_embeddings", s.tie_word_embeddings},
      {"bos_token_id", s.bos_token_id},
      {"eos_token_id", eos_json(s)},
      {"dtype", "bfloat16"},
  };
}

// ernie4_5_moe, as Ernie4_5_MoeConfig saves it (its MoE keys under their own names).
json ernie4_5_moe_config(const RandomCheckpointSpec& s) {
  json c = trunk_keys(s, "Ernie4_5_MoeForCausalLM", "ernie4_5_moe", 1e-5);
  c.update({
      {"intermediate_size", s.intermediate_size},
      {"use_bias", false},
      {"rope_parameters", rope_json(s, 1.0)},
      {"moe_num_experts", s.num_experts},
      {"moe_k", s.top_k},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"moe_num_shared_experts", s.n_shared_experts},
      {"moe_layer_start_index", s.first_k_dense_replace},
      {"moe_layer_end_index", s.moe_layer_end_index},
      {"moe_layer_interval", s.decoder_sparse_step},
      {"moe_norm_min", 1e-12},
  });
  return c;
}

// minimax_m2, as MiniMaxM2Config saves it (the experts' width is intermediate_size).
json minimax_m2_config(const RandomCheckpointSpec& s) {
  json c = trunk_keys(s, "MiniMaxM2ForCausalLM", "minimax_m2", 1e-6);
  c.update({
      {"intermediate_size", s.moe_intermediate_size},
      {"rope_parameters", rope_json(s, s.partial_rotary_factor > 0 ? s.partial_rotary_factor : 1.0)},
      {"num_local_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"router_jitter_noise", 0.0},
  });
  return c;
}

// hunyuan_v1_moe, as HunYuanMoEV1Config saves it (experts and shared MLP intermediate_size wide).
json hunyuan_v1_moe_config(const RandomCheckpointSpec& s) {
  json c = trunk_keys(s, "HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe", 1e-5);
  c.update({
      {"intermediate_size", s.moe_intermediate_size},
      {"attention_bias", s.attention_bias},
      {"attention_dropout", 0.0},
      {"rope_parameters", rope_json(s, 1.0)},
      {"num_experts", s.num_experts},
      {"moe_topk", s.top_k},
      {"eod_token_id", 3},
      {"sep_token_id", 4},
  });
  return c;
}

// gpt_oss, as GptOssConfig saves it: every layer sparse with experts intermediate_size wide,
// sliding and full attention layers alternating, YaRN (not truncated) when the spec asks for it.
json gpt_oss_config(const RandomCheckpointSpec& s) {
  json rope = rope_json(s, 1.0);
  if (s.yarn_factor > 0) rope["truncate"] = false;
  json layer_types = json::array();
  for (int64_t i = 0; i < s.num_layers; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  json c = trunk_keys(s, "GptOssForCausalLM", "gpt_oss", 1e-5);
  c.update({
      {"intermediate_size", s.moe_intermediate_size},
      {"attention_bias", true},
      {"rope_parameters", rope},
      {"num_local_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"sliding_window", s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr)},
      {"layer_types", layer_types},
      {"router_aux_loss_coef", 0.001},
  });
  return c;
}

// exaone_moe, as ExaoneMoeConfig saves it, its layer types left to sliding_window_pattern (a
// global layer every second one; none slide without a window).
json exaone_moe_config(const RandomCheckpointSpec& s) {
  json c = trunk_keys(s, "ExaoneMoeForCausalLM", "exaone_moe", 1e-5);
  c.update({
      {"intermediate_size", s.intermediate_size},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"rope_parameters", rope_json(s, 1.0)},
      {"num_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"num_shared_experts", s.n_shared_experts},
      {"n_group", s.n_group},
      {"topk_group", s.topk_group},
      {"routed_scaling_factor", s.routed_scaling_factor},
      {"norm_topk_prob", s.norm_topk_prob},
      {"first_k_dense_replace", s.first_k_dense_replace},
      {"sliding_window", s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr)},
      {"sliding_window_pattern", 2},
  });
  return c;
}

// afmoe, as AfmoeConfig saves it: a global layer every second one.
json afmoe_config(const RandomCheckpointSpec& s) {
  json c = trunk_keys(s, "AfmoeForCausalLM", "afmoe", 1e-5);
  c.update({
      {"intermediate_size", s.intermediate_size},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"rope_parameters", rope_json(s, 1.0)},
      {"num_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"num_shared_experts", s.n_shared_experts},
      {"route_scale", s.routed_scaling_factor},
      {"num_dense_layers", s.first_k_dense_replace},
      {"global_attn_every_n_layers", 2},
      {"sliding_window", s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr)},
      {"mup_enabled", false},
  });
  return c;
}

// llama4_text, as Llama4TextConfig saves it: every full_attention_interval-th layer NoPE, the others
// chunked with RoPE; the MoE layers listed.
json llama4_text_config(const RandomCheckpointSpec& s) {
  json c = trunk_keys(s, "Llama4ForCausalLM", "llama4_text", 1e-5);
  std::vector<int64_t> moe, no_rope;
  std::vector<std::string> types;
  for (int64_t i = 0; i < s.num_layers; ++i) {
    if (std::find(s.mlp_only_layers.begin(), s.mlp_only_layers.end(), i) == s.mlp_only_layers.end()) moe.push_back(i);
    const bool rope = (i + 1) % s.full_attention_interval != 0;
    no_rope.push_back(rope ? 1 : 0);
    types.push_back(rope ? "chunked_attention" : "full_attention");
  }
  c.update({
      {"intermediate_size", s.moe_intermediate_size},
      {"intermediate_size_mlp", s.intermediate_size},
      {"rope_parameters", rope_json(s, 1.0)},
      {"num_local_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"moe_layers", moe},
      {"no_rope_layers", no_rope},
      {"layer_types", types},
      {"attention_chunk_size", s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr)},
      {"attn_temperature_tuning", true},
      {"floor_scale", s.floor_scale},
      {"attn_scale", s.attn_scale},
      {"use_qk_norm", true},
      {"attention_bias", false},
  });
  return c;
}

// gemma4_text, as Gemma4TextConfig saves it (its full layers' shapes in per_layer_config).
json gemma4_text_config(const RandomCheckpointSpec& s) {
  json c = trunk_keys(s, "Gemma4ForCausalLM", "gemma4_text", 1e-6);
  c.erase("hidden_act");
  std::vector<std::string> types;
  json per_layer = json::object();
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const bool full = is_gemma4_full_layer(s, i);
    types.push_back(full ? "full_attention" : "sliding_attention");
    if (!full) continue;
    json o = {{"head_dim", s.global_head_dim}};
    if (s.attention_k_eq_v) o["num_key_value_heads"] = s.global_kv_heads;
    per_layer[std::to_string(i)] = o;
  }
  c.update({
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"intermediate_size", s.intermediate_size},
      {"layer_types", types},
      {"per_layer_config", per_layer},
      // Gemma4TextConfig's default window where the spec sets none (Gemma 4 always slides).
      {"sliding_window", s.sliding_window > 0 ? s.sliding_window : int64_t(512)},
      {"attention_k_eq_v", s.attention_k_eq_v},
      {"attention_bias", false},
      {"enable_moe_block", s.num_experts > 0},
      {"num_experts", s.num_experts},
      {"top_k_experts", s.top_k},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"final_logit_softcapping", s.final_logit_softcapping > 0 ? json(s.final_logit_softcapping) : json(nullptr)},
      {"hidden_size_per_layer_input", 0},
      {"num_kv_shared_layers", 0},
      {"use_bidirectional_attention", nullptr},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", s.rope_theta}}},
        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}}}},
  });
  return c;
}

// deepseek_v32 and glm_moe_dsa, as DeepseekV32Config / GlmMoeDsaConfig save them: deepseek_v3's
// keys less rope_interleave (their attention always interleaves), with mlp_layer_types, every
// layer a "deepseek_sparse_attention" one, and the indexer's sizes.
json dsa_config(const RandomCheckpointSpec& s) {
  RandomCheckpointSpec base = s;
  base.family = ModelFamily::kDeepseekV3;
  json c = sigmoid_moe_config(base);
  const bool glm5 = s.family == ModelFamily::kGlmMoeDsa;
  c["architectures"] = {glm5 ? "GlmMoeDsaForCausalLM" : "DeepseekV32ForCausalLM"};
  c["model_type"] = model_family_name(s.family);
  c.erase("rope_interleave");
  std::vector<std::string> types;
  for (int64_t i = 0; i < s.num_layers; ++i) types.push_back(i < s.first_k_dense_replace ? "dense" : "sparse");
  c["mlp_layer_types"] = types;
  c["layer_types"] = std::vector<std::string>(std::size_t(s.num_layers), "deepseek_sparse_attention");
  c["index_topk"] = s.index_topk;
  c["index_head_dim"] = s.index_head_dim;
  c["index_n_heads"] = s.index_n_heads;
  if (glm5) {
    c["rms_norm_eps"] = 1e-5;
    c["indexer_types"] = std::vector<std::string>(std::size_t(s.num_layers), "full");
  }
  return c;
}

// deepseek_v4, as DeepseekV4Config (transformers 5.17) saves it: layer_types and compress_rates,
// mlp_layer_types, the two ropes as rope_parameters {main, compress}.
json deepseek_v4_config(const RandomCheckpointSpec& s) {
  const double partial = v4_partial_rotary(s);
  std::vector<std::string> layers, routers;
  for (int64_t i = 0; i < s.num_layers; ++i) {
    layers.push_back(v4_layer_type(s, i));
    routers.push_back(i < s.v4_hash_layers ? "hash_moe" : "moe");
  }
  json compress = {{"rope_type", "default"}, {"rope_theta", 160000.0}, {"partial_rotary_factor", partial}};
  if (s.yarn_factor > 0) {
    compress["rope_type"] = "yarn";
    compress["factor"] = s.yarn_factor;
    compress["original_max_position_embeddings"] = s.yarn_original_max_position_embeddings;
    compress["beta_fast"] = 32.0;
    compress["beta_slow"] = 1.0;
    compress["attention_factor"] = 1.0;
  }
  return {
      {"architectures", {"DeepseekV4ForCausalLM"}},
      {"model_type", "deepseek_v4"},
      {"vocab_size", s.vocab_size},
      {"hidden_size", s.hidden_size},
      {"num_hidden_layers", s.num_layers},
      {"num_attention_heads", s.num_heads},
      {"num_key_value_heads", 1},
      {"head_dim", s.head_dim},
      {"q_lora_rank", v4_q_lora_rank(s)},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"n_routed_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"n_shared_experts", 1},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", s.routed_scaling_factor},
      {"scoring_func", s.scoring_func},
      {"swiglu_limit", s.swiglu_limit},
      {"o_groups", s.o_groups},
      {"o_lora_rank", s.o_lora_rank},
      {"index_n_heads", s.index_n_heads},
      {"index_head_dim", s.index_head_dim},
      {"index_topk", s.index_topk},
      {"sliding_window", v4_sliding_window(s)},
      {"layer_types", layers},
      {"compress_rates",
       {{"compressed_sparse_attention", s.v4_csa_rate}, {"heavily_compressed_attention", s.v4_hca_rate}}},
      {"mlp_layer_types", routers},
      {"partial_rotary_factor", partial},
      {"rope_theta", 10000.0},
      {"compress_rope_theta", 160000.0},
      {"rope_parameters",
       {{"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", partial}}},
        {"compress", compress}}},
      {"hc_mult", s.hc_mult},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"rms_norm_eps", 1e-6},
      {"hidden_act", "silu"},
      {"mlp_bias", false},
      {"attention_bias", false},
      {"max_position_embeddings", s.max_position_embeddings},
      {"num_nextn_predict_layers", 0},
      {"tie_word_embeddings", false},
      {"bos_token_id", s.bos_token_id},
      {"eos_token_id", eos_json(s)},
      {"dtype", "bfloat16"},
  };
}

}  // namespace

std::string random_checkpoint_config_json(const RandomCheckpointSpec& s,
                                          const std::vector<std::pair<std::string, std::string>>& notes) {
  json text = text_config(s);
  json c;
  switch (s.family) {
    case ModelFamily::kQwen3Moe:
      c = text;
      c["architectures"] = {"Qwen3MoeForCausalLM"};
      c["model_type"] = "qwen3_moe";
      break;
    case ModelFamily::kQwen3Next:
      c = text;
      c["architectures"] = {"Qwen3NextForCausalLM"};
      c["model_type"] = "qwen3_next";
      break;
    case ModelFamily::kMixtral:
    case ModelFamily::kQwen2Moe:
    case ModelFamily::kOlmoe:
      c = text;
      c["architectures"] = {s.family == ModelFamily::kMixtral    ? "MixtralForCausalLM"
                            : s.family == ModelFamily::kQwen2Moe ? "Qwen2MoeForCausalLM"
                                                                 : "OlmoeForCausalLM"};
      c["model_type"] = model_family_name(s.family);
      break;
    case ModelFamily::kDeepseekV3:
    case ModelFamily::kGlm4Moe:
    case ModelFamily::kDots1:
    case ModelFamily::kGlm4MoeLite:
      c = sigmoid_moe_config(s);
      break;
    case ModelFamily::kErnie4_5Moe:
      c = ernie4_5_moe_config(s);
      break;
    case ModelFamily::kMinimaxM2:
      c = minimax_m2_config(s);
      break;
    case ModelFamily::kGptOss:
      c = gpt_oss_config(s);
      break;
    case ModelFamily::kHunyuanV1Moe:
      c = hunyuan_v1_moe_config(s);
      break;
    case ModelFamily::kExaoneMoe:
      c = exaone_moe_config(s);
      break;
    case ModelFamily::kAfmoe:
      c = afmoe_config(s);
      break;
    case ModelFamily::kLlama4Text:
      c = llama4_text_config(s);
      break;
    case ModelFamily::kDeepseekV32:
    case ModelFamily::kGlmMoeDsa:
      c = dsa_config(s);
      break;
    case ModelFamily::kGemma4Text:
      c = gemma4_text_config(s);
      break;
    case ModelFamily::kDeepseekV4:
      c = deepseek_v4_config(s);
      break;
    case ModelFamily::kQwen3_5Moe:
      // The multimodal wrapper: the text model nested, a (small) vision config beside it. The
      // vision tower's weights are not written: this engine serves text only.
      c = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
           {"model_type", "qwen3_5_moe"},
           {"text_config", text},
           {"vision_config",
            {{"model_type", "qwen3_5_moe_vision"}, {"depth", 1}, {"hidden_size", 64}, {"intermediate_size", 128},
             {"num_heads", 2}, {"out_hidden_size", s.hidden_size}}},
           {"tie_word_embeddings", s.tie_word_embeddings},
           {"dtype", "bfloat16"}};
      break;
  }
  c["transformers_version"] = "5.0.0";
  if (s.demo) {
    c["freetoken_demo"] =
        "DEMO MODEL WITH RANDOM WEIGHTS written by `freetoken make-demo-model`: it has the shapes and tensor "
        "layout of a real checkpoint but produces meaningless text.";
  }
  for (const auto& [key, text_value] : notes) c[key] = text_value;
  return c.dump(2) + "\n";
}

std::string random_checkpoint_generation_config_json(const RandomCheckpointSpec& s) {
  const json gen = {{"bos_token_id", s.bos_token_id},
                    {"eos_token_id", eos_json(s)},
                    {"do_sample", false},
                    {"transformers_version", "5.0.0"}};
  return gen.dump(2) + "\n";
}

}  // namespace ft::engine

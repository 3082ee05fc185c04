// Typed reads of config.json fields for the config parser (model_config.cpp and the per-family
// parts beside it). Internal to engine/src/models.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ft/common/result.h"

namespace ft::engine::config {

// Typed lookups that name the key in their error, so a bad config.json is fixable from the message.
class Fields {
 public:
  using json = nlohmann::json;

  explicit Fields(const json& j) : j_(j) {}
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  // The key is there with the value null (a config saying "none", e.g. q_lora_rank).
  bool has_null(const char* key) const { return j_.contains(key) && j_.at(key).is_null(); }

  Result<int64_t> integer(const char* key) const {
    if (!has(key)) return invalid_argument(std::string("config.json: missing required field '") + key + "'");
    return integer_or(key, 0);
  }
  Result<int64_t> integer_or(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return type_error(key, "an integer");
    return v.get<int64_t>();
  }
  Result<double> number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number()) return type_error(key, "a number");
    return v.get<double>();
  }
  Result<bool> boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) return type_error(key, "true or false");
    return v.get<bool>();
  }
  Result<std::string> string_or(const char* key, std::string fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_string()) return type_error(key, "a string");
    return v.get<std::string>();
  }
  Result<std::vector<int64_t>> int_list_or_empty(const char* key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const json& v = j_.at(key);
    if (v.is_number_integer()) return std::vector<int64_t>{v.get<int64_t>()};
    if (!v.is_array()) return type_error(key, "an integer or a list of integers");
    for (const json& e : v) {
      if (!e.is_number_integer()) return type_error(key, "a list of integers");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  Result<std::vector<std::string>> string_list_or_empty(const char* key) const {
    std::vector<std::string> out;
    if (!has(key)) return out;
    const json& v = j_.at(key);
    if (!v.is_array()) return type_error(key, "a list of strings");
    for (const json& e : v) {
      if (!e.is_string()) return type_error(key, "a list of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  const json* object(const char* key) const { return has(key) && j_.at(key).is_object() ? &j_.at(key) : nullptr; }

 private:
  static Status type_error(const char* key, const char* what) {
    return invalid_argument(std::string("config.json: field '") + key + "' must be " + what);
  }
  const json& j_;
};

// Ok when v > 0, else "config.json: NAME must be positive, got V".
inline Status require_positive(int64_t v, const char* name) {
  if (v > 0) return Status::ok();
  return invalid_argument(std::string("config.json: ") + name + " must be positive, got " + std::to_string(v));
}

}  // namespace ft::engine::config

namespace ft::engine {
struct ModelConfig;
enum class ModelFamily;
}  // namespace ft::engine

namespace ft::engine::config {

// config_sigmoid_moe.cpp: the parts of config.json only the DeepSeek-V3-style families have.
// The router and shared experts of deepseek_v3, glm4_moe, dots1 and glm4_moe_lite (n_routed_experts,
// n_group, topk_group, routed_scaling_factor, n_shared_experts, first_k_dense_replace or
// glm4_moe_lite's mlp_layer_types), refusing the DeepSeek-V2 routers (scoring_func, topk_method),
// MoE layer strides and dots1's sliding layers.
Status parse_sigmoid_moe(const Fields& text, ModelConfig& cfg);
// mlp_layer_types (glm4_moe_lite, exaone_moe): each layer "dense" or "sparse"; the dense ones go to
// mlp_only_layers, and first_k_dense_replace no longer counts.
Status parse_mlp_layer_types(const Fields& text, ModelConfig& cfg);
// deepseek_v3's and glm4_moe_lite's multi-head latent attention dims (q_lora_rank, kv_lora_rank, qk_nope_head_dim,
// qk_rope_head_dim, v_head_dim, rope_interleave); sets head_dim and num_key_value_heads to what the
// KV pages hold per head.
Status parse_mla(const Fields& text, ModelConfig& cfg);
// config_ernie4_5_moe.cpp: ernie4_5_moe's MoE keys (moe_num_experts / num_experts, moe_k /
// num_experts_per_tok, moe_intermediate_size, moe_num_shared_experts, moe_layer_start_index,
// moe_layer_end_index, moe_layer_interval), its interleaved RoPE, refusing use_bias.
Status parse_ernie4_5_moe(const Fields& text, ModelConfig& cfg);
// config_minimax_m2.cpp: minimax_m2's experts (num_local_experts / num_experts, intermediate_size
// wide) behind a sigmoid router with a correction bias; no biases on the attention.
Status parse_minimax_m2(const Fields& text, ModelConfig& cfg);
// gpt_oss: experts (num_local_experts, intermediate_size wide), sliding_window.
Status parse_gpt_oss(const Fields& text, ModelConfig& cfg);
// exaone_moe: the DeepSeek-V3-style router under its own keys (num_experts, num_shared_experts),
// dense layers from mlp_layer_types or first_k_dense_replace, sliding_window.
Status parse_exaone_moe(const Fields& text, ModelConfig& cfg);
// config_hunyuan_v1_moe.cpp: hunyuan_v1_moe's experts (num_experts, moe_topk: one for every layer)
// intermediate_size wide, its shared MLP of the same width, the softmax router that always
// renormalises.
Status parse_hunyuan_v1_moe(const Fields& text, ModelConfig& cfg);
// config_afmoe.cpp: afmoe's experts (num_experts, num_shared_experts) behind a sigmoid router with
// expert_bias and route_scale, num_dense_layers, sliding_window; refuses mup_enabled.
Status parse_afmoe(const Fields& text, ModelConfig& cfg);
// config_llama4.cpp: llama4_text's experts (num_local_experts, top-1 only, intermediate_size wide,
// a shared expert as wide), dense layers intermediate_size_mlp wide, moe_layers, no_rope_layers,
// the chunked layers, the attention temperature, use_qk_norm, interleaved RoPE pairs.
Status parse_llama4_text(const Fields& text, ModelConfig& cfg);
// Hunyuan's "dynamic" RoPE with an NTK alpha: a larger base, theta * alpha^(d / (d - 2)).
Status hunyuan_alpha_rope(const Fields& rope_dict, ModelConfig& cfg, std::string& rope_type);
// MiniMax-M2's partial RoPE when the config gives no partial_rotary_factor: rotary_dim / head_dim.
Result<double> minimax_partial_rotary(const Fields& text, const ModelConfig& cfg);
// config_dsa.cpp: deepseek_v32 and glm_moe_dsa, DeepSeek-V3's latent attention with the DSA
// lightning indexer (index_topk, index_head_dim, index_n_heads); refuses glm_moe_dsa's "shared"
// indexer layers (indexer_types, index_topk_pattern, index_topk_freq).
bool is_dsa_family(ModelFamily family);
Status parse_dsa(const nlohmann::json& text_json, const Fields& text, ModelConfig& cfg);
// config_gemma4.cpp: gemma4_text's RoPE, one dict per layer type (sliding: default; full: default or
// proportional).
Status parse_gemma4_rope(const Fields& text, ModelConfig& cfg);
// gemma4_text's attention shapes (per_layer_config, or global_head_dim and
// num_global_key_value_heads), attention_k_eq_v, sliding_window, the MoE beside the MLP
// (enable_moe_block, num_experts, top_k_experts, moe_intermediate_size), softcapping and embedding
// scale; refuses per-layer embeddings, shared KV layers and bidirectional attention.
Status parse_gemma4_text(const Fields& text, ModelConfig& cfg);
// config_deepseek_v4.cpp: deepseek_v4's fields (ModelConfig::DeepseekV4 and the common ones it
// shares) as saved (layer_types, compress_rates, mlp_layer_types, rope_parameters {main, compress})
// or under the published DeepSeek-V4-Flash keys (compress_ratios, compress_rate_csa / _hca,
// num_hash_layers, qk_rope_head_dim, rope_scaling with compress_rope_theta), with
// DeepseekV4Config's defaults; refuses router scores other than sqrtsoftplus and sigmoid.
Status parse_deepseek_v4(const Fields& text, ModelConfig& cfg);

}  // namespace ft::engine::config

// config.json fields of the DeepSeek-V3-style families (deepseek_v3, glm4_moe, dots1, glm4_moe_lite,
// deepseek_v32, glm_moe_dsa), with the defaults of DeepseekV3Config, Glm4MoeConfig, Dots1Config,
// Glm4MoeLiteConfig, DeepseekV32Config and GlmMoeDsaConfig (transformers 5.x).
#include <algorithm>

#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

namespace {

// What DeepseekV3Config, Glm4MoeConfig, Dots1Config and Glm4MoeLiteConfig default differently; -1: no default (HF's
// is None, which its MoE cannot build with: the key is required).
struct SigmoidMoeDefaults {
  int64_t experts, top_k, moe_inter, n_group, topk_group, first_k_dense, shared;
  double scaling;
};

SigmoidMoeDefaults defaults_of(ModelFamily f) {
  switch (f) {
    case ModelFamily::kDeepseekV3:
      return {256, 8, 2048, 8, 4, 3, 1, 2.5};
    case ModelFamily::kDots1:
      return {-1, -1, 1408, 1, 1, 0, -1, 1.0};
    case ModelFamily::kGlm4MoeLite:  // its dense layers come from mlp_layer_types instead
      return {64, 4, 1536, 1, 1, 0, 1, 1.8};
    case ModelFamily::kDeepseekV32:
      return {256, 8, 2048, 8, 4, 3, 1, 2.5};
    case ModelFamily::kGlmMoeDsa:
      return {256, 8, 2048, 1, 1, 3, 1, 2.5};
    default:
      return {128, 8, 1408, 1, 1, 1, 1, 1.0};  // glm4_moe
  }
}

Result<int64_t> integer_with(const Fields& text, const char* key, int64_t fallback) {
  return fallback < 0 ? text.integer(key) : text.integer_or(key, fallback);
}

// Dots1Config derives layer_types when absent: sliding_attention from max_window_layers on, when a
// sliding_window is set. Only full attention runs here.
Status refuse_dots1_sliding_layers(const Fields& text, const ModelConfig& cfg) {
  if (text.has("layer_types")) return Status::ok();  // parse_layers refuses sliding_attention
  FT_ASSIGN_OR_RETURN(const int64_t window_from, text.integer_or("max_window_layers", 62));
  if (text.has("sliding_window") && window_from < cfg.num_hidden_layers) {
    return unsupported("sliding-window attention (sliding_window with max_window_layers " +
                       std::to_string(window_from) + " < num_hidden_layers) is not supported yet");
  }
  return Status::ok();
}

// Glm4MoeLiteConfig: mlp_layer_types names each layer "dense" or "sparse" (default: the first
// dense, the rest sparse); HF reads nothing else, first_k_dense_replace included, so neither do we.
Status parse_glm4_moe_lite_layers(const Fields& text, ModelConfig& cfg) {
  if (text.has("mlp_layer_types")) return parse_mlp_layer_types(text, cfg);
  cfg.first_k_dense_replace = 0;
  cfg.mlp_only_layers = {0};
  return Status::ok();
}

}  // namespace

Status parse_mlp_layer_types(const Fields& text, ModelConfig& cfg) {
  cfg.first_k_dense_replace = 0;
  cfg.mlp_only_layers.clear();
  FT_ASSIGN_OR_RETURN(const std::vector<std::string> types, text.string_list_or_empty("mlp_layer_types"));
  if (int64_t(types.size()) != cfg.num_hidden_layers) {
    return invalid_argument("config.json: mlp_layer_types must have num_hidden_layers entries");
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] == "dense") {
      cfg.mlp_only_layers.push_back(int64_t(i));
    } else if (types[i] != "sparse") {
      return invalid_argument("config.json: mlp_layer_types entries must be \"dense\" or \"sparse\"");
    }
  }
  return Status::ok();
}

Status parse_sigmoid_moe(const Fields& text, ModelConfig& cfg) {
  const SigmoidMoeDefaults d = defaults_of(cfg.family);
  cfg.sigmoid_router = true;
  // transformers 5.x may save the routed expert count under its attribute_map alias.
  int64_t experts = d.experts;
  if (text.has("num_local_experts")) {
    FT_ASSIGN_OR_RETURN(experts, text.integer("num_local_experts"));
  }
  FT_ASSIGN_OR_RETURN(cfg.num_experts, integer_with(text, "n_routed_experts", experts));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, integer_with(text, "num_experts_per_tok", d.top_k));
  FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer_or("moe_intermediate_size", d.moe_inter));
  FT_ASSIGN_OR_RETURN(cfg.n_group, text.integer_or("n_group", d.n_group));
  FT_ASSIGN_OR_RETURN(cfg.topk_group, text.integer_or("topk_group", d.topk_group));
  FT_ASSIGN_OR_RETURN(cfg.routed_scaling_factor, text.number_or("routed_scaling_factor", d.scaling));
  FT_ASSIGN_OR_RETURN(cfg.first_k_dense_replace, text.integer_or("first_k_dense_replace", d.first_k_dense));
  FT_ASSIGN_OR_RETURN(const int64_t shared, integer_with(text, "n_shared_experts", d.shared));
  if (shared < 0) return invalid_argument("config.json: n_shared_experts must not be negative");
  cfg.shared_expert_intermediate_size = cfg.moe_intermediate_size * shared;
  if (cfg.family == ModelFamily::kDots1) FT_RETURN_IF_ERROR(refuse_dots1_sliding_layers(text, cfg));

  // DeepSeek-V2's routers share these configs' keys; HF's DeepseekV3 code runs only this one.
  FT_ASSIGN_OR_RETURN(const std::string scoring, text.string_or("scoring_func", "sigmoid"));
  if (scoring != "sigmoid") return unsupported("scoring_func '" + scoring + "' is not supported (only 'sigmoid')");
  FT_ASSIGN_OR_RETURN(const std::string method, text.string_or("topk_method", "noaux_tc"));
  if (method != "noaux_tc") return unsupported("topk_method '" + method + "' is not supported (only 'noaux_tc')");
  FT_ASSIGN_OR_RETURN(const int64_t freq, text.integer_or("moe_layer_freq", 1));
  if (freq != 1) return unsupported("moe_layer_freq " + std::to_string(freq) + " is not supported (only 1)");

  if (cfg.n_group <= 0 || cfg.topk_group <= 0 || cfg.topk_group > cfg.n_group) {
    return invalid_argument("config.json: n_group and topk_group must be positive, topk_group <= n_group");
  }
  // HF sums each group's two best scores (topk(2) inside every group).
  if (cfg.num_experts % cfg.n_group != 0 || cfg.num_experts / cfg.n_group < 2) {
    return invalid_argument("config.json: n_routed_experts must split into n_group groups of at least 2 experts");
  }
  if (cfg.first_k_dense_replace < 0) return invalid_argument("config.json: first_k_dense_replace must not be negative");
  if (cfg.family == ModelFamily::kGlm4MoeLite) FT_RETURN_IF_ERROR(parse_glm4_moe_lite_layers(text, cfg));
  // DeepseekV32Config and GlmMoeDsaConfig default to first_k_dense_replace dense layers instead.
  if (is_dsa_family(cfg.family) && text.has("mlp_layer_types")) FT_RETURN_IF_ERROR(parse_mlp_layer_types(text, cfg));
  if (cfg.family == ModelFamily::kGlm4Moe) {
    FT_ASSIGN_OR_RETURN(cfg.use_qk_norm, text.boolean_or("use_qk_norm", false));
  }
  return Status::ok();
}

Status parse_mla(const Fields& text, ModelConfig& cfg) {
  cfg.mla = true;
  // DeepseekV3Config's defaults (DeepseekV32Config's too), or Glm4MoeLiteConfig's (GLM-4.7-Flash),
  // or GlmMoeDsaConfig's (GLM-5).
  const bool lite = cfg.family == ModelFamily::kGlm4MoeLite, glm5 = cfg.family == ModelFamily::kGlmMoeDsa;
  const int64_t q_lora = lite ? 768 : glm5 ? 2048 : 1536;
  FT_ASSIGN_OR_RETURN(cfg.q_lora_rank, text.integer_or("q_lora_rank", q_lora));  // null: a plain q_proj
  if (text.has_null("q_lora_rank")) cfg.q_lora_rank = 0;
  FT_ASSIGN_OR_RETURN(cfg.kv_lora_rank, text.integer_or("kv_lora_rank", 512));
  FT_ASSIGN_OR_RETURN(cfg.qk_nope_head_dim, text.integer_or("qk_nope_head_dim", lite || glm5 ? 192 : 128));
  FT_ASSIGN_OR_RETURN(cfg.qk_rope_head_dim, text.integer_or("qk_rope_head_dim", 64));
  FT_ASSIGN_OR_RETURN(cfg.v_head_dim, text.integer_or("v_head_dim", lite || glm5 ? 256 : 128));
  FT_ASSIGN_OR_RETURN(cfg.rope_interleave, text.boolean_or("rope_interleave", true));
  // DeepseekV32Attention and GlmMoeDsaAttention always rotate interleaved pairs (their configs have
  // no rope_interleave).
  if (is_dsa_family(cfg.family)) cfg.rope_interleave = true;
  if (cfg.q_lora_rank < 0 || cfg.kv_lora_rank <= 0 || cfg.qk_nope_head_dim < 0 || cfg.qk_rope_head_dim <= 0 ||
      cfg.v_head_dim <= 0) {
    return invalid_argument(
        "config.json: kv_lora_rank, qk_rope_head_dim and v_head_dim must be positive, q_lora_rank and "
        "qk_nope_head_dim not negative");
  }
  // The KV pages hold every head's key and value expanded, at one width: values narrower than keys
  // are padded with zeros (and keys narrower than values, and both to a multiple of 32).
  cfg.head_dim = mla_head_width(cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, cfg.v_head_dim);
  // HF repeats kv heads (num_key_value_groups = heads / kv_heads) over MLA's per-head keys: only
  // equal counts make sense.
  if (cfg.num_key_value_heads != cfg.num_attention_heads) {
    return unsupported("num_key_value_heads must equal num_attention_heads for latent attention");
  }
  return Status::ok();
}

}  // namespace ft::engine::config

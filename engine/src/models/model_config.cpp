// config.json -> ModelConfig. Defaults follow the HF 5.x config classes of each family
// (Qwen3MoeConfig, Qwen3NextConfig, Qwen3_5MoeTextConfig, MixtralConfig, Qwen2MoeConfig,
// OlmoeConfig, DeepseekV3Config, Glm4MoeConfig, Dots1Config, Ernie4_5_MoeConfig, MiniMaxM2Config,
// GptOssConfig, Glm4MoeLiteConfig, HunYuanMoEV1Config, ExaoneMoeConfig, AfmoeConfig,
// Llama4TextConfig, DeepseekV32Config, GlmMoeDsaConfig, DeepseekV4Config; the MoE parts of those
// from DeepseekV3Config to GlmMoeDsaConfig in config_sigmoid_moe.cpp (the indexer's in config_dsa.cpp),
// config_ernie4_5_moe.cpp, config_minimax_m2.cpp, config_gpt_oss.cpp, config_hunyuan_v1_moe.cpp,
// config_exaone_moe.cpp, config_afmoe.cpp and config_llama4.cpp; DeepseekV4Config's rope, layers and
// MoE in config_deepseek_v4.cpp), because save_pretrained may omit keys equal to their defaults and
// older checkpoints predate newer keys.
#include "ft/engine/model_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ft/engine/ops_attention.h"
#include "models/config_fields.h"

namespace ft::engine {
namespace {

using config::Fields;
using nlohmann::json;

std::string supported_list() {
  std::string out = "supported:";
  for (ModelFamily f : model_families()) out += std::string(out.back() == ':' ? " " : ", ") + model_family_name(f);
  return out;
}

std::optional<ModelFamily> family_from_model_type(const std::string& t) {
  if (t == "qwen3_5_moe_text") return ModelFamily::kQwen3_5Moe;
  if (t == "kimi_k2") return ModelFamily::kDeepseekV3;  // Kimi K2: DeepSeek-V3's architecture
  if (t == "llama4") return ModelFamily::kLlama4Text;   // the multimodal wrapper: its text_config
  if (t == "gemma4") return ModelFamily::kGemma4Text;   // likewise
  for (ModelFamily f : model_families()) {
    if (t == model_family_name(f)) return f;
  }
  return std::nullopt;
}

std::optional<ModelFamily> family_from_architecture(const std::string& a) {
  if (a == "Qwen3MoeForCausalLM") return ModelFamily::kQwen3Moe;
  if (a == "Qwen3NextForCausalLM") return ModelFamily::kQwen3Next;
  if (a == "Qwen3_5MoeForConditionalGeneration" || a == "Qwen3_5MoeForCausalLM") {
    return ModelFamily::kQwen3_5Moe;
  }
  if (a == "MixtralForCausalLM") return ModelFamily::kMixtral;
  if (a == "Qwen2MoeForCausalLM") return ModelFamily::kQwen2Moe;
  if (a == "OlmoeForCausalLM") return ModelFamily::kOlmoe;
  if (a == "DeepseekV3ForCausalLM") return ModelFamily::kDeepseekV3;  // also Kimi K2's
  if (a == "Glm4MoeForCausalLM") return ModelFamily::kGlm4Moe;
  if (a == "Dots1ForCausalLM") return ModelFamily::kDots1;
  if (a == "Ernie4_5_MoeForCausalLM") return ModelFamily::kErnie4_5Moe;
  if (a == "MiniMaxM2ForCausalLM") return ModelFamily::kMinimaxM2;
  if (a == "GptOssForCausalLM") return ModelFamily::kGptOss;
  if (a == "ExaoneMoeForCausalLM") return ModelFamily::kExaoneMoe;
  if (a == "Glm4MoeLiteForCausalLM") return ModelFamily::kGlm4MoeLite;
  if (a == "HunYuanMoEV1ForCausalLM") return ModelFamily::kHunyuanV1Moe;
  if (a == "AfmoeForCausalLM") return ModelFamily::kAfmoe;
  if (a == "Llama4ForCausalLM" || a == "Llama4ForConditionalGeneration") return ModelFamily::kLlama4Text;
  if (a == "DeepseekV32ForCausalLM") return ModelFamily::kDeepseekV32;
  if (a == "GlmMoeDsaForCausalLM") return ModelFamily::kGlmMoeDsa;
  if (a == "Gemma4ForCausalLM" || a == "Gemma4ForConditionalGeneration") return ModelFamily::kGemma4Text;
  if (a == "DeepseekV4ForCausalLM") return ModelFamily::kDeepseekV4;
  return std::nullopt;
}

// What a family's HF config class defaults differently from the Qwen3 ones.
struct FamilyDefaults {
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool norm_topk_prob = false;
};

FamilyDefaults family_defaults(ModelFamily f) {
  switch (f) {
    case ModelFamily::kQwen3Next:
    case ModelFamily::kQwen3_5Moe: return {10000.0, 1e-6, true};
    case ModelFamily::kMixtral: return {1000000.0, 1e-5, true};  // MixtralConfig.default_theta
    case ModelFamily::kOlmoe: return {10000.0, 1e-5, false};
    case ModelFamily::kDeepseekV3:
      return {10000.0, 1e-6, true};
    case ModelFamily::kGlm4Moe:
      return {10000.0, 1e-5, true};
    case ModelFamily::kDots1:
      return {10000.0, 1e-6, false};
    case ModelFamily::kErnie4_5Moe:
      return {500000.0, 1e-5, true};  // Ernie4_5_MoeConfig.default_theta
    case ModelFamily::kMinimaxM2:
      return {5000000.0, 1e-6, true};  // MiniMaxM2Config.default_theta
    case ModelFamily::kGptOss:
      return {150000.0, 1e-5, true};  // GptOssConfig.default_theta
    case ModelFamily::kExaoneMoe:
    case ModelFamily::kAfmoe:
      return {10000.0, 1e-5, true};
    case ModelFamily::kLlama4Text:
      return {500000.0, 1e-5, true};  // Llama4TextConfig.default_theta
    case ModelFamily::kDeepseekV32:
    case ModelFamily::kGemma4Text:
    case ModelFamily::kDeepseekV4:
      return {10000.0, 1e-6, true};
    case ModelFamily::kGlmMoeDsa:
    case ModelFamily::kGlm4MoeLite:
    case ModelFamily::kHunyuanV1Moe:
      return {10000.0, 1e-5, true};
    case ModelFamily::kQwen3Moe:
    case ModelFamily::kQwen2Moe: break;
  }
  return {};
}

// Glm4MoeLiteConfig's and HunYuanMoEV1Config's max_position_embeddings (YaRN's original context
// falls back to it); the older families' stay 0, not given.
int64_t max_position_default(ModelFamily f) {
  if (f == ModelFamily::kGlm4MoeLite) return 202752;
  if (f == ModelFamily::kHunyuanV1Moe) return 2048;
  if (f == ModelFamily::kDeepseekV32) return 163840;
  if (f == ModelFamily::kGlmMoeDsa) return 202752;
  if (f == ModelFamily::kDeepseekV4) return 1048576;
  return 0;
}

// YaRN's keys of one rope dict (rope_scaling or rope_parameters), over what an earlier one gave.
Status parse_yarn_keys(const Fields& d, ModelConfig::Yarn& y) {
  FT_ASSIGN_OR_RETURN(y.factor, d.number_or("factor", y.factor));
  FT_ASSIGN_OR_RETURN(y.beta_fast, d.number_or("beta_fast", y.beta_fast));
  FT_ASSIGN_OR_RETURN(y.beta_slow, d.number_or("beta_slow", y.beta_slow));
  FT_ASSIGN_OR_RETURN(y.original_max_position_embeddings,
                      d.integer_or("original_max_position_embeddings", y.original_max_position_embeddings));
  FT_ASSIGN_OR_RETURN(y.truncate, d.boolean_or("truncate", y.truncate));
  FT_ASSIGN_OR_RETURN(y.mscale, d.number_or("mscale", y.mscale));
  FT_ASSIGN_OR_RETURN(y.mscale_all_dim, d.number_or("mscale_all_dim", y.mscale_all_dim));
  if (d.has("attention_factor")) {
    FT_ASSIGN_OR_RETURN(y.attention_factor, d.number_or("attention_factor", 1.0));
    y.attention_given = true;
  }
  return Status::ok();
}

// Llama 3's scaling keys of one rope dict (HF _compute_llama3_parameters reads all four).
Status parse_llama3_keys(const Fields& d, ModelConfig::Llama3Rope& l) {
  FT_ASSIGN_OR_RETURN(l.factor, d.number_or("factor", l.factor));
  FT_ASSIGN_OR_RETURN(l.low_freq_factor, d.number_or("low_freq_factor", l.low_freq_factor));
  FT_ASSIGN_OR_RETURN(l.high_freq_factor, d.number_or("high_freq_factor", l.high_freq_factor));
  FT_ASSIGN_OR_RETURN(l.original_max_position_embeddings,
                      d.integer_or("original_max_position_embeddings", l.original_max_position_embeddings));
  return Status::ok();
}

// HF 5.x (standardize_rope_params, _compute_yarn_parameters): the original context defaults to a
// top-level original_max_position_embeddings, else max_position_embeddings; factor is required
// (only a null one is derived from the two lengths); the attention factor, unless given, comes
// from factor, mscale and mscale_all_dim.
Status finish_yarn(const Fields& text, ModelConfig& cfg) {
  ModelConfig::Yarn& y = cfg.yarn;
  FT_ASSIGN_OR_RETURN(const int64_t top_original, text.integer_or("original_max_position_embeddings", 0));
  if (top_original > 0) y.original_max_position_embeddings = top_original;
  if (y.original_max_position_embeddings <= 0) y.original_max_position_embeddings = cfg.max_position_embeddings;
  if (y.original_max_position_embeddings <= 0) {
    return invalid_argument(
        "config.json: rope_type 'yarn' needs original_max_position_embeddings or "
        "max_position_embeddings");
  }
  if (y.factor <= 0 && cfg.max_position_embeddings > 0) {
    y.factor = double(cfg.max_position_embeddings) / double(y.original_max_position_embeddings);
  }
  if (y.factor <= 0) return invalid_argument("config.json: rope_type 'yarn' needs a positive 'factor'");
  if (!y.attention_given) y.attention_factor = ref::yarn_attention_factor(y.factor, y.mscale, y.mscale_all_dim);
  return Status::ok();
}

// RoPE keys: "rope_parameters" (5.x; possibly keyed by layer type) first, then the legacy
// "rope_scaling" dict and top-level "rope_theta" / "partial_rotary_factor".
Status parse_rope(const Fields& text, ModelConfig& cfg, double default_partial) {
  // GptOssConfig's rope_parameters default: YaRN x32 over 4096 positions, not truncated.
  std::string rope_type = "default";
  if (cfg.family == ModelFamily::kGptOss) {
    rope_type = "yarn";
    cfg.yarn.factor = 32.0;
    cfg.yarn.beta_fast = 32.0;
    cfg.yarn.beta_slow = 1.0;
    cfg.yarn.truncate = false;
    cfg.yarn.original_max_position_embeddings = 4096;
  }
  const json* params = text.object("rope_parameters");
  if (params && params->contains("full_attention") && params->at("full_attention").is_object()) {
    params = &params->at("full_attention");
  }
  const json* scaling = text.object("rope_scaling");
  FT_ASSIGN_OR_RETURN(cfg.rope_theta, text.number_or("rope_theta", family_defaults(cfg.family).rope_theta));
  FT_ASSIGN_OR_RETURN(cfg.partial_rotary_factor, text.number_or("partial_rotary_factor", default_partial));
  for (const json* dict : {scaling, params}) {  // later wins: rope_parameters over rope_scaling
    if (!dict) continue;
    Fields d(*dict);
    FT_ASSIGN_OR_RETURN(cfg.rope_theta, d.number_or("rope_theta", cfg.rope_theta));
    FT_ASSIGN_OR_RETURN(cfg.partial_rotary_factor,
                        d.number_or("partial_rotary_factor", cfg.partial_rotary_factor));
    FT_ASSIGN_OR_RETURN(std::string legacy_type, d.string_or("type", rope_type));
    FT_ASSIGN_OR_RETURN(rope_type, d.string_or("rope_type", legacy_type));
    if (d.has("mrope_section")) {
      FT_ASSIGN_OR_RETURN(cfg.mrope_section, d.int_list_or_empty("mrope_section"));
    }
    FT_RETURN_IF_ERROR(parse_yarn_keys(d, cfg.yarn));
  }
  // "mrope" was the legacy spelling of default RoPE with mrope sections (Qwen2-VL configs).
  if (rope_type == "mrope") rope_type = "default";
  if (cfg.family == ModelFamily::kHunyuanV1Moe) {
    for (const json* dict : {params, scaling}) {  // rope_parameters' alpha first
      if (dict && dict->contains("alpha")) {
        FT_RETURN_IF_ERROR(config::hunyuan_alpha_rope(Fields(*dict), cfg, rope_type));
        break;
      }
    }
  }
  cfg.rope_type = rope_type;
  if (rope_type == "yarn") {
    FT_RETURN_IF_ERROR(finish_yarn(text, cfg));
  } else if (rope_type == "llama3") {
    for (const json* dict : {scaling, params}) {
      if (dict) FT_RETURN_IF_ERROR(parse_llama3_keys(Fields(*dict), cfg.llama3));
    }
    if (cfg.llama3.factor <= 0 || cfg.llama3.low_freq_factor <= 0 || cfg.llama3.high_freq_factor <= 0 ||
        cfg.llama3.original_max_position_embeddings <= 0) {
      return invalid_argument(
          "config.json: rope_type 'llama3' needs a positive factor, low_freq_factor, high_freq_factor and "
          "original_max_position_embeddings");
    }
  } else if (rope_type != "default") {
    return unsupported("rope_type '" + rope_type + "' is not supported yet (only 'default', 'yarn' and 'llama3')");
  }
  if (cfg.rope_theta <= 0) return invalid_argument("config.json: rope_theta must be positive");
  if (cfg.partial_rotary_factor <= 0 || cfg.partial_rotary_factor > 1) {
    return invalid_argument("config.json: partial_rotary_factor must be in (0, 1]");
  }
  return Status::ok();
}

Status parse_layers(const json& text_json, const Fields& text, ModelConfig& cfg, bool hybrid) {
  cfg.layer_types.clear();
  cfg.sliding_layers.clear();
  cfg.chunked_layers.clear();
  const bool can_chunk = cfg.family == ModelFamily::kLlama4Text;
  const bool gemma4 = cfg.family == ModelFamily::kGemma4Text;
  const bool can_slide = cfg.family == ModelFamily::kGptOss || cfg.family == ModelFamily::kExaoneMoe ||
                         cfg.family == ModelFamily::kAfmoe || gemma4;
  if (can_slide && !text.has("layer_types")) {
    // GptOssConfig: sliding on even layers, full on odd. ExaoneMoeConfig: full every
    // sliding_window_pattern-th layer (none without a sliding_window), sliding otherwise.
    // AfmoeConfig: full every global_attn_every_n_layers-th layer; Gemma4TextConfig every 6th.
    int64_t pattern = gemma4 ? 6 : 2;
    if (cfg.family == ModelFamily::kAfmoe) {
      FT_ASSIGN_OR_RETURN(pattern, text.integer_or("global_attn_every_n_layers", 4));
      if (pattern <= 0) return invalid_argument("config.json: global_attn_every_n_layers must be positive");
    }
    if (cfg.family == ModelFamily::kExaoneMoe) {
      if (text.has("sliding_window_pattern") && !text_json.at("sliding_window_pattern").is_number_integer()) {
        return unsupported("sliding_window_pattern other than a number is not supported (HF 5.x takes an int)");
      }
      FT_ASSIGN_OR_RETURN(pattern, text.integer_or("sliding_window_pattern", 4));
      if (text.has_null("sliding_window") || pattern <= 0) pattern = 1;  // every layer full
    }
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      cfg.layer_types.push_back(LayerKind::kFullAttention);
      cfg.sliding_layers.push_back(cfg.family == ModelFamily::kGptOss ? i % 2 == 0 : (i + 1) % pattern != 0);
    }
    if (gemma4 && !cfg.sliding_layers.empty()) cfg.sliding_layers.back() = false;  // HF forces the last full
    return Status::ok();
  }
  if (text.has("layer_types")) {
    const json& list = text_json.at("layer_types");
    if (!list.is_array()) return invalid_argument("config.json: field 'layer_types' must be a list");
    for (const json& e : list) {
      if (!e.is_string()) return invalid_argument("config.json: 'layer_types' must hold strings");
      std::string t = e.get<std::string>();
      // HF remap_legacy_layer_types: "attention" -> full, "mamba" -> linear.
      if (t == "full_attention" || t == "attention") {
        cfg.layer_types.push_back(LayerKind::kFullAttention);
        cfg.sliding_layers.push_back(false);
      } else if (can_slide && t == "sliding_attention") {
        cfg.layer_types.push_back(LayerKind::kFullAttention);
        cfg.sliding_layers.push_back(true);
      } else if (can_chunk && t == "chunked_attention") {
        cfg.layer_types.push_back(LayerKind::kFullAttention);
        cfg.sliding_layers.push_back(false);
      } else if (t == "deepseek_sparse_attention" && config::is_dsa_family(cfg.family)) {
        cfg.layer_types.push_back(LayerKind::kFullAttention);  // latent attention with the indexer
        cfg.sliding_layers.push_back(false);
      } else if (hybrid && (t == "linear_attention" || t == "mamba")) {
        cfg.layer_types.push_back(LayerKind::kLinearAttention);
        cfg.sliding_layers.push_back(false);
      } else {
        return unsupported("layer type '" + t + "' is not supported for " +
                           model_family_name(cfg.family));
      }
    }
    if (can_chunk) {
      for (const json& e : list) cfg.chunked_layers.push_back(e.get<std::string>() == "chunked_attention");
    }
    if (int64_t(cfg.layer_types.size()) != cfg.num_hidden_layers) {
      return invalid_argument("config.json: 'layer_types' has " + std::to_string(cfg.layer_types.size()) +
                              " entries but num_hidden_layers is " + std::to_string(cfg.num_hidden_layers));
    }
    if (gemma4 && !cfg.sliding_layers.empty()) cfg.sliding_layers.back() = false;  // Gemma4TextConfig forces it
    return Status::ok();
  }
  int64_t interval = 0;
  if (hybrid) {
    FT_ASSIGN_OR_RETURN(interval, text.integer_or("full_attention_interval", 4));
    if (interval <= 0) return invalid_argument("config.json: full_attention_interval must be positive");
  }
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const bool linear = hybrid && (i + 1) % interval != 0;
    cfg.layer_types.push_back(linear ? LayerKind::kLinearAttention : LayerKind::kFullAttention);
  }
  return Status::ok();
}

// The experts of the softmax-routed families (the Qwen ones, Mixtral, OLMoE).
Status parse_softmax_moe(const Fields& text, ModelConfig& cfg) {
  const bool hybrid = is_hybrid_family(cfg.family);
  const bool mixtral = cfg.family == ModelFamily::kMixtral, olmoe = cfg.family == ModelFamily::kOlmoe;
  // transformers 5.x writes Qwen3-MoE's expert count as "num_local_experts" (an attribute_map alias),
  // as Mixtral always has.
  FT_ASSIGN_OR_RETURN(int64_t local_experts, text.integer_or("num_local_experts", 0));
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("num_experts", local_experts));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("num_experts_per_tok", 0));
  FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer_or("moe_intermediate_size", 0));
  // Mixtral's and OLMoE's experts are intermediate_size wide, and they have no dense layers.
  if (mixtral || olmoe) cfg.moe_intermediate_size = cfg.intermediate_size;
  FT_ASSIGN_OR_RETURN(cfg.shared_expert_intermediate_size, text.integer_or("shared_expert_intermediate_size", 0));
  // Only the Qwen3-Next / Qwen3.5 / Qwen2-MoE blocks have a shared expert.
  if (!hybrid && cfg.family != ModelFamily::kQwen2Moe) cfg.shared_expert_intermediate_size = 0;
  // norm_topk_prob defaults per config class; Mixtral's and Qwen3.5's routers always renormalise
  // whatever the config says.
  if (cfg.family == ModelFamily::kQwen3_5Moe || mixtral) cfg.norm_topk_prob = true;
  // Qwen3.5, Mixtral and OLMoE have no decoder_sparse_step / mlp_only_layers: every layer is MoE.
  if (cfg.family != ModelFamily::kQwen3_5Moe && !mixtral && !olmoe) {
    FT_ASSIGN_OR_RETURN(cfg.decoder_sparse_step, text.integer_or("decoder_sparse_step", 1));
    FT_ASSIGN_OR_RETURN(cfg.mlp_only_layers, text.int_list_or_empty("mlp_only_layers"));
    if (cfg.decoder_sparse_step <= 0) return invalid_argument("config.json: decoder_sparse_step must be positive");
  }
  return Status::ok();
}

Result<std::vector<int32_t>> eos_ids(const json& from, const char* file) {
  std::vector<int32_t> out;
  if (!from.contains("eos_token_id") || from.at("eos_token_id").is_null()) return out;
  const json& v = from.at("eos_token_id");
  auto push = [&](const json& e) -> Status {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX) {
      return invalid_argument(std::string(file) + ": eos_token_id must be a token id or a list of them");
    }
    out.push_back(int32_t(e.get<int64_t>()));
    return Status::ok();
  };
  if (v.is_array()) {
    for (const json& e : v) FT_RETURN_IF_ERROR(push(e));
  } else {
    FT_RETURN_IF_ERROR(push(v));
  }
  return out;
}

Status validate(const ModelConfig& c) {
  const auto positive = config::require_positive;
  FT_RETURN_IF_ERROR(positive(c.vocab_size, "vocab_size"));
  FT_RETURN_IF_ERROR(positive(c.hidden_size, "hidden_size"));
  FT_RETURN_IF_ERROR(positive(c.num_hidden_layers, "num_hidden_layers"));
  FT_RETURN_IF_ERROR(positive(c.num_attention_heads, "num_attention_heads"));
  FT_RETURN_IF_ERROR(positive(c.num_key_value_heads, "num_key_value_heads"));
  FT_RETURN_IF_ERROR(positive(c.head_dim, "head_dim"));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return invalid_argument("config.json: num_attention_heads must be a multiple of num_key_value_heads");
  }
  if (c.rotary_dim() % 2 != 0 || c.rotary_dim() <= 0) {
    return invalid_argument("config.json: head_dim * partial_rotary_factor must be a positive even number");
  }
  bool any_moe = false, any_dense = false;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) (c.is_moe_layer(i) ? any_moe : any_dense) = true;
  if (any_moe) {
    FT_RETURN_IF_ERROR(positive(c.num_experts_per_tok, "num_experts_per_tok"));
    FT_RETURN_IF_ERROR(positive(c.moe_intermediate_size, "moe_intermediate_size"));
    if (c.num_experts_per_tok > c.num_experts) {
      return invalid_argument("config.json: num_experts_per_tok exceeds num_experts");
    }
  }
  if (any_dense) FT_RETURN_IF_ERROR(positive(c.intermediate_size, "intermediate_size"));
  // Qwen2MoeSparseMoeBlock always builds its shared expert.
  if (any_moe && c.family == ModelFamily::kQwen2Moe) {
    FT_RETURN_IF_ERROR(positive(c.shared_expert_intermediate_size, "shared_expert_intermediate_size"));
  }
  // OLMoE's q_norm is hidden_size wide and normalises the whole q_proj output: HF builds that model
  // only when heads * head_dim == hidden_size.
  if (c.family == ModelFamily::kOlmoe && c.num_attention_heads * c.head_dim != c.hidden_size) {
    return unsupported("config.json: head_dim must be hidden_size / num_attention_heads for olmoe");
  }
  if (c.count_layers(LayerKind::kLinearAttention) > 0) {
    FT_RETURN_IF_ERROR(positive(c.linear_conv_kernel_dim, "linear_conv_kernel_dim"));
    FT_RETURN_IF_ERROR(positive(c.linear_key_head_dim, "linear_key_head_dim"));
    FT_RETURN_IF_ERROR(positive(c.linear_value_head_dim, "linear_value_head_dim"));
    FT_RETURN_IF_ERROR(positive(c.linear_num_key_heads, "linear_num_key_heads"));
    FT_RETURN_IF_ERROR(positive(c.linear_num_value_heads, "linear_num_value_heads"));
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0) {
      return invalid_argument("config.json: linear_num_value_heads must be a multiple of linear_num_key_heads");
    }
  }
  return Status::ok();
}

Result<ModelConfig> parse(const json& root, const json* gen) {
  if (!root.is_object()) return invalid_argument("config.json: expected a JSON object");
  ModelConfig cfg;
  Fields top(root);
  FT_ASSIGN_OR_RETURN(cfg.model_type, top.string_or("model_type", ""));
  if (root.contains("architectures") && root.at("architectures").is_array() &&
      !root.at("architectures").empty() && root.at("architectures")[0].is_string()) {
    cfg.architecture = root.at("architectures")[0].get<std::string>();
  }
  auto family = family_from_model_type(cfg.model_type);
  if (!family) family = family_from_architecture(cfg.architecture);
  if (!family) {
    const std::string name = !cfg.architecture.empty() ? cfg.architecture
                             : !cfg.model_type.empty()  ? cfg.model_type
                                                        : "(none given)";
    return unsupported("unsupported architecture '" + name + "' (" + supported_list() + ")");
  }
  cfg.family = *family;

  const json* text_json = top.object("text_config");
  cfg.nested_text_config = text_json != nullptr;
  if (!text_json) text_json = &root;
  Fields text(*text_json);
  const bool hybrid = is_hybrid_family(cfg.family);
  const FamilyDefaults defaults = family_defaults(cfg.family);
  const bool mixtral = cfg.family == ModelFamily::kMixtral, olmoe = cfg.family == ModelFamily::kOlmoe;
  const bool sigmoid_moe = cfg.family == ModelFamily::kDeepseekV3 || cfg.family == ModelFamily::kGlm4Moe ||
                           cfg.family == ModelFamily::kDots1 || cfg.family == ModelFamily::kGlm4MoeLite ||
                           config::is_dsa_family(cfg.family);
  const bool mla = cfg.family == ModelFamily::kDeepseekV3 || cfg.family == ModelFamily::kGlm4MoeLite ||
                   config::is_dsa_family(cfg.family);

  FT_ASSIGN_OR_RETURN(std::string act, text.string_or("hidden_act", "silu"));
  if (act != "silu") return unsupported("hidden_act '" + act + "' is not supported (only 'silu')");
  FT_ASSIGN_OR_RETURN(bool sliding, text.boolean_or("use_sliding_window", false));
  if (sliding) return unsupported("sliding-window attention (use_sliding_window) is not supported yet");
  // Mixtral and OLMoE attend within "sliding_window" whenever it is set (Qwen configs carry one that
  // only use_sliding_window switches on).
  if ((mixtral || olmoe) && text.has("sliding_window")) {
    return unsupported("sliding-window attention (sliding_window) is not supported yet");
  }
  if (olmoe && text.has("clip_qkv")) return unsupported("clip_qkv is not supported yet (only null)");

  FT_ASSIGN_OR_RETURN(cfg.vocab_size, text.integer("vocab_size"));
  FT_ASSIGN_OR_RETURN(cfg.hidden_size, text.integer("hidden_size"));
  FT_ASSIGN_OR_RETURN(cfg.num_hidden_layers, text.integer("num_hidden_layers"));
  FT_ASSIGN_OR_RETURN(cfg.num_attention_heads, text.integer("num_attention_heads"));
  FT_ASSIGN_OR_RETURN(cfg.num_key_value_heads, text.integer_or("num_key_value_heads", cfg.num_attention_heads));
  const int64_t default_head_dim = cfg.num_attention_heads > 0 ? cfg.hidden_size / cfg.num_attention_heads : 0;
  FT_ASSIGN_OR_RETURN(cfg.head_dim, text.integer_or("head_dim", default_head_dim));
  // Glm4MoeLiteConfig's dense layers default to 10240 wide (DeepseekV32Config's 18432,
  // GlmMoeDsaConfig's 12288); the older families' stay 0, not given.
  const int64_t default_inter = cfg.family == ModelFamily::kGlm4MoeLite   ? 10240
                                : cfg.family == ModelFamily::kDeepseekV32 ? 18432
                                : cfg.family == ModelFamily::kGlmMoeDsa   ? 12288
                                : cfg.family == ModelFamily::kGemma4Text  ? 9216
                                                                          : 0;
  FT_ASSIGN_OR_RETURN(cfg.intermediate_size, text.integer_or("intermediate_size", default_inter));
  FT_ASSIGN_OR_RETURN(double eps, text.number_or("rms_norm_eps", defaults.rms_norm_eps));
  cfg.rms_norm_eps = float(eps);
  // Mixtral's attention has no biases; Qwen2-MoE's q/k/v always have (qkv_bias, default true), its
  // o_proj never; the others follow attention_bias for all four.
  if (cfg.family == ModelFamily::kQwen2Moe) {
    FT_ASSIGN_OR_RETURN(cfg.qkv_bias, text.boolean_or("qkv_bias", true));
  } else if (!mixtral) {
    FT_ASSIGN_OR_RETURN(cfg.attention_bias, text.boolean_or("attention_bias", cfg.family == ModelFamily::kGptOss));
  }
  // The wrapper's flag decides for multimodal checkpoints (it owns lm_head); else the text config's.
  // Ernie4_5_MoeConfig ties them unless told otherwise.
  FT_ASSIGN_OR_RETURN(bool text_tie,
                      text.boolean_or("tie_word_embeddings", cfg.family == ModelFamily::kErnie4_5Moe ||
                                                                 cfg.family == ModelFamily::kGemma4Text));
  FT_ASSIGN_OR_RETURN(cfg.tie_word_embeddings, top.boolean_or("tie_word_embeddings", text_tie));

  FT_ASSIGN_OR_RETURN(cfg.max_position_embeddings,
                      text.integer_or("max_position_embeddings", max_position_default(cfg.family)));
  if (mla) FT_RETURN_IF_ERROR(config::parse_mla(text, cfg));
  // No HF config of these families says it (ERNIE's and Llama 4's parsers set it): a GGUF's does,
  // whose converter permuted q and k rows into adjacent rotary pairs (gguf_hf.cpp).
  if (!mla) {
    FT_ASSIGN_OR_RETURN(cfg.rope_interleave, text.boolean_or("rope_interleave", false));
  }
  if (config::is_dsa_family(cfg.family)) FT_RETURN_IF_ERROR(config::parse_dsa(*text_json, text, cfg));

  // qwen3_next and qwen3_5_moe default partial_rotary_factor to 0.25 ("assign default for BC"),
  // Glm4MoeConfig to 0.5; MiniMax-M2's release says rotary_dim instead.
  double default_partial = hybrid ? 0.25 : cfg.family == ModelFamily::kGlm4Moe ? 0.5 : 1.0;
  if (cfg.family == ModelFamily::kMinimaxM2) {
    FT_ASSIGN_OR_RETURN(default_partial, config::minimax_partial_rotary(text, cfg));
  }
  // DeepSeek-V4's two ropes and its own layer kinds are read with the rest of its config below.
  const bool v4 = cfg.family == ModelFamily::kDeepseekV4;
  if (cfg.family == ModelFamily::kGemma4Text) {
    FT_RETURN_IF_ERROR(config::parse_gemma4_rope(text, cfg));  // a rope dict per layer type
  } else if (!v4) {
    FT_RETURN_IF_ERROR(parse_rope(text, cfg, default_partial));
  }
  if (!v4) FT_RETURN_IF_ERROR(parse_layers(*text_json, text, cfg, hybrid));
  FT_ASSIGN_OR_RETURN(cfg.norm_topk_prob, text.boolean_or("norm_topk_prob", defaults.norm_topk_prob));
  if (sigmoid_moe) {
    FT_RETURN_IF_ERROR(config::parse_sigmoid_moe(text, cfg));
  } else if (cfg.family == ModelFamily::kErnie4_5Moe) {
    FT_RETURN_IF_ERROR(config::parse_ernie4_5_moe(text, cfg));
  } else if (cfg.family == ModelFamily::kMinimaxM2) {
    FT_RETURN_IF_ERROR(config::parse_minimax_m2(text, cfg));
  } else if (cfg.family == ModelFamily::kGptOss) {
    FT_RETURN_IF_ERROR(config::parse_gpt_oss(text, cfg));
  } else if (cfg.family == ModelFamily::kExaoneMoe) {
    FT_RETURN_IF_ERROR(config::parse_exaone_moe(text, cfg));
  } else if (cfg.family == ModelFamily::kHunyuanV1Moe) {
    FT_RETURN_IF_ERROR(config::parse_hunyuan_v1_moe(text, cfg));
  } else if (cfg.family == ModelFamily::kAfmoe) {
    FT_RETURN_IF_ERROR(config::parse_afmoe(text, cfg));
  } else if (cfg.family == ModelFamily::kLlama4Text) {
    FT_RETURN_IF_ERROR(config::parse_llama4_text(text, cfg));
  } else if (cfg.family == ModelFamily::kGemma4Text) {
    FT_RETURN_IF_ERROR(config::parse_gemma4_text(text, cfg));
  } else if (v4) {
    FT_RETURN_IF_ERROR(config::parse_deepseek_v4(text, cfg));
  } else {
    FT_RETURN_IF_ERROR(parse_softmax_moe(text, cfg));
  }

  if (hybrid) {
    FT_ASSIGN_OR_RETURN(cfg.linear_conv_kernel_dim, text.integer_or("linear_conv_kernel_dim", 4));
    FT_ASSIGN_OR_RETURN(cfg.linear_key_head_dim, text.integer_or("linear_key_head_dim", 128));
    FT_ASSIGN_OR_RETURN(cfg.linear_value_head_dim, text.integer_or("linear_value_head_dim", 128));
    FT_ASSIGN_OR_RETURN(cfg.linear_num_key_heads, text.integer_or("linear_num_key_heads", 16));
    FT_ASSIGN_OR_RETURN(cfg.linear_num_value_heads, text.integer_or("linear_num_value_heads", 32));
    FT_ASSIGN_OR_RETURN(cfg.linear_value_heads_tiled, text.boolean_or("linear_value_heads_tiled", false));
  }

  // Stop tokens: generation_config.json wins (it is what HF generate uses), then config.json.
  if (gen) {
    FT_ASSIGN_OR_RETURN(cfg.eos_token_ids, eos_ids(*gen, "generation_config.json"));
  }
  if (cfg.eos_token_ids.empty()) {
    FT_ASSIGN_OR_RETURN(cfg.eos_token_ids, eos_ids(*text_json, "config.json"));
  }
  if (cfg.eos_token_ids.empty()) {
    FT_ASSIGN_OR_RETURN(cfg.eos_token_ids, eos_ids(root, "config.json"));
  }
  const json* bos_src = gen && gen->contains("bos_token_id") ? gen : text_json;
  if (bos_src->contains("bos_token_id") && bos_src->at("bos_token_id").is_number_integer()) {
    cfg.bos_token_id = int32_t(bos_src->at("bos_token_id").get<int64_t>());
  }

  FT_RETURN_IF_ERROR(validate(cfg));
  return cfg;
}

}  // namespace

const char* model_family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen3Moe: return "qwen3_moe";
    case ModelFamily::kQwen3Next: return "qwen3_next";
    case ModelFamily::kQwen3_5Moe: return "qwen3_5_moe";
    case ModelFamily::kMixtral: return "mixtral";
    case ModelFamily::kQwen2Moe: return "qwen2_moe";
    case ModelFamily::kOlmoe: return "olmoe";
    case ModelFamily::kDeepseekV3:
      return "deepseek_v3";
    case ModelFamily::kGlm4Moe:
      return "glm4_moe";
    case ModelFamily::kDots1:
      return "dots1";
    case ModelFamily::kErnie4_5Moe:
      return "ernie4_5_moe";
    case ModelFamily::kMinimaxM2:
      return "minimax_m2";
    case ModelFamily::kGptOss:
      return "gpt_oss";
    case ModelFamily::kExaoneMoe:
      return "exaone_moe";
    case ModelFamily::kGlm4MoeLite:
      return "glm4_moe_lite";
    case ModelFamily::kHunyuanV1Moe:
      return "hunyuan_v1_moe";
    case ModelFamily::kAfmoe:
      return "afmoe";
    case ModelFamily::kLlama4Text:
      return "llama4_text";
    case ModelFamily::kDeepseekV32:
      return "deepseek_v32";
    case ModelFamily::kGlmMoeDsa:
      return "glm_moe_dsa";
    case ModelFamily::kGemma4Text:
      return "gemma4_text";
    case ModelFamily::kDeepseekV4:
      return "deepseek_v4";
  }
  return "?";
}

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> all = {
      ModelFamily::kQwen3Moe,    ModelFamily::kQwen3Next,    ModelFamily::kQwen3_5Moe, ModelFamily::kMixtral,
      ModelFamily::kQwen2Moe,    ModelFamily::kOlmoe,        ModelFamily::kDeepseekV3, ModelFamily::kGlm4Moe,
      ModelFamily::kDots1,       ModelFamily::kErnie4_5Moe,  ModelFamily::kMinimaxM2,  ModelFamily::kGptOss,
      ModelFamily::kGlm4MoeLite, ModelFamily::kHunyuanV1Moe, ModelFamily::kExaoneMoe,  ModelFamily::kAfmoe,
      ModelFamily::kLlama4Text,  ModelFamily::kDeepseekV32,  ModelFamily::kGlmMoeDsa,  ModelFamily::kGemma4Text,
      ModelFamily::kDeepseekV4};
  return all;
}

Status family_built(ModelFamily family) {
  const std::vector<ModelFamily>& built = model_families();
  if (std::find(built.begin(), built.end(), family) != built.end()) return Status::ok();
  return unsupported(std::string(model_family_name(family)) + ": config parsed; the family's blocks are not built yet");
}

bool is_hybrid_family(ModelFamily family) {
  return family == ModelFamily::kQwen3Next || family == ModelFamily::kQwen3_5Moe;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  if (layer < first_k_dense_replace || (last_moe_layer >= 0 && layer > last_moe_layer)) return false;
  return num_experts > 0 && decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

int64_t ModelConfig::count_layers(LayerKind kind) const {
  return std::count(layer_types.begin(), layer_types.end(), kind);
}

Result<ModelConfig> parse_model_config(std::string_view config_json, std::string_view generation_config_json) {
  json root, gen;
  try {
    root = json::parse(config_json);
  } catch (const json::exception& e) {
    return invalid_argument(std::string("config.json is not valid JSON: ") + e.what());
  }
  bool have_gen = false;
  if (!generation_config_json.empty()) {
    try {
      gen = json::parse(generation_config_json);
      have_gen = gen.is_object();
    } catch (const json::exception& e) {
      return invalid_argument(std::string("generation_config.json is not valid JSON: ") + e.what());
    }
  }
  try {
    return parse(root, have_gen ? &gen : nullptr);
  } catch (const json::exception& e) {  // a shape we did not anticipate: still a value, not a throw
    return invalid_argument(std::string("config.json: ") + e.what());
  }
}

}  // namespace ft::engine

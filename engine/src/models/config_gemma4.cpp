// config.json fields of gemma4_text (Gemma 4's text model, also the text_config of the multimodal
// gemma4 checkpoints) with Gemma4TextConfig's defaults (transformers 5.17).
#include <cmath>
#include <string>

#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {
namespace {

using json = nlohmann::json;

// One layer type's rope dict: its theta and partial factor; `proportional` says whether its
// rope_type is "proportional" (else it must be "default").
Status parse_rope_dict(const json* dict, const char* layer_type, bool allow_proportional, double& theta,
                       double& partial, bool& proportional) {
  if (!dict) return Status::ok();
  Fields d(*dict);
  FT_ASSIGN_OR_RETURN(const std::string type, d.string_or("rope_type", "default"));
  proportional = type == "proportional";
  if (type != "default" && !(allow_proportional && proportional)) {
    return unsupported(std::string("gemma4_text: rope_type '") + type + "' for " + layer_type +
                       " layers is not supported (only 'default'" +
                       (allow_proportional ? " and 'proportional')" : ")"));
  }
  FT_ASSIGN_OR_RETURN(theta, d.number_or("rope_theta", theta));
  FT_ASSIGN_OR_RETURN(partial, d.number_or("partial_rotary_factor", partial));
  if (theta <= 0) return invalid_argument("config.json: rope_theta must be positive");
  if (partial <= 0 || partial > 1) return invalid_argument("config.json: partial_rotary_factor must be in (0, 1]");
  return Status::ok();
}

}  // namespace

Status parse_gemma4_rope(const Fields& text, ModelConfig& cfg) {
  // Gemma4TextConfig's default: sliding layers plain RoPE at 10k, full layers proportional RoPE on
  // a quarter of the head at 1M.
  cfg.rope_theta = 10000.0;
  cfg.partial_rotary_factor = 1.0;
  cfg.rope_type = "default";
  cfg.full_rope = {1000000.0, 0.25, true};
  const json* params = text.object("rope_parameters");
  if (!params) return Status::ok();
  const json* sliding = params->contains("sliding_attention") && params->at("sliding_attention").is_object()
                            ? &params->at("sliding_attention")
                            : nullptr;
  const json* full = params->contains("full_attention") && params->at("full_attention").is_object()
                         ? &params->at("full_attention")
                         : nullptr;
  if (!sliding && !full)
    return invalid_argument("config.json: gemma4_text's rope_parameters has a dict per layer type");
  bool sliding_proportional = false;
  FT_RETURN_IF_ERROR(parse_rope_dict(sliding, "sliding_attention", false, cfg.rope_theta, cfg.partial_rotary_factor,
                                     sliding_proportional));
  if (full) {
    cfg.full_rope = {1000000.0, 1.0, false};  // a dict given: HF's defaults are the plain ones
    FT_RETURN_IF_ERROR(parse_rope_dict(full, "full_attention", true, cfg.full_rope.theta,
                                       cfg.full_rope.partial_rotary_factor, cfg.full_rope.proportional));
  }
  return Status::ok();
}

Status parse_gemma4_text(const Fields& text, ModelConfig& cfg) {
  FT_ASSIGN_OR_RETURN(const std::string act, text.string_or("hidden_activation", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh") {
    return unsupported("gemma4_text: hidden_activation '" + act + "' is not supported (only 'gelu_pytorch_tanh')");
  }
  // Per-layer embeddings (the E2B/E4B models) and KV shared between layers are not built.
  FT_ASSIGN_OR_RETURN(const int64_t ple, text.integer_or("hidden_size_per_layer_input", 256));
  if (ple > 0) {
    return unsupported(
        "gemma4_text: per-layer embeddings (hidden_size_per_layer_input > 0, the E2B/E4B models) are not supported "
        "yet");
  }
  FT_ASSIGN_OR_RETURN(const int64_t shared_kv, text.integer_or("num_kv_shared_layers", 0));
  if (shared_kv > 0) return unsupported("gemma4_text: layers sharing KV (num_kv_shared_layers) are not supported yet");
  FT_ASSIGN_OR_RETURN(const std::string bidirectional, text.string_or("use_bidirectional_attention", ""));
  if (bidirectional == "all") {
    return unsupported("gemma4_text: bidirectional attention (use_bidirectional_attention 'all') is not supported");
  }

  FT_ASSIGN_OR_RETURN(cfg.sliding_window, text.integer_or("sliding_window", 512));
  if (cfg.sliding_window <= 0) return invalid_argument("config.json: sliding_window must be positive");
  FT_ASSIGN_OR_RETURN(cfg.final_logit_softcapping, text.number_or("final_logit_softcapping", 0.0));
  if (cfg.final_logit_softcapping < 0)
    return invalid_argument("config.json: final_logit_softcapping must not be negative");
  cfg.embedding_scale = std::sqrt(double(cfg.hidden_size));
  FT_ASSIGN_OR_RETURN(cfg.attention_k_eq_v, text.boolean_or("attention_k_eq_v", false));

  // Full-attention layers' heads: per_layer_config as transformers writes it, else what
  // Gemma4TextConfig derives it from (global_head_dim, and num_global_key_value_heads where the
  // keys are the values).
  cfg.layer_head_dims.assign(std::size_t(cfg.num_hidden_layers), 0);
  cfg.layer_kv_heads.assign(std::size_t(cfg.num_hidden_layers), 0);
  if (const json* per_layer = text.object("per_layer_config")) {
    for (const auto& [key, value] : per_layer->items()) {
      std::size_t used = 0;
      int64_t layer = -1;
      try {
        layer = std::stoll(key, &used);
      } catch (const std::exception&) {
      }
      if (used != key.size() || layer < 0 || layer >= cfg.num_hidden_layers || !value.is_object()) {
        return invalid_argument("config.json: per_layer_config has an entry '" + key +
                                "' that is not a layer index with a dict");
      }
      Fields f(value);
      for (const auto& [name, v] : value.items()) {
        if (name != "head_dim" && name != "num_key_value_heads") {
          return unsupported("gemma4_text: per_layer_config." + key + "." + name + " is not supported");
        }
      }
      FT_ASSIGN_OR_RETURN(cfg.layer_head_dims[std::size_t(layer)], f.integer_or("head_dim", 0));
      FT_ASSIGN_OR_RETURN(cfg.layer_kv_heads[std::size_t(layer)], f.integer_or("num_key_value_heads", 0));
    }
  } else {
    FT_ASSIGN_OR_RETURN(const int64_t global_head_dim, text.integer_or("global_head_dim", 512));
    FT_ASSIGN_OR_RETURN(const int64_t global_kv, text.integer_or("num_global_key_value_heads", 0));
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      if (cfg.is_sliding_layer(i)) continue;
      cfg.layer_head_dims[std::size_t(i)] = global_head_dim;
      if (cfg.attention_k_eq_v) cfg.layer_kv_heads[std::size_t(i)] = global_kv;
    }
  }
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const int64_t d = cfg.attention_head_dim(i), kv = cfg.attention_kv_heads(i);
    if (d <= 0 || d % 2 != 0 || kv <= 0 || cfg.num_attention_heads % kv != 0) {
      return invalid_argument("config.json: layer " + std::to_string(i) + " of gemma4_text has head_dim " +
                              std::to_string(d) + " and " + std::to_string(kv) +
                              " KV heads (an even width and a divisor of num_attention_heads needed)");
    }
  }

  // The MoE beside every layer's MLP: softmax over the experts, top-k renormalised, times each
  // expert's per_expert_scale.
  FT_ASSIGN_OR_RETURN(cfg.parallel_moe, text.boolean_or("enable_moe_block", false));
  cfg.norm_topk_prob = true;
  if (cfg.parallel_moe) {
    FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer("num_experts"));
    FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer("top_k_experts"));
    FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer("moe_intermediate_size"));
  }
  if (cfg.intermediate_size <= 0) return invalid_argument("config.json: intermediate_size must be positive");
  return Status::ok();
}

}  // namespace ft::engine::config

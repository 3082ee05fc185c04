// config.json fields of ernie4_5_moe with Ernie4_5_MoeConfig's defaults (transformers 5.x). Its
// attribute_map lets a saved config name the expert count "num_experts" and the choices per token
// "num_experts_per_tok"; both spellings are read.
#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

Status parse_ernie4_5_moe(const Fields& text, ModelConfig& cfg) {
  // use_bias puts biases on every projection, the experts' included, and on lm_head: the SwiGLU
  // blocks here have none.
  FT_ASSIGN_OR_RETURN(const bool use_bias, text.boolean_or("use_bias", false));
  if (use_bias) return unsupported("use_bias (biases on every projection and expert) is not supported yet");
  cfg.biased_softmax_router = true;
  cfg.rope_interleave = true;  // HF Ernie 4.5: cos/sin repeat_interleave'd, GLM's rotate_half
  cfg.norm_topk_prob = true;   // renormalised always (the sum clamped at moe_norm_min)
  FT_ASSIGN_OR_RETURN(const int64_t experts, text.integer_or("num_experts", 64));
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("moe_num_experts", experts));
  FT_ASSIGN_OR_RETURN(const int64_t top_k, text.integer_or("num_experts_per_tok", 6));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("moe_k", top_k));
  FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer_or("moe_intermediate_size", 1536));
  FT_ASSIGN_OR_RETURN(const int64_t shared, text.integer_or("moe_num_shared_experts", 2));
  if (shared < 0) return invalid_argument("config.json: moe_num_shared_experts must not be negative");
  cfg.shared_expert_intermediate_size = cfg.moe_intermediate_size * shared;
  // MoE layers: (i + 1) % interval == 0 and start <= i <= end (end -1: the last layer).
  FT_ASSIGN_OR_RETURN(cfg.first_k_dense_replace, text.integer_or("moe_layer_start_index", 1));
  FT_ASSIGN_OR_RETURN(const int64_t end, text.integer_or("moe_layer_end_index", -1));
  cfg.last_moe_layer = end == -1 ? cfg.num_hidden_layers - 1 : end;
  FT_ASSIGN_OR_RETURN(cfg.decoder_sparse_step, text.integer_or("moe_layer_interval", 1));
  if (cfg.decoder_sparse_step <= 0) return invalid_argument("config.json: moe_layer_interval must be positive");
  if (cfg.first_k_dense_replace < 0 || cfg.last_moe_layer < 0) {
    return invalid_argument("config.json: moe_layer_start_index and moe_layer_end_index must not be negative");
  }
  return Status::ok();
}

}  // namespace ft::engine::config

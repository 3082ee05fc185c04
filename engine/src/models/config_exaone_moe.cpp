// config.json fields of exaone_moe with ExaoneMoeConfig's defaults (transformers 5.x). Its
// layer_types (sliding_window_pattern) are read with the common fields (model_config.cpp).
#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

Status parse_exaone_moe(const Fields& text, ModelConfig& cfg) {
  cfg.sigmoid_router = true;   // sigmoid scores chosen with e_score_correction_bias, groups, scaling
  cfg.attention_bias = false;  // q/k/v/o are built without biases
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("num_experts", 64));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("num_experts_per_tok", 8));
  FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer_or("moe_intermediate_size", 1024));
  FT_ASSIGN_OR_RETURN(cfg.n_group, text.integer_or("n_group", 1));
  FT_ASSIGN_OR_RETURN(cfg.topk_group, text.integer_or("topk_group", 1));
  FT_ASSIGN_OR_RETURN(cfg.routed_scaling_factor, text.number_or("routed_scaling_factor", 2.5));
  FT_ASSIGN_OR_RETURN(const int64_t shared, text.integer_or("num_shared_experts", 1));
  if (shared < 0) return invalid_argument("config.json: num_shared_experts must not be negative");
  cfg.shared_expert_intermediate_size = cfg.moe_intermediate_size * shared;
  if (cfg.n_group <= 0 || cfg.topk_group <= 0 || cfg.topk_group > cfg.n_group || cfg.num_experts % cfg.n_group != 0 ||
      cfg.num_experts / cfg.n_group < 2) {
    return invalid_argument(
        "config.json: n_group and topk_group must be positive, topk_group <= n_group, and num_experts "
        "must split into n_group groups of at least 2 experts");
  }
  // Dense layers: mlp_layer_types when given (it wins), else the first first_k_dense_replace.
  FT_ASSIGN_OR_RETURN(cfg.first_k_dense_replace, text.integer_or("first_k_dense_replace", 1));
  if (cfg.first_k_dense_replace < 0) return invalid_argument("config.json: first_k_dense_replace must not be negative");
  if (text.has("mlp_layer_types")) FT_RETURN_IF_ERROR(parse_mlp_layer_types(text, cfg));
  // A null sliding_window: no sliding layers (and RoPE on every layer).
  FT_ASSIGN_OR_RETURN(cfg.sliding_window,
                      text.integer_or("sliding_window", text.has_null("sliding_window") ? 0 : 4096));
  if (cfg.sliding_window < 0) return invalid_argument("config.json: sliding_window must not be negative");
  return Status::ok();
}

}  // namespace ft::engine::config

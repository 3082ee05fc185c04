// config.json fields of minimax_m2 with MiniMaxM2Config's defaults (transformers 5.x). The release's
// own keys (use_qk_norm, qk_norm_type, scoring_func, use_routing_bias, attn_type_list) describe what
// HF's MiniMaxM2 code always does, and are not read.
#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

Result<double> minimax_partial_rotary(const Fields& text, const ModelConfig& cfg) {
  FT_ASSIGN_OR_RETURN(const int64_t rotary_dim, text.integer_or("rotary_dim", cfg.head_dim));
  if (rotary_dim <= 0 || rotary_dim > cfg.head_dim) {
    return invalid_argument("config.json: rotary_dim must be in (0, head_dim]");
  }
  return double(rotary_dim) / double(cfg.head_dim);
}

Status parse_minimax_m2(const Fields& text, ModelConfig& cfg) {
  cfg.sigmoid_router = true;   // sigmoid scores, chosen with e_score_correction_bias, one group
  cfg.norm_topk_prob = true;   // always renormalised, not scaled
  cfg.attention_bias = false;  // q/k/v/o are built without biases whatever attention_bias says
  FT_ASSIGN_OR_RETURN(const int64_t experts, text.integer_or("num_experts", 256));
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("num_local_experts", experts));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("num_experts_per_tok", 8));
  // Mixtral's experts: intermediate_size wide, every layer sparse, no shared expert.
  FT_ASSIGN_OR_RETURN(cfg.intermediate_size, text.integer_or("intermediate_size", 1536));
  cfg.moe_intermediate_size = cfg.intermediate_size;
  return Status::ok();
}

}  // namespace ft::engine::config

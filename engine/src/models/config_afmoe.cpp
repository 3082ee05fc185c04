// config.json fields of afmoe (Arcee's AFMoE, e.g. Trinity) with AfmoeConfig's defaults
// (transformers 5.x). Its layer_types (global_attn_every_n_layers) are read with the common fields
// (model_config.cpp).
#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

Status parse_afmoe(const Fields& text, ModelConfig& cfg) {
  // AfmoeTokenChoiceRouter: sigmoid scores, the top-k of scores + expert_bias, the chosen scores
  // renormalised and scaled by route_scale; no expert groups.
  cfg.sigmoid_router = true;
  cfg.norm_topk_prob = true;
  cfg.n_group = 1;
  cfg.topk_group = 1;
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("num_experts", 64));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("num_experts_per_tok", 6));
  FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer_or("moe_intermediate_size", 1408));
  FT_ASSIGN_OR_RETURN(cfg.routed_scaling_factor, text.number_or("route_scale", 1.0));
  FT_ASSIGN_OR_RETURN(const int64_t shared, text.integer_or("num_shared_experts", 2));
  if (shared < 0) return invalid_argument("config.json: num_shared_experts must not be negative");
  cfg.shared_expert_intermediate_size = cfg.moe_intermediate_size * shared;
  FT_ASSIGN_OR_RETURN(cfg.first_k_dense_replace, text.integer_or("num_dense_layers", 1));
  if (cfg.first_k_dense_replace < 0) return invalid_argument("config.json: num_dense_layers must not be negative");
  // muP scales the embeddings by sqrt(hidden_size): not implemented, so refused rather than ignored.
  FT_ASSIGN_OR_RETURN(const bool mup, text.boolean_or("mup_enabled", false));
  if (mup) return unsupported("afmoe with mup_enabled (embeddings scaled by sqrt(hidden_size)) is not supported yet");
  // A null sliding_window: the sliding layers attend to everything (they still take RoPE).
  FT_ASSIGN_OR_RETURN(cfg.sliding_window,
                      text.integer_or("sliding_window", text.has_null("sliding_window") ? 0 : 1024));
  if (cfg.sliding_window < 0) return invalid_argument("config.json: sliding_window must not be negative");
  return Status::ok();
}

}  // namespace ft::engine::config

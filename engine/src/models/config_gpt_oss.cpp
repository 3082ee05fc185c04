// config.json fields of gpt_oss with GptOssConfig's defaults (transformers 5.x). Its layer_types,
// attention_bias and YaRN defaults are read with the common fields (model_config.cpp).
#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

Status parse_gpt_oss(const Fields& text, ModelConfig& cfg) {
  FT_ASSIGN_OR_RETURN(const int64_t experts, text.integer_or("num_experts", 128));
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("num_local_experts", experts));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("num_experts_per_tok", 4));
  // Every layer sparse; the experts are intermediate_size wide.
  FT_ASSIGN_OR_RETURN(cfg.intermediate_size, text.integer_or("intermediate_size", 2880));
  cfg.moe_intermediate_size = cfg.intermediate_size;
  // softmax over the top-k router logits: the softmax over all, renormalised over the k.
  cfg.norm_topk_prob = true;
  // A null sliding_window means no window: the sliding layers then attend like the full ones.
  FT_ASSIGN_OR_RETURN(cfg.sliding_window, text.integer_or("sliding_window", text.has_null("sliding_window") ? 0 : 128));
  if (cfg.sliding_window < 0) return invalid_argument("config.json: sliding_window must not be negative");
  return Status::ok();
}

}  // namespace ft::engine::config

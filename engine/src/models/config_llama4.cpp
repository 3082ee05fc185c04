// config.json fields of llama4_text (Llama4TextConfig's defaults, transformers 5.x; also the text
// config nested in a Llama4ForConditionalGeneration checkpoint): the experts and dense widths, which
// layers are MoE (moe_layers or interleave_moe_layer_step), which take no RoPE (no_rope_layers or
// no_rope_layer_interval), the chunked layers and the attention temperature.
#include <algorithm>

#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

Status parse_llama4_text(const Fields& text, ModelConfig& cfg) {
  // Llama4Router: the top-k logits, each expert's input scaled by sigmoid(logit); its output added
  // as it is. The engine runs the released top-1 (blocks/moe_block.h says how).
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("num_local_experts", 16));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("num_experts_per_tok", 1));
  if (cfg.num_experts_per_tok != 1) {
    return unsupported("llama4_text with num_experts_per_tok other than 1 is not supported (the releases route top-1)");
  }
  cfg.norm_topk_prob = true;
  FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer_or("intermediate_size", 8192));
  cfg.shared_expert_intermediate_size = cfg.moe_intermediate_size;  // shared_expert: Llama4TextMLP(config)
  FT_ASSIGN_OR_RETURN(cfg.intermediate_size, text.integer_or("intermediate_size_mlp", 16384));
  const int64_t L = cfg.num_hidden_layers;

  // MoE layers: moe_layers, else every interleave_moe_layer_step-th from step - 1.
  std::vector<int64_t> moe;
  if (text.has("moe_layers") && !text.has_null("moe_layers")) {
    FT_ASSIGN_OR_RETURN(moe, text.int_list_or_empty("moe_layers"));
  } else {
    FT_ASSIGN_OR_RETURN(const int64_t step, text.integer_or("interleave_moe_layer_step", 1));
    if (step <= 0) return invalid_argument("config.json: interleave_moe_layer_step must be positive");
    for (int64_t i = step - 1; i < L; i += step) moe.push_back(i);
  }
  for (int64_t i = 0; i < L; ++i) {
    if (std::find(moe.begin(), moe.end(), i) == moe.end()) cfg.mlp_only_layers.push_back(i);
  }

  // RoPE layers: no_rope_layers (1: RoPE), else all but every no_rope_layer_interval-th.
  std::vector<int64_t> rope;
  if (text.has("no_rope_layers") && !text.has_null("no_rope_layers")) {
    FT_ASSIGN_OR_RETURN(rope, text.int_list_or_empty("no_rope_layers"));
  }
  if (rope.empty()) {  // HF: an empty list falls back to the interval too
    FT_ASSIGN_OR_RETURN(const int64_t every, text.integer_or("no_rope_layer_interval", 4));
    if (every <= 0) return invalid_argument("config.json: no_rope_layer_interval must be positive");
    for (int64_t i = 0; i < L; ++i) rope.push_back((i + 1) % every != 0 ? 1 : 0);
  }
  if (int64_t(rope.size()) != L)
    return invalid_argument("config.json: no_rope_layers must have num_hidden_layers entries");
  cfg.nope_layers.clear();
  for (int64_t r : rope) cfg.nope_layers.push_back(r == 0);
  // Chunked layers: layer_types when given (model_config.cpp read them), else the RoPE layers.
  if (cfg.chunked_layers.empty()) {
    for (int64_t r : rope) cfg.chunked_layers.push_back(r != 0);
  }
  FT_ASSIGN_OR_RETURN(cfg.attention_chunk_size,
                      text.integer_or("attention_chunk_size", text.has_null("attention_chunk_size") ? 0 : 8192));
  if (cfg.attention_chunk_size < 0) return invalid_argument("config.json: attention_chunk_size must not be negative");

  FT_ASSIGN_OR_RETURN(cfg.attn_temperature_tuning, text.boolean_or("attn_temperature_tuning", true));
  FT_ASSIGN_OR_RETURN(cfg.floor_scale, text.number_or("floor_scale", 8192));
  FT_ASSIGN_OR_RETURN(cfg.attn_scale, text.number_or("attn_scale", 0.1));
  if (cfg.floor_scale <= 0) return invalid_argument("config.json: floor_scale must be positive");
  // Llama4TextL2Norm on the RoPE layers' q and k (use_qk_norm).
  FT_ASSIGN_OR_RETURN(cfg.use_qk_norm, text.boolean_or("use_qk_norm", true));
  cfg.rope_interleave = true;  // apply_rotary_emb rotates adjacent pairs (a complex view)
  return Status::ok();
}

}  // namespace ft::engine::config

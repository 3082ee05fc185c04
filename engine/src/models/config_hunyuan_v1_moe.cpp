// config.json fields of hunyuan_v1_moe with HunYuanMoEV1Config's defaults (transformers 5.x). Its
// attribute_map lets a saved config name the choices per token "num_experts_per_tok" and the expert
// count "num_local_experts"; both spellings are read. The release's own keys (moe_intermediate_size,
// num_shared_expert, use_mixed_mlp_moe, use_qk_norm, use_cla) describe what HF's code does with
// intermediate_size and always-on q/k norms, and are not read.
#include <cmath>

#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

Status parse_hunyuan_v1_moe(const Fields& text, ModelConfig& cfg) {
  cfg.norm_topk_prob = true;  // HunYuanMoEV1Gate always divides the chosen scores by their sum
  FT_ASSIGN_OR_RETURN(const int64_t experts, text.integer_or("num_experts", 1));
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("num_local_experts", experts));
  // moe_topk may be a list, one per layer: the engine has one top-k for the model.
  std::vector<int64_t> top_k = {1};
  if (text.has("num_experts_per_tok")) {
    FT_ASSIGN_OR_RETURN(top_k, text.int_list_or_empty("num_experts_per_tok"));
  }
  if (text.has("moe_topk")) {
    FT_ASSIGN_OR_RETURN(top_k, text.int_list_or_empty("moe_topk"));
  }
  if (top_k.empty()) return invalid_argument("config.json: moe_topk must not be an empty list");
  for (int64_t k : top_k) {
    if (k != top_k.front()) return unsupported("moe_topk differing between layers is not supported yet");
  }
  cfg.num_experts_per_tok = top_k.front();
  // The routed experts and the shared MLP are both intermediate_size wide; every layer is sparse.
  FT_ASSIGN_OR_RETURN(cfg.intermediate_size, text.integer_or("intermediate_size", 11008));
  cfg.moe_intermediate_size = cfg.intermediate_size;
  cfg.shared_expert_intermediate_size = cfg.intermediate_size;
  return Status::ok();
}

// HunYuanMoEV1RotaryEmbedding: rope_type "dynamic" with an "alpha" scales the base to
// theta * alpha^(head_dim / (head_dim - 2)) and the frequencies stay those at every position up to
// max_position_embeddings. Past it HF's dynamic_rope_update recomputes them for the sequence's
// length (plain dynamic NTK, which then differs from the keys already cached): not reproduced.
Status hunyuan_alpha_rope(const Fields& rope_dict, ModelConfig& cfg, std::string& rope_type) {
  if (rope_type != "dynamic" || !rope_dict.has("alpha")) return Status::ok();
  FT_ASSIGN_OR_RETURN(const double alpha, rope_dict.number_or("alpha", 1.0));
  if (alpha <= 0) return invalid_argument("config.json: the rope 'alpha' must be positive");
  if (cfg.head_dim <= 2) return invalid_argument("config.json: head_dim must exceed 2 for an NTK alpha");
  const double d = double(cfg.head_dim);
  cfg.rope_theta *= std::pow(alpha, d / (d - 2));
  rope_type = "default";
  return Status::ok();
}

}  // namespace ft::engine::config

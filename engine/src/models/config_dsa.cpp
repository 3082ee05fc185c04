// config.json fields of DeepSeek sparse attention (deepseek_v32, glm_moe_dsa), with the defaults of
// DeepseekV32Config and GlmMoeDsaConfig (transformers 5.x). The rest of these configs (latent
// attention, the DeepSeek-V3 router, mlp_layer_types) is read as deepseek_v3's and glm4_moe_lite's.
#include <algorithm>

#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {

bool is_dsa_family(ModelFamily family) {
  return family == ModelFamily::kDeepseekV32 || family == ModelFamily::kGlmMoeDsa;
}

namespace {

// GlmMoeDsaConfig.indexer_types: "full" layers run their own indexer, "shared" ones reuse the
// top-k of the full layer before them. Given, or from index_topk_pattern ("FSS..." or a list), or
// from index_topk_freq / index_skip_topk_offset. Only all-full stacks run here.
Status refuse_shared_indexers(const nlohmann::json& text_json, const Fields& text, const ModelConfig& cfg) {
  const auto refuse = [](const std::string& from) {
    return unsupported("glm_moe_dsa layers that share an earlier layer's top-k (" + from +
                       ") are not supported yet: only \"full\" indexer layers");
  };
  if (text.has("indexer_types")) {
    FT_ASSIGN_OR_RETURN(const std::vector<std::string> types, text.string_list_or_empty("indexer_types"));
    if (int64_t(types.size()) != cfg.num_hidden_layers) {
      return invalid_argument("config.json: indexer_types must have num_hidden_layers entries");
    }
    for (const std::string& t : types) {
      if (t == "shared") return refuse("indexer_types");
      if (t != "full") return invalid_argument("config.json: indexer_types entries must be \"full\" or \"shared\"");
    }
    return Status::ok();
  }
  if (text.has("index_topk_pattern")) {
    const nlohmann::json& p = text_json.at("index_topk_pattern");
    if (p.is_string()) {
      for (char c : p.get<std::string>()) {
        if (c == 'S') return refuse("index_topk_pattern");
        if (c != 'F') return invalid_argument("config.json: index_topk_pattern must hold 'F' and 'S' only");
      }
      return Status::ok();
    }
    FT_ASSIGN_OR_RETURN(const std::vector<std::string> types, text.string_list_or_empty("index_topk_pattern"));
    for (const std::string& t : types) {
      if (t != "full") return refuse("index_topk_pattern");
    }
    return Status::ok();
  }
  FT_ASSIGN_OR_RETURN(int64_t freq, text.integer_or("index_topk_freq", 1));
  FT_ASSIGN_OR_RETURN(const int64_t offset, text.integer_or("index_skip_topk_offset", 2));
  freq = std::max<int64_t>(freq, 1);
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    if (std::max<int64_t>(i - offset + 1, 0) % freq != 0) return refuse("index_topk_freq");
  }
  return Status::ok();
}

}  // namespace

Status parse_dsa(const nlohmann::json& text_json, const Fields& text, ModelConfig& cfg) {
  const bool glm5 = cfg.family == ModelFamily::kGlmMoeDsa;
  FT_ASSIGN_OR_RETURN(cfg.index_topk, text.integer_or("index_topk", 2048));
  FT_ASSIGN_OR_RETURN(cfg.index_head_dim, text.integer_or("index_head_dim", 128));
  FT_ASSIGN_OR_RETURN(cfg.index_n_heads, text.integer_or("index_n_heads", glm5 ? 32 : 64));
  // GlmMoeDsaIndexer rotates interleaved pairs, DeepseekV32Indexer NeoX halves (unlike its attention).
  cfg.index_rope_interleave = glm5;
  if (cfg.index_topk <= 0 || cfg.index_head_dim <= 0 || cfg.index_n_heads <= 0) {
    return invalid_argument("config.json: index_topk, index_head_dim and index_n_heads must be positive");
  }
  if (cfg.index_head_dim < cfg.qk_rope_head_dim) {
    return invalid_argument("config.json: index_head_dim must be at least qk_rope_head_dim (the indexer's RoPE dims)");
  }
  // The indexer's query is wq_b of the attention's q LoRA latent.
  if (cfg.q_lora_rank <= 0) return invalid_argument("config.json: the indexer needs a q_lora_rank");
  if (glm5) FT_RETURN_IF_ERROR(refuse_shared_indexers(text_json, text, cfg));
  return Status::ok();
}

}  // namespace ft::engine::config

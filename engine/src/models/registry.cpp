#include "models/registry.h"

#include "ft/engine/checkpoint.h"

namespace ft::engine {
namespace {

using Recipe = blocks::DecoderRecipe (*)(const Checkpoint&);

Recipe recipe_for(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen3Moe: return models::qwen3_moe;
    case ModelFamily::kQwen3Next: return models::qwen3_next;
    case ModelFamily::kQwen3_5Moe: return models::qwen3_5_moe;
    case ModelFamily::kMixtral: return models::mixtral;
    case ModelFamily::kQwen2Moe: return models::qwen2_moe;
    case ModelFamily::kOlmoe: return models::olmoe;
    case ModelFamily::kDeepseekV3:
      return models::deepseek_v3;
    case ModelFamily::kGlm4Moe:
      return models::glm4_moe;
    case ModelFamily::kDots1:
      return models::dots1;
    case ModelFamily::kErnie4_5Moe:
      return models::ernie4_5_moe;
    case ModelFamily::kMinimaxM2:
      return models::minimax_m2;
    case ModelFamily::kGptOss:
      return models::gpt_oss;
    case ModelFamily::kGlm4MoeLite:
      return models::glm4_moe_lite;
    case ModelFamily::kHunyuanV1Moe:
      return models::hunyuan_v1_moe;
    case ModelFamily::kExaoneMoe:
      return models::exaone_moe;
    case ModelFamily::kAfmoe:
      return models::afmoe;
    case ModelFamily::kLlama4Text:
      return models::llama4_text;
    case ModelFamily::kDeepseekV32:
      return models::deepseek_v32;
    case ModelFamily::kGlmMoeDsa:
      return models::glm_moe_dsa;
    case ModelFamily::kGemma4Text:
      return models::gemma4_text;
    case ModelFamily::kDeepseekV4:
      return models::deepseek_v4;
  }
  return nullptr;
}

}  // namespace

Result<std::unique_ptr<Model>> load_model(std::shared_ptr<const Checkpoint> checkpoint, const LoadOptions& options) {
  if (!checkpoint) return invalid_argument("load_model: no checkpoint");
  FT_ASSIGN_OR_RETURN(ModelConfig cfg,
                      parse_model_config(checkpoint->config_text(), checkpoint->generation_config_text()));
  FT_RETURN_IF_ERROR(family_built(cfg.family));
  Recipe recipe = recipe_for(cfg.family);
  if (!recipe) return internal_error(std::string("no recipe for ") + model_family_name(cfg.family));
  const blocks::DecoderRecipe r = recipe(*checkpoint);
  return blocks::load_decoder_model(std::move(checkpoint), cfg, r, options);
}

Result<std::unique_ptr<Model>> load_model(const std::filesystem::path& dir, const LoadOptions& options) {
  FT_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  return load_model(std::make_shared<const Checkpoint>(std::move(ckpt)), options);
}

}  // namespace ft::engine

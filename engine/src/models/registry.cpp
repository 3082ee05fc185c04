#include "models/registry.h"

#include "ft/engine/checkpoint.h"

namespace ft::engine {
namespace {

using Loader = Result<std::unique_ptr<Model>> (*)(const Checkpoint&, const ModelConfig&);

Loader loader_for(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen3Moe: return models::load_qwen3_moe;
    case ModelFamily::kQwen3Next: return models::load_qwen3_next;
    case ModelFamily::kQwen3_5Moe: return models::load_qwen3_5_moe;
  }
  return nullptr;
}

}  // namespace

Result<std::unique_ptr<Model>> load_model(const Checkpoint& checkpoint) {
  FT_ASSIGN_OR_RETURN(ModelConfig cfg,
                      parse_model_config(checkpoint.config_text(), checkpoint.generation_config_text()));
  Loader loader = loader_for(cfg.family);
  if (!loader) return internal_error(std::string("no loader for ") + model_family_name(cfg.family));
  return loader(checkpoint, cfg);
}

Result<std::unique_ptr<Model>> load_model(const std::filesystem::path& dir) {
  FT_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  return load_model(ckpt);
}

}  // namespace ft::engine

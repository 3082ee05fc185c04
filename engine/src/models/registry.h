// The architecture registry: one loader per family, each defined in its own file here. An explicit
// table (registry.cpp) rather than static self-registration, which a static library would drop.
#pragma once

#include <memory>

#include "ft/engine/model.h"

namespace ft::engine::models {

Result<std::unique_ptr<Model>> load_qwen3_moe(const Checkpoint& ckpt, const ModelConfig& cfg);
Result<std::unique_ptr<Model>> load_qwen3_next(const Checkpoint& ckpt, const ModelConfig& cfg);
Result<std::unique_ptr<Model>> load_qwen3_5_moe(const Checkpoint& ckpt, const ModelConfig& cfg);

}  // namespace ft::engine::models

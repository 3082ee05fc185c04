// The architecture registry: one loader per family, each defined in its own file here. An explicit
// table (registry.cpp) rather than static self-registration, which a static library would drop.
#pragma once

#include <memory>

#include "blocks/decoder.h"

namespace ft::engine::models {

// How each family's decoder is composed (its layers, tensor prefix and norms).
blocks::DecoderRecipe qwen3_moe(const Checkpoint& ckpt);
blocks::DecoderRecipe qwen3_next(const Checkpoint& ckpt);
blocks::DecoderRecipe qwen3_5_moe(const Checkpoint& ckpt);
blocks::DecoderRecipe mixtral(const Checkpoint& ckpt);
blocks::DecoderRecipe qwen2_moe(const Checkpoint& ckpt);
blocks::DecoderRecipe olmoe(const Checkpoint& ckpt);
blocks::DecoderRecipe deepseek_v3(const Checkpoint& ckpt);
blocks::DecoderRecipe glm4_moe(const Checkpoint& ckpt);
blocks::DecoderRecipe dots1(const Checkpoint& ckpt);
blocks::DecoderRecipe ernie4_5_moe(const Checkpoint& ckpt);
blocks::DecoderRecipe minimax_m2(const Checkpoint& ckpt);
blocks::DecoderRecipe gpt_oss(const Checkpoint& ckpt);
blocks::DecoderRecipe glm4_moe_lite(const Checkpoint& ckpt);
blocks::DecoderRecipe hunyuan_v1_moe(const Checkpoint& ckpt);
blocks::DecoderRecipe exaone_moe(const Checkpoint& ckpt);
blocks::DecoderRecipe afmoe(const Checkpoint& ckpt);
blocks::DecoderRecipe llama4_text(const Checkpoint& ckpt);
blocks::DecoderRecipe deepseek_v32(const Checkpoint& ckpt);
blocks::DecoderRecipe glm_moe_dsa(const Checkpoint& ckpt);
blocks::DecoderRecipe gemma4_text(const Checkpoint& ckpt);
blocks::DecoderRecipe deepseek_v4(const Checkpoint& ckpt);

}  // namespace ft::engine::models

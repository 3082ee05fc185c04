// Layer structure of a RandomCheckpointSpec, shared by its tensor list and its config writer.
#pragma once

#include <cstdint>
#include <string>

#include "ft/engine/random_checkpoint.h"

namespace ft::engine {

// qwen3_next and qwen3_5_moe: linear + full attention, zero-centred norms, gated attention.
bool is_hybrid(const RandomCheckpointSpec& s);
// Whether the MoE blocks have a shared expert (the hybrids and qwen2_moe).
bool has_shared_expert(const RandomCheckpointSpec& s);
bool is_linear_layer(const RandomCheckpointSpec& s, int64_t layer);
// deepseek_v3, glm4_moe, dots1 and glm4_moe_lite: sigmoid router with a correction bias, ungated
// shared experts, first_k_dense_replace dense layers (glm4_moe_lite writes them as mlp_layer_types).
bool is_sigmoid_moe(const RandomCheckpointSpec& s);
// deepseek_v3 and glm4_moe_lite: multi-head latent attention.
bool is_mla(const RandomCheckpointSpec& s);
bool is_moe_layer(const RandomCheckpointSpec& s, int64_t layer);
// gemma4_text's layer kinds: sliding except every full_attention_interval-th and the last.
bool is_gemma4_full_layer(const RandomCheckpointSpec& s, int64_t layer);
// deepseek_v4: layer `layer`'s attention kind as config.json names it, and the sizes whose 0 in the
// spec means a default (random_checkpoint.h).
std::string v4_layer_type(const RandomCheckpointSpec& s, int64_t layer);
int64_t v4_q_lora_rank(const RandomCheckpointSpec& s);
int64_t v4_sliding_window(const RandomCheckpointSpec& s);
double v4_partial_rotary(const RandomCheckpointSpec& s);

}  // namespace ft::engine

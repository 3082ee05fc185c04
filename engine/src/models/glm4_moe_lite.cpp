// GLM-4.7-Flash (model_type "glm4_moe_lite", Glm4MoeLiteForCausalLM): DeepSeek-V3's architecture at
// a smaller size. Multi-head latent attention in every layer (mla_attention_block.h: q_a_proj ->
// q_a_layernorm -> q_b_proj, the latent through kv_a_layernorm and kv_b_proj, RoPE on interleaved
// pairs of the rope dims when rope_interleave, else NeoX halves; softmax scale
// qk_head_dim^-0.5, times mscale^2 under YaRN with mscale_all_dim); the feed-forward is a dense
// SwiGLU on the layers mlp_layer_types calls "dense" (the first, by default) and elsewhere the
// DeepSeek-V3 router (sigmoid scores, chosen with e_score_correction_bias among the topk_group best
// of n_group groups, renormalised, times routed_scaling_factor) with ungated shared experts
// (mlp.shared_experts.*, moe_intermediate_size * n_shared_experts wide). The multi-token-prediction
// layer past num_hidden_layers is not loaded (HF ignores it too).
// The layers are deepseek_v3's (deepseek_v3.cpp); only the config differs (config_sigmoid_moe.cpp).
#include "models/registry.h"

namespace ft::engine::models {

blocks::DecoderRecipe glm4_moe_lite(const Checkpoint& ckpt) { return deepseek_v3(ckpt); }

}  // namespace ft::engine::models

// GLM-5 (model_type "glm_moe_dsa", GlmMoeDsaForCausalLM): GLM-4.7-Flash's layout (glm4_moe_lite.cpp)
// at a larger size with DeepSeek sparse attention: every layer's latent attention (interleaved rope
// pairs) has a lightning indexer (dsa_indexer.h) whose rope also pairs interleaved dims, so each
// query attends to only the index_topk earlier positions it scores highest. Dense SwiGLU layers
// where mlp_layer_types says (the first first_k_dense_replace by default), elsewhere the
// DeepSeek-V3 router with ungated shared experts. Layers that reuse an earlier layer's top-k
// (indexer_types "shared") are refused by the config parser. The multi-token-prediction layer past
// num_hidden_layers is not loaded (HF ignores it too).
// The layers are deepseek_v32's (deepseek_v32.cpp: the indexer's rope layout comes from the config).
#include "models/registry.h"

namespace ft::engine::models {

blocks::DecoderRecipe glm_moe_dsa(const Checkpoint& ckpt) { return deepseek_v32(ckpt); }

}  // namespace ft::engine::models

// The released models a synthetic checkpoint can imitate: their config.json values as specs.
#include "ft/engine/synthetic_model.h"

namespace ft::engine {
namespace {

// Qwen/Qwen3-30B-A3B (config.json of the HF release).
RandomCheckpointSpec qwen3_30b_a3b() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kQwen3Moe;
  s.vocab_size = 151936;
  s.hidden_size = 2048;
  s.num_layers = 48;
  s.num_heads = 32;
  s.num_kv_heads = 4;
  s.head_dim = 128;
  s.intermediate_size = 6144;
  s.num_experts = 128;
  s.top_k = 8;
  s.moe_intermediate_size = 768;
  s.decoder_sparse_step = 1;
  s.mlp_only_layers = {};
  s.norm_topk_prob = true;
  s.attention_bias = false;
  s.tie_word_embeddings = false;
  s.max_position_embeddings = 40960;
  s.rope_theta = 1e6;
  s.fused_experts = false;     // model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight
  s.bos_token_id = 151643;     // <|endoftext|>
  s.eos_token_ids = {151645};  // <|im_end|>
  return s;
}

// Qwen3.6-35B-A3B (the Qwen3.5-MoE architecture: the qwen3_5_moe multimodal wrapper, text tensors
// under model.language_model., fused expert tensors). The vision tower is not written.
RandomCheckpointSpec qwen3_6_35b_a3b() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kQwen3_5Moe;
  s.vocab_size = 248320;
  s.hidden_size = 2048;
  s.num_layers = 40;
  s.full_attention_interval = 4;  // layers 3, 7, ... are full attention, the rest Gated DeltaNet
  s.num_heads = 16;
  s.num_kv_heads = 2;
  s.head_dim = 256;
  s.partial_rotary_factor = 0.25;
  s.mrope_section = {11, 11, 10};  // over the 32 rotary frequency pairs
  s.rope_theta = 1e7;
  s.max_position_embeddings = 262144;
  s.linear_num_key_heads = 16;
  s.linear_num_value_heads = 32;
  s.linear_key_head_dim = 128;
  s.linear_value_head_dim = 128;
  s.linear_conv_kernel_dim = 4;
  s.num_experts = 256;
  s.top_k = 8;
  s.moe_intermediate_size = 512;
  s.shared_expert_intermediate_size = 512;
  s.fused_experts = true;  // mlp.experts.gate_up_proj [E, 2 * inter, hidden], mlp.experts.down_proj
  s.tie_word_embeddings = false;
  s.bos_token_id = 248044;
  s.eos_token_ids = {248044};  // <|endoftext|>
  return s;
}

// deepseek-ai/DeepSeek-V3 (and R1, which shares its config): latent attention with the q LoRA,
// YaRN x40 over 4K, 256 experts in 8 groups (top-4 groups, top-8 experts), one shared expert, the
// first 3 layers dense. The released weights are FP8 with block scales; these are bf16.
RandomCheckpointSpec deepseek_v3() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kDeepseekV3;
  s.vocab_size = 129280;
  s.hidden_size = 7168;
  s.num_layers = 61;
  s.num_heads = 128;
  s.num_kv_heads = 128;
  s.intermediate_size = 18432;
  s.moe_intermediate_size = 2048;
  s.num_experts = 256;
  s.top_k = 8;
  s.n_group = 8;
  s.topk_group = 4;
  s.routed_scaling_factor = 2.5;
  s.n_shared_experts = 1;
  s.first_k_dense_replace = 3;
  s.norm_topk_prob = true;
  s.q_lora_rank = 1536;
  s.kv_lora_rank = 512;
  s.qk_nope_head_dim = 128;
  s.qk_rope_head_dim = 64;
  s.v_head_dim = 128;
  s.rope_interleave = true;
  s.rope_theta = 10000;
  s.max_position_embeddings = 163840;
  s.yarn_factor = 40;
  s.yarn_original_max_position_embeddings = 4096;
  s.yarn_mscale = 1.0;
  s.yarn_mscale_all_dim = 1.0;
  s.fused_experts = false;  // model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight
  s.bos_token_id = 0;
  s.eos_token_ids = {1};
  return s;
}

// zai-org/GLM-4.5-Air: GQA (96 query heads, 8 kv heads of 128) with q/k/v biases, RoPE on half of
// each head, 128 experts top-8 with one shared expert, layer 0 dense.
RandomCheckpointSpec glm4_5_air() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kGlm4Moe;
  s.vocab_size = 151552;
  s.hidden_size = 4096;
  s.num_layers = 46;
  s.num_heads = 96;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.partial_rotary_factor = 0.5;
  s.intermediate_size = 10944;
  s.moe_intermediate_size = 1408;
  s.num_experts = 128;
  s.top_k = 8;
  s.n_group = 1;
  s.topk_group = 1;
  s.routed_scaling_factor = 1.0;
  s.n_shared_experts = 1;
  s.first_k_dense_replace = 1;
  s.norm_topk_prob = true;
  s.attention_bias = true;
  s.use_qk_norm = false;
  s.rope_theta = 1000000;
  s.max_position_embeddings = 131072;
  s.fused_experts = false;
  s.bos_token_id = 0;
  s.eos_token_ids = {151329, 151336, 151338};
  return s;
}

// baidu/ERNIE-4.5-21B-A3B (Ernie4_5_MoeConfig's defaults are this model): GQA with interleaved
// RoPE, 64 experts top-6 with 2 shared experts, layer 0 dense, tied embeddings.
RandomCheckpointSpec ernie4_5_21b_a3b() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kErnie4_5Moe;
  s.vocab_size = 103424;
  s.hidden_size = 2560;
  s.num_layers = 28;
  s.num_heads = 20;
  s.num_kv_heads = 4;
  s.head_dim = 128;
  s.intermediate_size = 12288;
  s.moe_intermediate_size = 1536;
  s.num_experts = 64;
  s.top_k = 6;
  s.n_shared_experts = 2;
  s.first_k_dense_replace = 1;  // moe_layer_start_index
  s.moe_layer_end_index = -1;
  s.decoder_sparse_step = 1;  // moe_layer_interval
  s.tie_word_embeddings = true;
  s.rope_theta = 500000;
  s.max_position_embeddings = 131072;
  s.fused_experts = false;
  s.bos_token_id = 1;
  s.eos_token_ids = {2};
  return s;
}

// MiniMaxAI/MiniMax-M2: 62 layers of GQA (48 query heads, 8 kv heads of 128, rotary_dim 64) and
// 256 experts top-8, 1536 wide. The released weights are FP8; these are bf16.
RandomCheckpointSpec minimax_m2() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kMinimaxM2;
  s.vocab_size = 200064;
  s.hidden_size = 3072;
  s.num_layers = 62;
  s.num_heads = 48;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.partial_rotary_factor = 0.5;
  s.moe_intermediate_size = 1536;
  s.num_experts = 256;
  s.top_k = 8;
  s.rope_theta = 5000000;
  s.max_position_embeddings = 196608;
  s.fused_experts = false;  // block_sparse_moe.experts.E.w1/w2/w3
  s.bos_token_id = 200034;
  s.eos_token_ids = {200020};
  return s;
}

// openai/gpt-oss-20b: 24 layers of GQA (64 query heads, 8 kv heads of 64) with sinks, sliding
// window 128 on every other layer, YaRN x32; 32 experts top-4, 2880 wide, with biases. The released
// experts are MXFP4; these are bf16, in HF's bf16 layout.
RandomCheckpointSpec gpt_oss_20b() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kGptOss;
  s.vocab_size = 201088;
  s.hidden_size = 2880;
  s.num_layers = 24;
  s.num_heads = 64;
  s.num_kv_heads = 8;
  s.head_dim = 64;
  s.moe_intermediate_size = 2880;
  s.num_experts = 32;
  s.top_k = 4;
  s.rope_theta = 150000;
  s.yarn_factor = 32;
  s.yarn_original_max_position_embeddings = 4096;
  s.max_position_embeddings = 131072;
  s.sliding_window = 128;
  s.bos_token_id = 199998;
  s.eos_token_ids = {200002, 199999, 200012};
  return s;
}

// meta-llama/Llama-4-Scout-17B-16E (its text model): 48 layers of GQA (40 query heads, 8 kv heads
// of 128), every fourth layer without RoPE and the others chunked (8192); every layer a top-1 MoE
// of 16 experts 8192 wide plus a shared expert. Written as Llama4ForCausalLM, bf16; Llama 3 RoPE
// scaling left out (random weights: positions up to the original context).
RandomCheckpointSpec llama4_scout() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kLlama4Text;
  s.vocab_size = 202048;
  s.hidden_size = 5120;
  s.num_layers = 48;
  s.num_heads = 40;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.intermediate_size = 16384;  // intermediate_size_mlp: no dense layer in Scout
  s.moe_intermediate_size = 8192;
  s.num_experts = 16;
  s.top_k = 1;
  s.full_attention_interval = 4;  // no_rope_layer_interval
  s.sliding_window = 8192;        // attention_chunk_size
  s.rope_theta = 500000;
  s.max_position_embeddings = 10485760;
  s.bos_token_id = 200000;
  s.eos_token_ids = {200001, 200007, 200008};
  return s;
}

RandomCheckpointSpec spec_of(SyntheticLike like) {
  switch (like) {
    case SyntheticLike::kQwen3_30B_A3B:
      return qwen3_30b_a3b();
    case SyntheticLike::kQwen3_6_35B_A3B:
      return qwen3_6_35b_a3b();
    case SyntheticLike::kDeepseekV3:
      return deepseek_v3();
    case SyntheticLike::kGlm4_5Air:
      return glm4_5_air();
    case SyntheticLike::kErnie4_5_21B_A3B:
      return ernie4_5_21b_a3b();
    case SyntheticLike::kMinimaxM2:
      return minimax_m2();
    case SyntheticLike::kGptOss20B:
      return gpt_oss_20b();
    case SyntheticLike::kLlama4Scout:
      return llama4_scout();
  }
  return qwen3_30b_a3b();
}

}  // namespace

const char* synthetic_like_name(SyntheticLike like) {
  switch (like) {
    case SyntheticLike::kQwen3_30B_A3B: return "qwen3-30b-a3b";
    case SyntheticLike::kQwen3_6_35B_A3B: return "qwen3.6-35b-a3b";
    case SyntheticLike::kDeepseekV3:
      return "deepseek-v3";
    case SyntheticLike::kGlm4_5Air:
      return "glm-4.5-air";
    case SyntheticLike::kErnie4_5_21B_A3B:
      return "ernie-4.5-21b-a3b";
    case SyntheticLike::kMinimaxM2:
      return "minimax-m2";
    case SyntheticLike::kGptOss20B:
      return "gpt-oss-20b";
    case SyntheticLike::kLlama4Scout:
      return "llama4-scout";
  }
  return "?";
}

std::vector<SyntheticLike> all_synthetic_likes() {
  return {SyntheticLike::kQwen3_30B_A3B, SyntheticLike::kQwen3_6_35B_A3B,  SyntheticLike::kDeepseekV3,
          SyntheticLike::kGlm4_5Air,     SyntheticLike::kErnie4_5_21B_A3B, SyntheticLike::kMinimaxM2,
          SyntheticLike::kGptOss20B,     SyntheticLike::kLlama4Scout};
}

Result<SyntheticLike> parse_synthetic_like(std::string_view name) {
  std::string known;
  for (SyntheticLike like : all_synthetic_likes()) {
    if (name == synthetic_like_name(like)) return like;
    known += std::string(known.empty() ? "" : ", ") + synthetic_like_name(like);
  }
  return invalid_argument("unknown model '" + std::string(name) + "' (known: " + known + ")");
}

Result<RandomCheckpointSpec> synthetic_model_spec(SyntheticLike like, int64_t layers) {
  RandomCheckpointSpec s = spec_of(like);
  if (layers < 0 || layers > s.num_layers) {
    return invalid_argument(std::string(synthetic_like_name(like)) + " has " + std::to_string(s.num_layers) +
                            " layers; cannot write " + std::to_string(layers));
  }
  if (layers > 0) s.num_layers = layers;
  return s;
}

}  // namespace ft::engine

// Writes a random-weight checkpoint in the real HF layout of a supported family (config.json,
// generation_config.json, model.safetensors in bf16): the tiny models the tests run in CI without
// fixtures, and the demo model of `freetoken make-demo-model`. Deterministic for a given spec and
// seed on every platform (own RNG, no std:: distributions).
//
// The plan (tensor names, shapes and init rules; the config files) is public so that writers of
// other sizes (synthetic_model.h streams full-size checkpoints) lay out exactly the same checkpoint.
//
// Initialisation: matrices N(0, 1/fan_in) so activations keep unit scale through the layers (an
// HF-style 0.02 init makes every output near zero and lets bugs pass); norm weights 1 + N(0, 0.1)
// (or N(0, 0.1) for zero-centred norms); DeltaNet A_log = log U(1, 8), dt_bias U(0.5, 1.5).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/model_config.h"

namespace ft::engine {

struct RandomCheckpointSpec {
  ModelFamily family = ModelFamily::kQwen3Moe;
  int64_t vocab_size = 256;
  int64_t hidden_size = 64;
  int64_t num_layers = 4;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 16;
  int64_t intermediate_size = 96;  // dense MLP layers (mlp_only_layers / decoder_sparse_step)
  int64_t num_experts = 8;
  int64_t top_k = 2;
  int64_t moe_intermediate_size = 32;  // the experts' width (config.json's intermediate_size for
                                       // mixtral and olmoe, which have no dense layers)
  int64_t shared_expert_intermediate_size = 48;  // qwen3_next / qwen3_5_moe / qwen2_moe only (the
                                                 // sigmoid-routed families: n_shared_experts)
  int64_t decoder_sparse_step = 1;               // qwen3_moe / qwen3_next / qwen2_moe only
  std::vector<int64_t> mlp_only_layers;          // qwen3_moe / qwen3_next / qwen2_moe only
  bool norm_topk_prob = true;                    // not mixtral's (it always renormalises)
  bool attention_bias = false;                   // q/k/v/o biases: qwen3_moe, olmoe, dots1; deepseek_v3's
                                                 // q_a/kv_a/o; glm4_moe's q/k/v (qwen2_moe always has
                                                 // q/k/v biases, the others none)
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 32768;
  double rope_theta = 1000000.0;
  double partial_rotary_factor = 0;              // 0: the family default (1.0 or 0.25)
  std::vector<int64_t> mrope_section;            // qwen3_5_moe only; empty: split the rotary half in 3
  // YaRN RoPE (rope_type "yarn") when yarn_factor > 0: factor, the pre-training context and
  // DeepSeek's mscale / mscale_all_dim (0: not written).
  double yarn_factor = 0;
  int64_t yarn_original_max_position_embeddings = 4096;
  double yarn_mscale = 0, yarn_mscale_all_dim = 0;
  // DeepSeek-V3-style MoE (deepseek_v3 / glm4_moe / dots1): dense layers below first_k_dense_replace, the
  // router's expert groups and scaling, ungated shared experts n_shared_experts *
  // moe_intermediate_size wide.
  int64_t first_k_dense_replace = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  int64_t n_shared_experts = 1;
  bool use_qk_norm = false;  // glm4_moe
  // ernie4_5_moe: MoE layers are [first_k_dense_replace (moe_layer_start_index), moe_layer_end_index
  // (-1: the last)] with (i + 1) % decoder_sparse_step (moe_layer_interval) == 0, n_shared_experts.
  int64_t moe_layer_end_index = -1;
  // Multi-head latent attention (deepseek_v3). num_kv_heads is written equal to num_heads.
  int64_t q_lora_rank = 0;  // 0: q_proj (config null)
  int64_t kv_lora_rank = 32;
  int64_t qk_nope_head_dim = 16;
  int64_t qk_rope_head_dim = 16;
  int64_t v_head_dim = 16;
  bool rope_interleave = true;
  // DeepSeek sparse attention's indexer (deepseek_v32, glm_moe_dsa; they need a q_lora_rank).
  int64_t index_topk = 8;
  int64_t index_head_dim = 32;
  int64_t index_n_heads = 2;
  // Linear attention (qwen3_next / qwen3_5_moe).
  int64_t full_attention_interval = 4;
  int64_t linear_num_key_heads = 2;
  int64_t linear_num_value_heads = 4;
  int64_t linear_key_head_dim = 16;
  int64_t linear_value_head_dim = 16;
  int64_t linear_conv_kernel_dim = 4;
  // gpt_oss: the window of its sliding layers (every other one, from layer 0; 0: none); exaone_moe
  // and afmoe alike; llama4_text: its attention_chunk_size (0: null).
  int64_t sliding_window = 0;
  // llama4_text: the attention temperature of its layers without RoPE (every
  // full_attention_interval-th); MoE layers are those not in mlp_only_layers, routed top-1.
  double floor_scale = 8192, attn_scale = 0.1;
  // gemma4_text: every full_attention_interval-th layer (and the last) full attention, its heads
  // global_head_dim wide and global_kv_heads of them, its keys also the values with
  // attention_k_eq_v; the others slide over sliding_window; final logits softcapped (0: none).
  int64_t global_head_dim = 64;
  int64_t global_kv_heads = 1;
  bool attention_k_eq_v = true;
  double final_logit_softcapping = 0;
  // deepseek_v4: each layer's attention kind ("sliding_attention", "compressed_sparse_attention",
  // "heavily_compressed_attention"; empty: a sliding layer, then CSA and HCA in turn) and the two
  // compress rates; the first v4_hash_layers layers route by token id (the rest by score); hc_mult
  // residual streams; the grouped output projection; the experts' clamp and the router's scoring.
  // It also reads q_lora_rank and sliding_window (0: hidden_size / 2 and 16), the index_* sizes,
  // partial_rotary_factor (0: 0.25), yarn_* (the compress rope's), routed_scaling_factor.
  // v4_released_names: the releases' tensor names (no "model." prefix, embed.weight, hc_head_*,
  // attn.kv_norm) rather than those HF 5.17's save_pretrained writes.
  std::vector<std::string> v4_layer_types;
  int64_t v4_csa_rate = 4, v4_hca_rate = 8;
  int64_t v4_hash_layers = 1;
  int64_t hc_mult = 4;
  int64_t o_groups = 2, o_lora_rank = 16;
  double swiglu_limit = 1.5;
  std::string scoring_func = "sqrtsoftplus";
  bool v4_released_names = false;
  // Expert tensors: per expert (mlp.experts.N.*_proj.weight; mixtral: block_sparse_moe.experts.N.w1/w2/w3)
  // or fused 3-D (mlp.experts.gate_up_proj / down_proj).
  bool fused_experts = false;
  std::vector<int32_t> eos_token_ids;  // empty: {vocab_size - 1}
  int32_t bos_token_id = 0;
  uint64_t seed = 0;
  // Marks the checkpoint as a demo: a README.md and a "freetoken_demo" note in config.json saying
  // the weights are random.
  bool demo = false;
};

// kInvalidArgument when a size the layout depends on is not positive.
Status check_random_checkpoint_spec(const RandomCheckpointSpec& spec);

// How a tensor's values are drawn (the rules above), before rounding to bf16.
struct TensorInit {
  enum class Kind {
    kNormal,       // offset + scale * N(0, 1)
    kUniform,      // U(lo, hi)
    kLogUniform,   // log U(lo, hi)
    kExpertTable,  // I64, not bf16: each row of a [rows, k] table k distinct ids of [0, hi) (DeepSeek-V4's
                   // hash routing; the full-size synthetic writers take no family that has one)
  };
  Kind kind = Kind::kNormal;
  double scale = 1.0, offset = 0.0;  // kNormal
  double lo = 0.0, hi = 1.0;         // kUniform, kLogUniform
};

// One tensor of the checkpoint a spec describes (stored as bf16; an expert table as I64).
struct PlannedTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorInit init;

  int64_t numel() const;
};

// Every tensor of the spec's checkpoint in the model's order (embeddings, layer by layer, final
// norm, lm_head): the one place that decides names, shapes and init rules.
std::vector<PlannedTensor> random_checkpoint_tensors(const RandomCheckpointSpec& spec);

// config.json (with a "freetoken_demo" note when spec.demo, plus `notes` as extra string keys) and
// generation_config.json, as written beside the weights.
std::string random_checkpoint_config_json(const RandomCheckpointSpec& spec,
                                          const std::vector<std::pair<std::string, std::string>>& notes = {});
std::string random_checkpoint_generation_config_json(const RandomCheckpointSpec& spec);

// Creates `dir` if needed and writes the three files into it.
Status write_random_checkpoint(const std::filesystem::path& dir, const RandomCheckpointSpec& spec);

// The `freetoken make-demo-model` spec: qwen3_5_moe, hidden 128, 8 layers (6 linear + 2 full),
// 16 experts top-4, vocab 151936 (the Qwen3 tokenizer's), ~80 MB.
RandomCheckpointSpec demo_model_spec();

}  // namespace ft::engine

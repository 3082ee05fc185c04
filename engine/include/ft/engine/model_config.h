// The model hyper-parameters the engine needs, parsed from an HF checkpoint's config.json (and the
// stop tokens from generation_config.json). One flat struct for every supported family; fields a
// family does not use keep their zero defaults.
//
// Handles the layouts seen in published checkpoints:
//  - multimodal wrappers (qwen3_5_moe) that nest the text model under "text_config";
//  - RoPE given as "rope_parameters" (transformers 5.x) or as the legacy top-level "rope_theta",
//    "rope_scaling" and "partial_rotary_factor" keys;
//  - "layer_types" given explicitly (with the legacy names "attention"/"mamba") or derived from
//    "full_attention_interval", as the HF config classes do;
//  - each family's own name for a quantity, mapped to one field (Mixtral's and OLMoE's experts are
//    "intermediate_size" wide; Mixtral counts them in "num_local_experts").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"

namespace ft::engine {

// The model families this engine implements; each has one file in engine/src/models/.
enum class ModelFamily {
  kQwen3Moe,
  kQwen3Next,
  kQwen3_5Moe,
  kMixtral,
  kQwen2Moe,
  kOlmoe,
  kDeepseekV3,
  kGlm4Moe,
  kDots1,
  kErnie4_5Moe,
  kMinimaxM2,
  kGptOss,
  kGlm4MoeLite,
  kHunyuanV1Moe,
  kExaoneMoe,
  kAfmoe,
  kLlama4Text,
  kDeepseekV32,
  kGlmMoeDsa,
  kGemma4Text,
  kDeepseekV4,
};
// "qwen3_moe", "qwen3_next", "qwen3_5_moe", "mixtral", "qwen2_moe", "olmoe", "deepseek_v3",
// "glm4_moe", "dots1", "ernie4_5_moe", "minimax_m2", "gpt_oss", "glm4_moe_lite", "hunyuan_v1_moe",
// "exaone_moe", "afmoe", "llama4_text", "deepseek_v32", "glm_moe_dsa", "gemma4_text", "deepseek_v4"
// (the HF model_type).
const char* model_family_name(ModelFamily family);
// Every family load_model builds, in the order above (the tests and tools that walk this list load
// each family).
const std::vector<ModelFamily>& model_families();
// Ok when load_model builds the family (one model_families() lists), else kUnsupported saying why
// ("<family>: config parsed; the family's blocks are not built yet"): a family whose config is
// parsed before its blocks exist is not yet one that runs.
Status family_built(ModelFamily family);
// Whether the family mixes linear-attention (Gated DeltaNet) layers with full attention.
bool is_hybrid_family(ModelFamily family);

// The token mixer of one decoder layer.
enum class LayerKind { kFullAttention, kLinearAttention };

// DeepSeek-V4's attention of one layer (HF layer_types). Every kind attends the sliding window of the
// sequence's own kv rows; CSA ("compressed_sparse_attention") adds the entries its indexer picks of
// those compressed every csa_rate tokens, HCA ("heavily_compressed_attention") every visible entry
// compressed every hca_rate tokens; "sliding_attention" has no compressor.
enum class V4AttentionKind { kSliding, kCsa, kHca };
// DeepSeek-V4's router of one layer (HF mlp_layer_types): "hash_moe" takes its experts from a table
// indexed by token id, "moe" the top-k by score plus a correction bias.
enum class V4RouterKind { kHashMoe, kMoe };

struct ModelConfig {
  ModelFamily family = ModelFamily::kQwen3Moe;
  std::string model_type;    // top-level "model_type", e.g. "qwen3_5_moe"
  std::string architecture;  // architectures[0], e.g. "Qwen3_5MoeForConditionalGeneration"; may be ""
  bool nested_text_config = false;  // the text model came from "text_config"

  // Transformer trunk.
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // GQA: query heads per kv head = heads / kv_heads
  int64_t head_dim = 0;             // "head_dim", or hidden_size / num_attention_heads
  int64_t intermediate_size = 0;    // dense (non-MoE) MLP width (Mixtral / OLMoE: the experts' width)
  float rms_norm_eps = 1e-6f;
  bool attention_bias = false;     // q/k/v/o projections carry biases
  bool qkv_bias = false;           // only q/k/v do (Qwen2-MoE's "qkv_bias")
  bool tie_word_embeddings = false;
  std::vector<LayerKind> layer_types;  // one per layer
  // Sliding-window attention (gpt_oss, exaone_moe, afmoe): layers whose layer_types entry is
  // "sliding_attention" attend within the last sliding_window keys (full attention otherwise).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // one per layer; empty: none slide
  bool is_sliding_layer(int64_t layer) const {
    return layer >= 0 && std::size_t(layer) < sliding_layers.size() && sliding_layers[std::size_t(layer)];
  }

  // RoPE. rope_type "default" and "yarn" are implemented; mRoPE ("mrope_section") is accepted
  // because for text-only input its three position ids are equal and it reduces to plain RoPE.
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0;
  std::string rope_type = "default";
  std::vector<int64_t> mrope_section;  // informational
  // YaRN ("yarn"): the rope dict's factor, beta_fast, beta_slow, original_max_position_embeddings
  // (default max_position_embeddings), truncate, and the attention factor on cos/sin (the dict's
  // attention_factor, else derived from factor, mscale and mscale_all_dim as HF does).
  struct Yarn {
    double factor = 0;
    double beta_fast = 32, beta_slow = 1;
    int64_t original_max_position_embeddings = 0;
    bool truncate = true;
    double mscale = 0, mscale_all_dim = 0;  // 0: not given
    double attention_factor = 1.0;
    bool attention_given = false;  // attention_factor came from the config
  } yarn;
  // Llama 3's scaling ("llama3"): the rope dict's factor, low_freq_factor, high_freq_factor,
  // original_max_position_embeddings.
  struct Llama3Rope {
    double factor = 0;
    double low_freq_factor = 1, high_freq_factor = 4;
    int64_t original_max_position_embeddings = 8192;
  } llama3;
  int64_t max_position_embeddings = 0;  // 0: not given
  // The dims RoPE rotates: head_dim * partial_rotary_factor, or MLA's qk_rope_head_dim.
  int64_t rotary_dim() const {
    return qk_rope_head_dim > 0 ? qk_rope_head_dim : int64_t(double(head_dim) * partial_rotary_factor);
  }

  // Multi-head latent attention (deepseek_v3, glm4_moe_lite). head_dim is then what the KV pages hold per head:
  // max(qk_nope_head_dim + qk_rope_head_dim, v_head_dim) (keys and values expanded per head), and
  // num_key_value_heads equals num_attention_heads.
  bool mla = false;
  int64_t q_lora_rank = 0;  // 0: a plain q_proj (config null)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = false;  // rotate adjacent pairs of the rope dims (DeepSeek's checkpoints, ERNIE)
  bool use_qk_norm = true;       // glm4_moe's use_qk_norm (the Qwen3 families always have q/k norms)

  // DeepSeek sparse attention (deepseek_v32, glm_moe_dsa): a lightning indexer beside each latent
  // attention picks, per query, the index_topk earlier positions its attention sees. index_topk 0:
  // none. The indexer's RoPE pairs interleaved dims (GLM) or NeoX halves (DeepSeek-V3.2).
  int64_t index_topk = 0;
  int64_t index_head_dim = 0;
  int64_t index_n_heads = 0;
  bool index_rope_interleave = false;

  // MoE.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;  // the routed experts' width (Mixtral / OLMoE: intermediate_size)
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;  // dense layers (glm4_moe_lite: the "dense" of mlp_layer_types)
  int64_t first_k_dense_replace = 0;  // layers [0, k) are dense (deepseek_v3, glm4_moe; ernie4_5_moe's
                                      // moe_layer_start_index)
  int64_t last_moe_layer = -1;        // -1: none; else layers past it are dense (moe_layer_end_index)
  // DeepSeek-V3-style routers (deepseek_v3, glm4_moe, dots1, glm4_moe_lite; minimax_m2 without
  // groups or shared experts): sigmoid scores, chosen with
  // e_score_correction_bias among the topk_group best of n_group expert groups, weights times
  // routed_scaling_factor; the shared experts (moe_intermediate_size * n_shared_experts wide, in
  // shared_expert_intermediate_size) are added without a gate.
  bool sigmoid_router = false;
  // ernie4_5_moe: softmax scores, chosen with the correction bias (moe_statics), renormalised, and
  // ungated shared experts.
  bool biased_softmax_router = false;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;

  // Llama 4 (llama4_text): "chunked_attention" layers see only their attention_chunk_size chunk;
  // layers without RoPE (no_rope_layers 0) scale their queries by the attention temperature
  // (attn_temperature_tuning: floor_scale, attn_scale); one layer list each, empty elsewhere.
  int64_t attention_chunk_size = 0;
  std::vector<bool> chunked_layers;
  std::vector<bool> nope_layers;
  bool attn_temperature_tuning = false;
  double floor_scale = 8192, attn_scale = 0.1;
  bool is_chunked_layer(int64_t layer) const {
    return layer >= 0 && std::size_t(layer) < chunked_layers.size() && chunked_layers[std::size_t(layer)];
  }
  bool is_nope_layer(int64_t layer) const {
    return layer >= 0 && std::size_t(layer) < nope_layers.size() && nope_layers[std::size_t(layer)];
  }

  // Gemma 4 (gemma4_text): full-attention layers have heads of their own shape (per_layer_config,
  // or global_head_dim and num_global_key_value_heads), their key projection also gives the values
  // (attention_k_eq_v) and their RoPE is its own (full_rope: proportional, or default); q/k/v are
  // RMS-normed per head and attention is unscaled; embeddings are scaled by sqrt(hidden_size)
  // (embedding_scale); the final logits are softcapped; a GeGLU MLP runs beside the MoE in every
  // layer (parallel_moe: enable_moe_block), and each layer's output is scaled by its layer_scalar.
  std::vector<int64_t> layer_head_dims;  // one per layer, 0: head_dim
  std::vector<int64_t> layer_kv_heads;   // one per layer, 0: num_key_value_heads
  int64_t attention_head_dim(int64_t layer) const {
    return std::size_t(layer) < layer_head_dims.size() && layer_head_dims[std::size_t(layer)]
               ? layer_head_dims[std::size_t(layer)]
               : head_dim;
  }
  int64_t attention_kv_heads(int64_t layer) const {
    return std::size_t(layer) < layer_kv_heads.size() && layer_kv_heads[std::size_t(layer)]
               ? layer_kv_heads[std::size_t(layer)]
               : num_key_value_heads;
  }
  bool attention_k_eq_v = false;
  struct FullRope {
    double theta = 1000000.0;
    double partial_rotary_factor = 1.0;
    bool proportional = false;
  } full_rope;
  double embedding_scale = 1.0;
  double final_logit_softcapping = 0;  // 0: none
  bool parallel_moe = false;

  // DeepSeek-V4 (deepseek_v4, docs/deepseek-v4.md §1). The common fields hold what it shares with the
  // others: head_dim d (queries, the one K = V head, compressed entries), qk_rope_head_dim r (the
  // roped LAST r dims of every head; partial_rotary_factor = r / d), rope_theta (the "main" rope of
  // sliding layers), sliding_window (W, on every layer), q_lora_rank, index_* (the CSA indexer), the
  // experts with one shared expert moe_intermediate_size wide (shared_expert_intermediate_size),
  // routed_scaling_factor. num_key_value_heads is 1, n_shared_experts and norm_topk_prob are ignored
  // (HF ignores them), and no layer is dense.
  struct DeepseekV4 {
    std::vector<V4AttentionKind> attention;  // one per layer
    std::vector<V4RouterKind> routers;       // one per layer
    int64_t csa_rate = 4, hca_rate = 128;    // m of each compressed kind (compress_rates)
    int64_t hc_mult = 4;                     // N residual streams (mHC)
    int64_t hc_sinkhorn_iters = 20;
    double hc_eps = 1e-6;
    int64_t o_groups = 8, o_lora_rank = 1024;   // the grouped output projection
    double swiglu_limit = 10.0;                 // clamp of the gate/up products, routed and shared experts
    std::string scoring_func = "sqrtsoftplus";  // or "sigmoid"
    bool mlp_bias = false;                      // biases on the shared expert
    // The "compress" rope of CSA/HCA layers (their q, kv, output, entries and indexer): "default" or
    // "yarn", whose truncate is always true (HF 5.17 looks for it beside "main" and "compress", where
    // V4 has none) and attention_factor 1 (HF's default for V4; another is refused), so neither
    // cos/sin nor the softmax scale get YaRN's mscale.
    std::string compress_rope_type = "default";
    double compress_rope_theta = 160000.0;
    Yarn compress_yarn;

    // m of layer `layer`: 0 on a sliding_attention layer (or out of range).
    int64_t compress_rate(int64_t layer) const {
      if (layer < 0 || std::size_t(layer) >= attention.size()) return 0;
      const V4AttentionKind k = attention[std::size_t(layer)];
      return k == V4AttentionKind::kCsa ? csa_rate : k == V4AttentionKind::kHca ? hca_rate : 0;
    }
  } deepseek_v4;

  // Linear attention (Gated DeltaNet).
  int64_t linear_conv_kernel_dim = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  // Value heads stored tiled over the key heads (no HF config says it; a GGUF's does, whose
  // converter reordered Qwen3.5/3.6's value heads: ref::DeltaNetDims::v_heads_tiled).
  bool linear_value_heads_tiled = false;

  // Generation: eos ids from generation_config.json (else config.json); may be empty.
  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> bos_token_id;

  // Whether layer `layer` uses the sparse MoE block (else the dense MLP of intermediate_size),
  // per HF: not in mlp_only_layers, not below first_k_dense_replace, not past last_moe_layer, and
  // num_experts > 0 and (layer + 1) % decoder_sparse_step == 0.
  bool is_moe_layer(int64_t layer) const;
  int64_t count_layers(LayerKind kind) const;
};

// The width of a latent-attention head in the KV pages: its key (qk_nope + qk_rope) or its value,
// whichever is wider, rounded up to a multiple of 32 (the widths every attention kernel takes; the
// padding is zeros in q, k and v alike, so it changes no product).
inline int64_t mla_head_width(int64_t qk_head_dim, int64_t v_head_dim) {
  const int64_t w = qk_head_dim > v_head_dim ? qk_head_dim : v_head_dim;
  return (w + 31) / 32 * 32;
}

// Parses config.json text (and generation_config.json text, "" when absent). Errors:
//  kInvalidArgument  malformed JSON or a missing/ill-typed required field (names it);
//  kUnsupported      "unsupported architecture 'X' (supported: qwen3_moe, qwen3_next, qwen3_5_moe, mixtral,
//                    qwen2_moe, olmoe, deepseek_v3, glm4_moe, dots1, ernie4_5_moe, minimax_m2, glm4_moe_lite,
//                    hunyuan_v1_moe)", or a feature of a supported family we do not implement (rope_type,
//                    activation, sliding window, clip_qkv, scoring_func, topk_method, ...), naming its field.
Result<ModelConfig> parse_model_config(std::string_view config_json,
                                       std::string_view generation_config_json = {});

}  // namespace ft::engine

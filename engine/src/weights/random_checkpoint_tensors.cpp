// The tensor list of a RandomCheckpointSpec: HF names and shapes of each family, and how each
// tensor is initialised. Both the in-memory writer and the streaming synthetic-model writer consume
// this list, so a name or shape is decided here only.
#include <cmath>

#include "ft/engine/random_checkpoint.h"
#include "weights/random_checkpoint_layout.h"

namespace ft::engine {
namespace {

class Planner {
 public:
  void normal(const std::string& name, std::vector<int64_t> shape, double scale, double offset = 0.0) {
    TensorInit init;
    init.scale = scale;
    init.offset = offset;
    tensors_.push_back({name, std::move(shape), init});
  }
  // A matrix (or stack of matrices) initialised N(0, 1/fan_in), fan_in = the last dimension.
  void matrix(const std::string& name, std::vector<int64_t> shape) {
    const double scale = 1.0 / std::sqrt(double(shape.back()));
    normal(name, std::move(shape), scale);
  }
  // k distinct ids of [0, n) a row (TensorInit::kExpertTable).
  void expert_table(const std::string& name, int64_t rows, int64_t k, int64_t n) {
    TensorInit init;
    init.kind = TensorInit::Kind::kExpertTable;
    init.hi = double(n);
    tensors_.push_back({name, {rows, k}, init});
  }
  void uniform(const std::string& name, std::vector<int64_t> shape, double lo, double hi, bool log_of = false) {
    TensorInit init;
    init.kind = log_of ? TensorInit::Kind::kLogUniform : TensorInit::Kind::kUniform;
    init.lo = lo;
    init.hi = hi;
    tensors_.push_back({name, std::move(shape), init});
  }
  std::vector<PlannedTensor> take() { return std::move(tensors_); }

 private:
  std::vector<PlannedTensor> tensors_;
};

void plan_linear_attention(Planner& w, const RandomCheckpointSpec& s, const std::string& a) {
  const int64_t H = s.hidden_size, nk = s.linear_num_key_heads, nv = s.linear_num_value_heads;
  const int64_t key_dim = nk * s.linear_key_head_dim, value_dim = nv * s.linear_value_head_dim;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  if (s.family == ModelFamily::kQwen3Next) {
    w.matrix(a + "in_proj_qkvz.weight", {2 * key_dim + 2 * value_dim, H});
    w.matrix(a + "in_proj_ba.weight", {2 * nv, H});
  } else {
    w.matrix(a + "in_proj_qkv.weight", {conv_dim, H});
    w.matrix(a + "in_proj_z.weight", {value_dim, H});
    w.matrix(a + "in_proj_b.weight", {nv, H});
    w.matrix(a + "in_proj_a.weight", {nv, H});
  }
  w.matrix(a + "conv1d.weight", {conv_dim, 1, s.linear_conv_kernel_dim});
  w.uniform(a + "dt_bias", {nv}, 0.5, 1.5);
  w.uniform(a + "A_log", {nv}, 1.0, 8.0, /*log_of=*/true);
  w.normal(a + "norm.weight", {s.linear_value_head_dim}, 0.1, 1.0);  // plain weight, not 1 + w
  w.matrix(a + "out_proj.weight", {H, value_dim});
}

// deepseek_v3's and glm4_moe_lite's latent attention (HF DeepseekV3Attention's modules).
void plan_mla_attention(Planner& w, const RandomCheckpointSpec& s, const std::string& a) {
  const int64_t H = s.hidden_size, heads = s.num_heads, C = s.kv_lora_rank, R = s.qk_rope_head_dim;
  const int64_t q_out = heads * (s.qk_nope_head_dim + R);
  if (s.q_lora_rank > 0) {
    w.matrix(a + "q_a_proj.weight", {s.q_lora_rank, H});
    if (s.attention_bias) w.normal(a + "q_a_proj.bias", {s.q_lora_rank}, 0.1);
    w.normal(a + "q_a_layernorm.weight", {s.q_lora_rank}, 0.1, 1.0);
    w.matrix(a + "q_b_proj.weight", {q_out, s.q_lora_rank});
  } else {
    w.matrix(a + "q_proj.weight", {q_out, H});
  }
  w.matrix(a + "kv_a_proj_with_mqa.weight", {C + R, H});
  if (s.attention_bias) w.normal(a + "kv_a_proj_with_mqa.bias", {C + R}, 0.1);
  w.normal(a + "kv_a_layernorm.weight", {C}, 0.1, 1.0);
  w.matrix(a + "kv_b_proj.weight", {heads * (s.qk_nope_head_dim + s.v_head_dim), C});
  w.matrix(a + "o_proj.weight", {H, heads * s.v_head_dim});
  if (s.attention_bias) w.normal(a + "o_proj.bias", {H}, 0.1);
  if (s.family == ModelFamily::kDeepseekV32 || s.family == ModelFamily::kGlmMoeDsa) {
    // The DSA lightning indexer (HF DeepseekV32Indexer).
    const std::string x = a + "indexer.";
    w.matrix(x + "wq_b.weight", {s.index_n_heads * s.index_head_dim, s.q_lora_rank});
    w.matrix(x + "wk.weight", {s.index_head_dim, H});
    w.normal(x + "k_norm.weight", {s.index_head_dim}, 0.1, 1.0);
    w.normal(x + "k_norm.bias", {s.index_head_dim}, 0.1);
    w.matrix(x + "weights_proj.weight", {s.index_n_heads, H});
  }
}

// gpt_oss: GQA with biases on all four projections and a sink logit per head.
void plan_gpt_oss_attention(Planner& w, const RandomCheckpointSpec& s, const std::string& a) {
  const int64_t H = s.hidden_size, q_out = s.num_heads * s.head_dim, kv_out = s.num_kv_heads * s.head_dim;
  w.matrix(a + "q_proj.weight", {q_out, H});
  w.normal(a + "q_proj.bias", {q_out}, 0.1);
  w.matrix(a + "k_proj.weight", {kv_out, H});
  w.normal(a + "k_proj.bias", {kv_out}, 0.1);
  w.matrix(a + "v_proj.weight", {kv_out, H});
  w.normal(a + "v_proj.bias", {kv_out}, 0.1);
  w.matrix(a + "o_proj.weight", {H, q_out});
  w.normal(a + "o_proj.bias", {H}, 0.1);
  w.normal(a + "sinks", {s.num_heads}, 1.0);
}

// gemma4_text: per-head q/k norms; full layers of their own head shape, k_proj giving the values
// there with attention_k_eq_v.
void plan_gemma4_attention(Planner& w, const RandomCheckpointSpec& s, int64_t layer, const std::string& a) {
  const bool full = is_gemma4_full_layer(s, layer);
  const int64_t H = s.hidden_size, D = full ? s.global_head_dim : s.head_dim;
  const int64_t KV = full && s.attention_k_eq_v ? s.global_kv_heads : s.num_kv_heads;
  w.matrix(a + "q_proj.weight", {s.num_heads * D, H});
  w.matrix(a + "k_proj.weight", {KV * D, H});
  if (!(full && s.attention_k_eq_v)) w.matrix(a + "v_proj.weight", {KV * D, H});
  w.matrix(a + "o_proj.weight", {H, s.num_heads * D});
  // Gemma's scores are not scaled by 1/sqrt(head_dim): norms of D^-1/4 keep q.k near unit size, as
  // trained weights do (with ones, a bf16 KV's rounding would be magnified D-fold in the scores).
  const double qk = std::pow(double(D), -0.25);
  w.normal(a + "q_norm.weight", {D}, 0.1 * qk, qk);
  w.normal(a + "k_norm.weight", {D}, 0.1 * qk, qk);
}

// gemma4_text's feed-forward: the GeGLU MLP, and beside it the MoE (router with its scales, fused
// experts) with the norms around each.
void plan_gemma4_mlp(Planner& w, const RandomCheckpointSpec& s, const std::string& p) {
  const int64_t H = s.hidden_size, E = s.num_experts, I = s.moe_intermediate_size;
  w.normal(p + "pre_feedforward_layernorm.weight", {H}, 0.1, 1.0);
  w.normal(p + "post_feedforward_layernorm.weight", {H}, 0.1, 1.0);
  w.matrix(p + "mlp.gate_proj.weight", {s.intermediate_size, H});
  w.matrix(p + "mlp.up_proj.weight", {s.intermediate_size, H});
  w.matrix(p + "mlp.down_proj.weight", {H, s.intermediate_size});
  w.normal(p + "layer_scalar", {1}, 0.1, 0.8);
  if (E == 0) return;
  w.normal(p + "pre_feedforward_layernorm_2.weight", {H}, 0.1, 1.0);
  w.normal(p + "post_feedforward_layernorm_1.weight", {H}, 0.1, 1.0);
  w.normal(p + "post_feedforward_layernorm_2.weight", {H}, 0.1, 1.0);
  // The router reads its input scaled by hidden^-1/2: its projection drawn that much larger, so
  // that the routing is not a near tie everywhere.
  w.normal(p + "router.proj.weight", {E, H}, 1.0);
  w.normal(p + "router.scale", {H}, 0.1, 1.0);
  w.normal(p + "router.per_expert_scale", {E}, 0.1, 1.0);
  w.matrix(p + "experts.gate_up_proj", {E, 2 * I, H});
  w.matrix(p + "experts.down_proj", {E, H, I});
}

void plan_full_attention(Planner& w, const RandomCheckpointSpec& s, const std::string& a) {
  if (is_mla(s)) return plan_mla_attention(w, s, a);
  if (s.family == ModelFamily::kGptOss) return plan_gpt_oss_attention(w, s, a);
  const int64_t H = s.hidden_size, D = s.head_dim;
  if (s.family == ModelFamily::kAfmoe) w.matrix(a + "gate_proj.weight", {s.num_heads * D, H});  // the output gate
  // The hybrids' q_proj also produces the output gate: twice the query width.
  const int64_t q_out = s.num_heads * D * (is_hybrid(s) ? 2 : 1), kv_out = s.num_kv_heads * D;
  const bool all_bias = s.attention_bias && (s.family == ModelFamily::kQwen3Moe || s.family == ModelFamily::kOlmoe ||
                                             s.family == ModelFamily::kDots1 || s.family == ModelFamily::kHunyuanV1Moe);
  // GLM-4.5: biases on q/k/v only.
  const bool qkv_bias =
      all_bias || s.family == ModelFamily::kQwen2Moe || (s.family == ModelFamily::kGlm4Moe && s.attention_bias);
  const double norm_offset = is_hybrid(s) ? 0.0 : 1.0;  // zero-centred RMSNorm weights
  w.matrix(a + "q_proj.weight", {q_out, H});
  if (qkv_bias) w.normal(a + "q_proj.bias", {q_out}, 0.1);
  w.matrix(a + "k_proj.weight", {kv_out, H});
  if (qkv_bias) w.normal(a + "k_proj.bias", {kv_out}, 0.1);
  w.matrix(a + "v_proj.weight", {kv_out, H});
  if (qkv_bias) w.normal(a + "v_proj.bias", {kv_out}, 0.1);
  w.matrix(a + "o_proj.weight", {H, s.num_heads * D});
  if (all_bias) w.normal(a + "o_proj.bias", {H}, 0.1);
  if (s.family == ModelFamily::kMixtral || s.family == ModelFamily::kQwen2Moe ||
      s.family == ModelFamily::kErnie4_5Moe || s.family == ModelFamily::kLlama4Text)
    return;  // no q/k norms (Llama 4's have no weights)
  if (s.family == ModelFamily::kGlm4Moe && !s.use_qk_norm) return;
  if (s.family == ModelFamily::kHunyuanV1Moe) {  // per head, under their own names
    w.normal(a + "query_layernorm.weight", {D}, 0.1, 1.0);
    w.normal(a + "key_layernorm.weight", {D}, 0.1, 1.0);
    return;
  }
  // OLMoE normalises the whole q and k projections, the Qwen3 families each head.
  const bool whole = s.family == ModelFamily::kOlmoe || s.family == ModelFamily::kMinimaxM2;
  w.normal(a + "q_norm.weight", {whole ? s.num_heads * D : D}, 0.1, norm_offset);
  w.normal(a + "k_norm.weight", {whole ? kv_out : D}, 0.1, norm_offset);
}

// The feed-forward of the layer whose tensors start with `p`.
void plan_mlp(Planner& w, const RandomCheckpointSpec& s, int64_t layer, const std::string& p) {
  const bool llama4 = s.family == ModelFamily::kLlama4Text;
  const std::string m = p + (llama4 ? "feed_forward." : "mlp.");
  const int64_t H = s.hidden_size;
  if (!is_moe_layer(s, layer)) {
    w.matrix(m + "gate_proj.weight", {s.intermediate_size, H});
    w.matrix(m + "up_proj.weight", {s.intermediate_size, H});
    w.matrix(m + "down_proj.weight", {H, s.intermediate_size});
    return;
  }
  const int64_t E = s.num_experts, I = s.moe_intermediate_size;
  if (llama4) {  // the experts [in, out], gate then up; a shared expert as wide
    w.matrix(m + "router.weight", {E, H});
    w.normal(m + "experts.gate_up_proj", {E, H, 2 * I}, 1.0 / std::sqrt(double(H)));
    w.normal(m + "experts.down_proj", {E, I, H}, 1.0 / std::sqrt(double(I)));
    w.matrix(m + "shared_expert.gate_proj.weight", {I, H});
    w.matrix(m + "shared_expert.up_proj.weight", {I, H});
    w.matrix(m + "shared_expert.down_proj.weight", {H, I});
    return;
  }
  if (s.family == ModelFamily::kGptOss) {
    // The router with its bias; the experts [in, out] (gate and up interleaved), with biases.
    w.matrix(m + "router.weight", {E, H});
    w.normal(m + "router.bias", {E}, 0.1);
    w.normal(m + "experts.gate_up_proj", {E, H, 2 * I}, 1.0 / std::sqrt(double(H)));
    w.normal(m + "experts.gate_up_proj_bias", {E, 2 * I}, 0.1);
    w.normal(m + "experts.down_proj", {E, I, H}, 1.0 / std::sqrt(double(I)));
    w.normal(m + "experts.down_proj_bias", {E, H}, 0.1);
    return;
  }
  const bool minimax = s.family == ModelFamily::kMinimaxM2;
  if ((s.family == ModelFamily::kMixtral || minimax) && !s.fused_experts) {
    // The released layout (and HF 5.x save_pretrained's): block_sparse_moe, w1 gate, w3 up, w2 down;
    // MiniMax-M2's router bias beside the router.
    const std::string b = p + "block_sparse_moe.";
    w.matrix(b + "gate.weight", {E, H});
    if (minimax) w.normal(b + "e_score_correction_bias", {E}, 0.1);
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = b + "experts." + std::to_string(e) + ".";
      w.matrix(x + "w1.weight", {I, H});
      w.matrix(x + "w2.weight", {H, I});
      w.matrix(x + "w3.weight", {I, H});
    }
    return;
  }
  const bool hunyuan = s.family == ModelFamily::kHunyuanV1Moe;
  const bool afmoe = s.family == ModelFamily::kAfmoe;
  w.matrix(m + (hunyuan ? "gate.wg.weight" : afmoe ? "router.gate.weight" : "gate.weight"), {E, H});
  if (afmoe) w.normal(m + "expert_bias", {E}, 0.1);
  if (is_sigmoid_moe(s)) w.normal(m + "gate.e_score_correction_bias", {E}, 0.1);
  const bool exaone = s.family == ModelFamily::kExaoneMoe;
  if (minimax || exaone) w.normal(m + "e_score_correction_bias", {E}, 0.1);
  // ERNIE 4.5's releases keep the bias beside the router, one row per expert group (one group).
  const bool ernie = s.family == ModelFamily::kErnie4_5Moe;
  if (ernie) w.normal(m + "moe_statics.e_score_correction_bias", {1, E}, 0.1);
  if (s.fused_experts) {
    w.matrix(m + "experts.gate_up_proj", {E, 2 * I, H});
    w.matrix(m + "experts.down_proj", {E, H, I});
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      w.matrix(x + "gate_proj.weight", {I, H});
      w.matrix(x + "up_proj.weight", {I, H});
      w.matrix(x + "down_proj.weight", {H, I});
    }
  }
  if ((is_sigmoid_moe(s) || ernie || exaone || afmoe) && s.n_shared_experts > 0) {
    const int64_t S = s.n_shared_experts * I;
    w.matrix(m + "shared_experts.gate_proj.weight", {S, H});
    w.matrix(m + "shared_experts.up_proj.weight", {S, H});
    w.matrix(m + "shared_experts.down_proj.weight", {H, S});
  }
  if (hunyuan) {  // the shared MLP is as wide as the experts
    w.matrix(m + "shared_mlp.gate_proj.weight", {I, H});
    w.matrix(m + "shared_mlp.up_proj.weight", {I, H});
    w.matrix(m + "shared_mlp.down_proj.weight", {H, I});
  }
  if (has_shared_expert(s)) {
    const int64_t S = s.shared_expert_intermediate_size;
    w.matrix(m + "shared_expert.gate_proj.weight", {S, H});
    w.matrix(m + "shared_expert.up_proj.weight", {S, H});
    w.matrix(m + "shared_expert.down_proj.weight", {H, S});
    w.matrix(m + "shared_expert_gate.weight", {1, H});
  }
}

// deepseek_v4's compressor (attention or indexer: entries `width` wide, two series on CSA layers).
void plan_v4_compressor(Planner& w, const RandomCheckpointSpec& s, const std::string& c, int64_t width, int64_t rate,
                        bool csa) {
  const int64_t row = (csa ? 2 : 1) * width;
  w.matrix(c + "wkv.weight", {row, s.hidden_size});
  w.matrix(c + "wgate.weight", {row, s.hidden_size});
  w.matrix(c + "ape", {rate, row});
  w.normal(c + "norm.weight", {width}, 0.1, 1.0);
}

// deepseek_v4 (deepseek_v4.cpp's names; the golden recipe's init: matrices N(0, 1/fan_in), the
// hyper-connections' bases and the sinks 0.1 N(0, 1), their scales and the norms 1 + 0.1 N(0, 1)).
std::vector<PlannedTensor> plan_deepseek_v4(const RandomCheckpointSpec& s) {
  Planner w;
  const bool released = s.v4_released_names;
  const std::string root = released ? "" : "model.";
  const int64_t H = s.hidden_size, N = s.hc_mult, QL = v4_q_lora_rank(s), d = s.head_dim, heads = s.num_heads;
  const int64_t E = s.num_experts, I = s.moe_intermediate_size, G = s.o_groups, R = s.o_lora_rank;
  const auto connection = [&](const std::string& p, int64_t rows, int64_t scales) {
    w.matrix(p + "fn", {rows, N * H});
    w.normal(p + "base", {rows}, 0.1);
    w.normal(p + "scale", {scales}, 0.1, 1.0);
  };
  w.normal(root + (released ? "embed.weight" : "embed_tokens.weight"), {s.vocab_size, H}, 1.0);
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = root + "layers." + std::to_string(i) + ".", a = p + "attn.", f = p + "ffn.";
    const std::string kind = v4_layer_type(s, i);
    w.normal(p + "attn_norm.weight", {H}, 0.1, 1.0);
    w.normal(p + "ffn_norm.weight", {H}, 0.1, 1.0);
    connection(p + "hc_attn_", (2 + N) * N, 3);
    connection(p + "hc_ffn_", (2 + N) * N, 3);
    w.matrix(a + "wq_a.weight", {QL, H});
    w.normal(a + "q_norm.weight", {QL}, 0.1, 1.0);
    w.matrix(a + "wq_b.weight", {heads * d, QL});
    w.matrix(a + "wkv.weight", {d, H});
    w.normal(a + (released ? "kv_norm.weight" : "norm.weight"), {d}, 0.1, 1.0);
    w.matrix(a + "wo_a.weight", {G * R, heads * d / G});
    w.matrix(a + "wo_b.weight", {H, G * R});
    w.normal(a + "attn_sink", {heads}, 0.1);
    const bool csa = kind == "compressed_sparse_attention";
    if (kind != "sliding_attention") {
      plan_v4_compressor(w, s, a + "compressor.", d, csa ? s.v4_csa_rate : s.v4_hca_rate, csa);
    }
    if (csa) {
      plan_v4_compressor(w, s, a + "indexer.compressor.", s.index_head_dim, s.v4_csa_rate, true);
      w.matrix(a + "indexer.wq_b.weight", {s.index_n_heads * s.index_head_dim, QL});
      w.matrix(a + "indexer.weights_proj.weight", {s.index_n_heads, H});
    }
    w.matrix(f + "gate.weight", {E, H});
    if (i < s.v4_hash_layers) {
      w.expert_table(f + "gate.tid2eid", s.vocab_size, s.top_k, E);
    } else {
      w.normal(f + "gate.bias", {E}, 0.1);
    }
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      w.matrix(x + "w1.weight", {I, H});
      w.matrix(x + "w2.weight", {H, I});
      w.matrix(x + "w3.weight", {I, H});
    }
    w.matrix(f + "shared_experts.w1.weight", {I, H});
    w.matrix(f + "shared_experts.w2.weight", {H, I});
    w.matrix(f + "shared_experts.w3.weight", {I, H});
  }
  w.normal(root + "norm.weight", {H}, 0.1, 1.0);
  connection(released ? "hc_head_" : "model.hc_head.hc_", N, 1);
  w.matrix("head.weight", {s.vocab_size, H});
  return w.take();
}

}  // namespace

std::string v4_layer_type(const RandomCheckpointSpec& s, int64_t i) {
  if (std::size_t(i) < s.v4_layer_types.size()) return s.v4_layer_types[std::size_t(i)];
  if (i == 0) return "sliding_attention";
  return i % 2 == 1 ? "compressed_sparse_attention" : "heavily_compressed_attention";
}
int64_t v4_q_lora_rank(const RandomCheckpointSpec& s) { return s.q_lora_rank > 0 ? s.q_lora_rank : s.hidden_size / 2; }
int64_t v4_sliding_window(const RandomCheckpointSpec& s) { return s.sliding_window > 0 ? s.sliding_window : 16; }
double v4_partial_rotary(const RandomCheckpointSpec& s) {
  return s.partial_rotary_factor > 0 ? s.partial_rotary_factor : 0.25;
}

bool is_hybrid(const RandomCheckpointSpec& s) { return is_hybrid_family(s.family); }

bool has_shared_expert(const RandomCheckpointSpec& s) { return is_hybrid(s) || s.family == ModelFamily::kQwen2Moe; }

bool is_linear_layer(const RandomCheckpointSpec& s, int64_t i) {
  return is_hybrid(s) && (i + 1) % s.full_attention_interval != 0;
}

bool is_sigmoid_moe(const RandomCheckpointSpec& s) {
  return s.family == ModelFamily::kDeepseekV3 || s.family == ModelFamily::kGlm4Moe || s.family == ModelFamily::kDots1 ||
         s.family == ModelFamily::kGlm4MoeLite || s.family == ModelFamily::kDeepseekV32 ||
         s.family == ModelFamily::kGlmMoeDsa;
}

bool is_mla(const RandomCheckpointSpec& s) {
  return s.family == ModelFamily::kDeepseekV3 || s.family == ModelFamily::kGlm4MoeLite ||
         s.family == ModelFamily::kDeepseekV32 || s.family == ModelFamily::kGlmMoeDsa;
}

bool is_gemma4_full_layer(const RandomCheckpointSpec& s, int64_t i) {
  return (i + 1) % s.full_attention_interval == 0 || i == s.num_layers - 1;
}

bool is_moe_layer(const RandomCheckpointSpec& s, int64_t i) {
  if (is_sigmoid_moe(s) || s.family == ModelFamily::kExaoneMoe || s.family == ModelFamily::kAfmoe)
    return s.num_experts > 0 && i >= s.first_k_dense_replace;
  if (s.family == ModelFamily::kErnie4_5Moe) {
    const int64_t end = s.moe_layer_end_index < 0 ? s.num_layers - 1 : s.moe_layer_end_index;
    return s.num_experts > 0 && (i + 1) % s.decoder_sparse_step == 0 && i >= s.first_k_dense_replace && i <= end;
  }
  if (s.family == ModelFamily::kQwen3_5Moe || s.family == ModelFamily::kMixtral || s.family == ModelFamily::kOlmoe ||
      s.family == ModelFamily::kMinimaxM2 || s.family == ModelFamily::kHunyuanV1Moe ||
      s.family == ModelFamily::kGptOss) {
    return true;  // no dense layers in these
  }
  for (int64_t m : s.mlp_only_layers) {
    if (m == i) return false;
  }
  return s.num_experts > 0 && (i + 1) % s.decoder_sparse_step == 0;
}

int64_t PlannedTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status check_random_checkpoint_spec(const RandomCheckpointSpec& spec) {
  if (spec.num_layers <= 0 || spec.hidden_size <= 0 || spec.vocab_size <= 0 || spec.full_attention_interval <= 0 ||
      spec.decoder_sparse_step <= 0) {
    return invalid_argument("random checkpoint: sizes must be positive");
  }
  if (spec.family == ModelFamily::kDeepseekV4 &&
      (spec.top_k > spec.num_experts || spec.o_groups <= 0 || spec.hc_mult <= 0)) {
    return invalid_argument("random checkpoint: deepseek_v4 needs top_k <= num_experts and positive o_groups, hc_mult");
  }
  return Status::ok();
}

std::vector<PlannedTensor> random_checkpoint_tensors(const RandomCheckpointSpec& s) {
  if (s.family == ModelFamily::kDeepseekV4) return plan_deepseek_v4(s);
  Planner w;
  const std::string root = s.family == ModelFamily::kQwen3_5Moe ? "model.language_model." : "model.";
  const int64_t H = s.hidden_size;
  const double norm_offset = is_hybrid(s) ? 0.0 : 1.0;  // zero-centred RMSNorm weights

  // Gemma scales its embeddings up by sqrt(hidden_size): drawn that much smaller.
  const bool gemma4 = s.family == ModelFamily::kGemma4Text;
  w.normal(root + "embed_tokens.weight", {s.vocab_size, H}, gemma4 ? 1.0 / std::sqrt(double(H)) : 1.0);
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = root + "layers." + std::to_string(i) + ".";
    w.normal(p + "input_layernorm.weight", {H}, 0.1, norm_offset);
    w.normal(p + "post_attention_layernorm.weight", {H}, 0.1, norm_offset);
    if (gemma4) {
      plan_gemma4_attention(w, s, i, p + "self_attn.");
      plan_gemma4_mlp(w, s, p);
      continue;
    }
    if (s.family == ModelFamily::kAfmoe) {  // sandwich norms
      w.normal(p + "pre_mlp_layernorm.weight", {H}, 0.1, norm_offset);
      w.normal(p + "post_mlp_layernorm.weight", {H}, 0.1, norm_offset);
    }
    if (is_linear_layer(s, i)) {
      plan_linear_attention(w, s, p + "linear_attn.");
    } else {
      plan_full_attention(w, s, p + "self_attn.");
    }
    plan_mlp(w, s, i, p);
  }
  w.normal(root + "norm.weight", {H}, 0.1, norm_offset);
  if (!s.tie_word_embeddings) w.matrix("lm_head.weight", {s.vocab_size, H});
  return w.take();
}

}  // namespace ft::engine

// config.json fields of deepseek_v4 with DeepseekV4Config's defaults (transformers 5.17,
// docs/deepseek-v4.md §1). HF's __post_init__ folds the keys of the published DeepSeek-V4-Flash
// config.json into the ones it saves; both are read here, the saved ones first:
//   layer_types      > compress_ratios (0 / 4 / 128 per layer, cut to num_hidden_layers: Flash's
//                      lists its MTP layer too) > the V4-Pro default [HCA, HCA, then HCA / CSA];
//   compress_rates   with compress_rate_csa / compress_rate_hca over it;
//   mlp_layer_types  > num_hash_layers (the first n layers hash_moe, default 3);
//   partial_rotary_factor > qk_rope_head_dim / head_dim > 64 / 512;
//   rope_parameters {main, compress} > one flat rope dict (rope_parameters or rope_scaling), which
//                      HF makes the compress rope's at compress_rope_theta, main staying plain.
#include <cstddef>
#include <string>
#include <vector>

#include "ft/engine/model_config.h"
#include "models/config_fields.h"

namespace ft::engine::config {
namespace {

using json = nlohmann::json;

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";

Status wrong_length(const char* key, std::size_t got, int64_t layers) {
  return invalid_argument(std::string("config.json: '") + key + "' has " + std::to_string(got) +
                          " entries but num_hidden_layers is " + std::to_string(layers));
}

Status parse_attention_kinds(const Fields& text, ModelConfig& cfg) {
  const int64_t n = cfg.num_hidden_layers;
  std::vector<V4AttentionKind>& kinds = cfg.deepseek_v4.attention;
  kinds.clear();
  if (text.has("layer_types")) {
    FT_ASSIGN_OR_RETURN(const std::vector<std::string> types, text.string_list_or_empty("layer_types"));
    if (int64_t(types.size()) != n) return wrong_length("layer_types", types.size(), n);
    for (const std::string& t : types) {
      if (t == kSliding) {
        kinds.push_back(V4AttentionKind::kSliding);
      } else if (t == kCsa) {
        kinds.push_back(V4AttentionKind::kCsa);
      } else if (t == kHca) {
        kinds.push_back(V4AttentionKind::kHca);
      } else {
        return invalid_argument("config.json: deepseek_v4 layer type '" + t + "' is not one of " + kSliding + ", " +
                                kCsa + ", " + kHca);
      }
    }
    return Status::ok();
  }
  if (text.has("compress_ratios")) {
    FT_ASSIGN_OR_RETURN(const std::vector<int64_t> ratios, text.int_list_or_empty("compress_ratios"));
    if (int64_t(ratios.size()) < n) {
      return invalid_argument("config.json: 'compress_ratios' has " + std::to_string(ratios.size()) +
                              " entries, fewer than num_hidden_layers " + std::to_string(n));
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = ratios[std::size_t(i)];
      if (r != 0 && r != 4 && r != 128) {
        return invalid_argument("config.json: compress_ratios[" + std::to_string(i) + "] is " + std::to_string(r) +
                                ", not 0 (sliding_attention), 4 (compressed_sparse_attention) or 128 "
                                "(heavily_compressed_attention)");
      }
      kinds.push_back(r == 0 ? V4AttentionKind::kSliding : r == 4 ? V4AttentionKind::kCsa : V4AttentionKind::kHca);
    }
    return Status::ok();
  }
  for (int64_t i = 0; i < n; ++i) kinds.push_back(i < 2 || i % 2 == 0 ? V4AttentionKind::kHca : V4AttentionKind::kCsa);
  return Status::ok();
}

// compress_rates {kind: m} (default {CSA: 4, HCA: 128}), then the legacy scalars over it. A dict
// without one of the kinds leaves its m 0, refused later only if a layer is of that kind (HF's
// lookup fails there too).
Status parse_compress_rates(const Fields& text, ModelConfig::DeepseekV4& v4) {
  if (text.has("compress_rates")) {
    const json* rates = text.object("compress_rates");
    if (!rates) return invalid_argument("config.json: field 'compress_rates' must be an object");
    const Fields r(*rates);
    FT_ASSIGN_OR_RETURN(v4.csa_rate, r.integer_or(kCsa, 0));
    FT_ASSIGN_OR_RETURN(v4.hca_rate, r.integer_or(kHca, 0));
  }
  FT_ASSIGN_OR_RETURN(v4.csa_rate, text.integer_or("compress_rate_csa", v4.csa_rate));
  FT_ASSIGN_OR_RETURN(v4.hca_rate, text.integer_or("compress_rate_hca", v4.hca_rate));
  return Status::ok();
}

Status parse_routers(const Fields& text, ModelConfig& cfg) {
  const int64_t n = cfg.num_hidden_layers;
  std::vector<V4RouterKind>& routers = cfg.deepseek_v4.routers;
  routers.clear();
  if (text.has("mlp_layer_types")) {
    FT_ASSIGN_OR_RETURN(const std::vector<std::string> types, text.string_list_or_empty("mlp_layer_types"));
    if (int64_t(types.size()) != n) return wrong_length("mlp_layer_types", types.size(), n);
    for (const std::string& t : types) {
      if (t != "hash_moe" && t != "moe") {
        return invalid_argument("config.json: deepseek_v4 mlp_layer_types entry '" + t +
                                "' is not \"hash_moe\" or \"moe\"");
      }
      routers.push_back(t == "hash_moe" ? V4RouterKind::kHashMoe : V4RouterKind::kMoe);
    }
    return Status::ok();
  }
  FT_ASSIGN_OR_RETURN(const int64_t hash_layers, text.integer_or("num_hash_layers", 3));
  if (hash_layers < 0) return invalid_argument("config.json: num_hash_layers must not be negative");
  for (int64_t i = 0; i < n; ++i) routers.push_back(i < hash_layers ? V4RouterKind::kHashMoe : V4RouterKind::kMoe);
  return Status::ok();
}

// A rope dict's type and YaRN keys over what an earlier dict gave ("type" is the legacy spelling).
// An attention_factor other than 1 is refused: HF applies a given one, but V4's ops have no place
// for it (rope_tail turns without scaling, V4AttentionSpec::scale is d^-0.5).
Status read_compress_keys(const Fields& d, ModelConfig::DeepseekV4& v4) {
  FT_ASSIGN_OR_RETURN(const std::string legacy, d.string_or("type", v4.compress_rope_type));
  FT_ASSIGN_OR_RETURN(v4.compress_rope_type, d.string_or("rope_type", legacy));
  ModelConfig::Yarn& y = v4.compress_yarn;
  FT_ASSIGN_OR_RETURN(y.factor, d.number_or("factor", y.factor));
  FT_ASSIGN_OR_RETURN(y.beta_fast, d.number_or("beta_fast", y.beta_fast));
  FT_ASSIGN_OR_RETURN(y.beta_slow, d.number_or("beta_slow", y.beta_slow));
  FT_ASSIGN_OR_RETURN(y.original_max_position_embeddings,
                      d.integer_or("original_max_position_embeddings", y.original_max_position_embeddings));
  FT_ASSIGN_OR_RETURN(const double attention_factor, d.number_or("attention_factor", 1.0));
  if (attention_factor != 1.0) {
    return unsupported("deepseek_v4: a compress rope attention_factor other than 1 (" +
                       std::to_string(attention_factor) + ") is not supported");
  }
  return Status::ok();
}

// A nested rope dict's theta (default: the top-level key's) and partial factor, which must be the
// model's: every head's roped tail is r = head_dim * partial_rotary_factor wide, whichever rope.
Status read_nested_dict(const Fields& d, const char* which, const ModelConfig& cfg, double& theta) {
  FT_ASSIGN_OR_RETURN(theta, d.number_or("rope_theta", theta));
  FT_ASSIGN_OR_RETURN(const double partial, d.number_or("partial_rotary_factor", cfg.partial_rotary_factor));
  if (partial != cfg.partial_rotary_factor) {
    return invalid_argument(std::string("config.json: rope_parameters.") + which + " partial_rotary_factor " +
                            std::to_string(partial) + " differs from the model's " +
                            std::to_string(cfg.partial_rotary_factor));
  }
  return Status::ok();
}

const json* nested(const json* params, const char* key) {
  return params && params->contains(key) && params->at(key).is_object() ? &params->at(key) : nullptr;
}

Status parse_ropes(const Fields& text, ModelConfig& cfg) {
  ModelConfig::DeepseekV4& v4 = cfg.deepseek_v4;
  FT_ASSIGN_OR_RETURN(const int64_t legacy_rope_dims, text.integer_or("qk_rope_head_dim", 0));
  const double legacy = legacy_rope_dims > 0 ? double(legacy_rope_dims) / double(cfg.head_dim) : 64.0 / 512.0;
  FT_ASSIGN_OR_RETURN(cfg.partial_rotary_factor, text.number_or("partial_rotary_factor", legacy));
  if (cfg.partial_rotary_factor <= 0 || cfg.partial_rotary_factor > 1) {
    return invalid_argument("config.json: partial_rotary_factor must be in (0, 1]");
  }
  cfg.qk_rope_head_dim = int64_t(double(cfg.head_dim) * cfg.partial_rotary_factor);  // HF's int(), truncating
  cfg.rope_type = "default";
  FT_ASSIGN_OR_RETURN(cfg.rope_theta, text.number_or("rope_theta", 10000.0));
  FT_ASSIGN_OR_RETURN(v4.compress_rope_theta, text.number_or("compress_rope_theta", 160000.0));

  const json* params = text.object("rope_parameters");
  const json* main = nested(params, "main");
  const json* compress = nested(params, "compress");
  if (main && compress) {
    const Fields m(*main), c(*compress);
    FT_ASSIGN_OR_RETURN(const std::string legacy_type, m.string_or("type", "default"));
    FT_ASSIGN_OR_RETURN(const std::string main_type, m.string_or("rope_type", legacy_type));
    if (main_type != "default") {
      return unsupported("deepseek_v4: rope_parameters.main rope_type '" + main_type +
                         "' is not supported (only 'default')");
    }
    FT_RETURN_IF_ERROR(read_nested_dict(m, "main", cfg, cfg.rope_theta));
    FT_RETURN_IF_ERROR(read_nested_dict(c, "compress", cfg, v4.compress_rope_theta));
    FT_RETURN_IF_ERROR(read_compress_keys(c, v4));
  } else {
    // The flat dict's own theta and partial factor give way to compress_rope_theta and the model's.
    for (const json* dict : {text.object("rope_scaling"), params}) {  // later wins
      if (dict) FT_RETURN_IF_ERROR(read_compress_keys(Fields(*dict), v4));
    }
  }
  if (cfg.rope_theta <= 0 || v4.compress_rope_theta <= 0) {
    return invalid_argument("config.json: rope_theta and compress_rope_theta must be positive");
  }
  ModelConfig::Yarn& y = v4.compress_yarn;
  if (v4.compress_rope_type == "default") {
    y = {};
  } else if (v4.compress_rope_type == "yarn") {
    // HF 5.17 reads truncate from the top of rope_parameters, where V4 has none: always true.
    y.truncate = true;
    y.attention_factor = 1.0;
    y.attention_given = true;
    if (y.original_max_position_embeddings <= 0) y.original_max_position_embeddings = cfg.max_position_embeddings;
    if (y.factor <= 0 || y.original_max_position_embeddings <= 0) {
      return invalid_argument(
          "config.json: deepseek_v4's yarn compress rope needs a positive factor and "
          "original_max_position_embeddings (or max_position_embeddings)");
    }
  } else {
    return unsupported("deepseek_v4: compress rope_type '" + v4.compress_rope_type +
                       "' is not supported (only 'default' and 'yarn')");
  }
  return Status::ok();
}

Status parse_moe(const Fields& text, ModelConfig& cfg) {
  ModelConfig::DeepseekV4& v4 = cfg.deepseek_v4;
  // num_local_experts and intermediate_size are DeepseekV4Config's aliases of these two.
  FT_ASSIGN_OR_RETURN(const int64_t local_experts, text.integer_or("num_local_experts", 256));
  FT_ASSIGN_OR_RETURN(cfg.num_experts, text.integer_or("n_routed_experts", local_experts));
  FT_ASSIGN_OR_RETURN(const int64_t width, text.integer_or("intermediate_size", 2048));
  FT_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, text.integer_or("moe_intermediate_size", width));
  FT_ASSIGN_OR_RETURN(cfg.num_experts_per_tok, text.integer_or("num_experts_per_tok", 6));
  FT_ASSIGN_OR_RETURN(cfg.routed_scaling_factor, text.number_or("routed_scaling_factor", 1.5));
  cfg.intermediate_size = 0;  // no dense layers
  cfg.shared_expert_intermediate_size = cfg.moe_intermediate_size;
  cfg.norm_topk_prob = true;
  FT_ASSIGN_OR_RETURN(v4.swiglu_limit, text.number_or("swiglu_limit", 10.0));
  FT_ASSIGN_OR_RETURN(v4.mlp_bias, text.boolean_or("mlp_bias", false));
  // HF applies ACT2FN[scoring_func]: its docstring's "softmax" is no activation there (a KeyError).
  FT_ASSIGN_OR_RETURN(v4.scoring_func, text.string_or("scoring_func", "sqrtsoftplus"));
  if (v4.scoring_func != "sqrtsoftplus" && v4.scoring_func != "sigmoid") {
    return unsupported("deepseek_v4: scoring_func '" + v4.scoring_func +
                       "' is not supported (only 'sqrtsoftplus' and 'sigmoid')");
  }
  return Status::ok();
}

// The releases' formats (docs/deepseek-v4.md §3): FP8 E4M3 linears with UE8M0 tile scales (or fp32
// ones), routed experts in FP4 ("expert_dtype": "fp4") or as the linears (none, "fp8"). The tensors
// themselves say which weight is which (weights/quantized_safetensors.h); these keys are checked so
// that a format the readers do not know is named here, not misread or reported as a stray tensor.
Status check_quantization(const Fields& text) {
  if (text.has("quantization_config")) {
    const json* q = text.object("quantization_config");
    if (!q) return invalid_argument("config.json: field 'quantization_config' must be an object");
    const Fields f(*q);
    FT_ASSIGN_OR_RETURN(const std::string method, f.string_or("quant_method", ""));
    FT_ASSIGN_OR_RETURN(const std::string fmt, f.string_or("fmt", "e4m3"));
    FT_ASSIGN_OR_RETURN(const std::string scale_fmt, f.string_or("scale_fmt", "ue8m0"));
    FT_ASSIGN_OR_RETURN(const std::string activations, f.string_or("activation_scheme", "dynamic"));
    const auto refuse = [](const std::string& key, const std::string& value, const char* supported) {
      return unsupported("deepseek_v4: quantization_config." + key + " '" + value + "' is not supported (only " +
                         supported + ")");
    };
    if (method != "fp8") return refuse("quant_method", method, "'fp8', the releases' block-scaled FP8");
    if (fmt != "e4m3") return refuse("fmt", fmt, "'e4m3'");
    if (scale_fmt != "ue8m0") return refuse("scale_fmt", scale_fmt, "'ue8m0' or none");
    if (activations != "dynamic") return refuse("activation_scheme", activations, "'dynamic'");
    if (f.has("weight_block_size")) {
      FT_ASSIGN_OR_RETURN(const std::vector<int64_t> block, f.int_list_or_empty("weight_block_size"));
      if (block.size() != 2 || block[0] <= 0 || block[1] <= 0) {
        return invalid_argument("config.json: quantization_config.weight_block_size must be two positive integers");
      }
    }
  }
  FT_ASSIGN_OR_RETURN(const std::string experts, text.string_or("expert_dtype", ""));
  if (!experts.empty() && experts != "fp4" && experts != "fp8") {
    return unsupported("deepseek_v4: expert_dtype '" + experts + "' is not supported (only 'fp4', 'fp8' or none)");
  }
  return Status::ok();
}

Status check(const ModelConfig& cfg) {
  const ModelConfig::DeepseekV4& v4 = cfg.deepseek_v4;
  const auto positive = require_positive;
  FT_RETURN_IF_ERROR(positive(cfg.q_lora_rank, "q_lora_rank"));
  FT_RETURN_IF_ERROR(positive(cfg.sliding_window, "sliding_window"));
  FT_RETURN_IF_ERROR(positive(v4.hc_mult, "hc_mult"));
  FT_RETURN_IF_ERROR(positive(v4.hc_sinkhorn_iters, "hc_sinkhorn_iters"));
  FT_RETURN_IF_ERROR(positive(v4.o_groups, "o_groups"));
  FT_RETURN_IF_ERROR(positive(v4.o_lora_rank, "o_lora_rank"));
  if ((cfg.num_attention_heads * cfg.head_dim) % v4.o_groups != 0) {
    return invalid_argument("config.json: o_groups must divide num_attention_heads * head_dim");
  }
  if (!(v4.swiglu_limit > 0)) return invalid_argument("config.json: swiglu_limit must be positive");
  if (v4.hc_eps < 0) return invalid_argument("config.json: hc_eps must not be negative");
  bool csa = false, hca = false;
  for (V4AttentionKind k : v4.attention) {
    csa = csa || k == V4AttentionKind::kCsa;
    hca = hca || k == V4AttentionKind::kHca;
  }
  if (csa) FT_RETURN_IF_ERROR(positive(v4.csa_rate, "the compress rate of compressed_sparse_attention"));
  if (hca) FT_RETURN_IF_ERROR(positive(v4.hca_rate, "the compress rate of heavily_compressed_attention"));
  if (csa) {
    FT_RETURN_IF_ERROR(positive(cfg.index_n_heads, "index_n_heads"));
    FT_RETURN_IF_ERROR(positive(cfg.index_head_dim, "index_head_dim"));
    FT_RETURN_IF_ERROR(positive(cfg.index_topk, "index_topk"));
    // The index keys rope their last r dims too.
    if (cfg.index_head_dim < cfg.qk_rope_head_dim) {
      return invalid_argument(
          "config.json: index_head_dim must be at least the rope dims (head_dim * "
          "partial_rotary_factor = " +
          std::to_string(cfg.qk_rope_head_dim) + ")");
    }
  }
  return Status::ok();
}

}  // namespace

Status parse_deepseek_v4(const Fields& text, ModelConfig& cfg) {
  ModelConfig::DeepseekV4& v4 = cfg.deepseek_v4;
  // The per-layer lists below are sized by it (the common checks come after).
  if (cfg.num_hidden_layers <= 0) return invalid_argument("config.json: num_hidden_layers must be positive");
  // One K = V head whatever num_key_value_heads says; heads 512 wide by default, not hidden / heads.
  cfg.num_key_value_heads = 1;
  FT_ASSIGN_OR_RETURN(cfg.head_dim, text.integer_or("head_dim", 512));
  cfg.attention_bias = false;  // HF's V4 attention has no biases whatever attention_bias says
  cfg.rope_interleave = true;  // the roped tail turns adjacent pairs (ops_compressor.h rope_tail)
  FT_ASSIGN_OR_RETURN(cfg.q_lora_rank, text.integer_or("q_lora_rank", 1024));
  FT_ASSIGN_OR_RETURN(cfg.sliding_window, text.integer_or("sliding_window", 128));
  FT_ASSIGN_OR_RETURN(cfg.index_n_heads, text.integer_or("index_n_heads", 64));
  FT_ASSIGN_OR_RETURN(cfg.index_head_dim, text.integer_or("index_head_dim", 128));
  FT_ASSIGN_OR_RETURN(cfg.index_topk, text.integer_or("index_topk", 512));
  FT_ASSIGN_OR_RETURN(v4.hc_mult, text.integer_or("hc_mult", 4));
  FT_ASSIGN_OR_RETURN(v4.hc_sinkhorn_iters, text.integer_or("hc_sinkhorn_iters", 20));
  FT_ASSIGN_OR_RETURN(v4.hc_eps, text.number_or("hc_eps", 1e-6));
  FT_ASSIGN_OR_RETURN(v4.o_groups, text.integer_or("o_groups", 8));
  FT_ASSIGN_OR_RETURN(v4.o_lora_rank, text.integer_or("o_lora_rank", 1024));
  // The common layer list says what the engine's KV bookkeeping counts: every layer attends.
  cfg.layer_types.assign(std::size_t(cfg.num_hidden_layers), LayerKind::kFullAttention);
  FT_RETURN_IF_ERROR(parse_attention_kinds(text, cfg));
  FT_RETURN_IF_ERROR(parse_compress_rates(text, v4));
  FT_RETURN_IF_ERROR(parse_routers(text, cfg));
  FT_RETURN_IF_ERROR(parse_ropes(text, cfg));
  FT_RETURN_IF_ERROR(parse_moe(text, cfg));
  FT_RETURN_IF_ERROR(check_quantization(text));
  return check(cfg);
}

}  // namespace ft::engine::config

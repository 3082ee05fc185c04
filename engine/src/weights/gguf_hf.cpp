#include "weights/gguf_hf.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace ft::engine {

namespace {

using json = nlohmann::json;

enum class ArchId {
  kQwen3Moe,
  kQwen2Moe,
  kLlama,
  kGlm4Moe,
  kGptOss,
  kOlmoe,
  kErnie4_5Moe,
  kDeepseek2,
  kQwen3Next,
  kQwen35Moe
};

// An architecture llama.cpp writes and the HF model it was converted from.
struct GgufArch {
  std::string_view arch;  // general.architecture
  std::string_view model_type;
  std::string_view hf_class;
  bool norm_topk_prob;  // when the file has no {arch}.expert_weights_norm
  ArchId id;
};

constexpr GgufArch kArchs[] = {
    {"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM", true, ArchId::kQwen3Moe},
    {"qwen2moe", "qwen2_moe", "Qwen2MoeForCausalLM", false, ArchId::kQwen2Moe},
    // Mixtral is a "llama" with experts (a llama without them is a dense model: refused).
    {"llama", "mixtral", "MixtralForCausalLM", true, ArchId::kLlama},
    {"glm4moe", "glm4_moe", "Glm4MoeForCausalLM", true, ArchId::kGlm4Moe},
    {"gpt-oss", "gpt_oss", "GptOssForCausalLM", true, ArchId::kGptOss},
    {"olmoe", "olmoe", "OlmoeForCausalLM", false, ArchId::kOlmoe},
    {"ernie4_5-moe", "ernie4_5_moe", "Ernie4_5_MoeForCausalLM", true, ArchId::kErnie4_5Moe},
    // DeepSeek-V3 / R1, Kimi K2, GLM-4.7-Flash: latent attention. The converter writes
    // expert_weights_norm only when it is true.
    {"deepseek2", "deepseek_v3", "DeepseekV3ForCausalLM", false, ArchId::kDeepseek2},
    // Gated DeltaNet hybrids: Qwen3-Next, and Qwen3.5 / 3.6 MoE (text; as the text-only export).
    {"qwen3next", "qwen3_next", "Qwen3NextForCausalLM", true, ArchId::kQwen3Next},
    {"qwen35moe", "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM", true, ArchId::kQwen35Moe},
};

bool is_deltanet_arch(ArchId id) { return id == ArchId::kQwen3Next || id == ArchId::kQwen35Moe; }

// llama.cpp's per-layer tensor names (blk.N.<gguf>) and HF's (model.layers.N.<hf>).
struct LayerName {
  std::string_view gguf;
  std::string_view hf;
  bool as_row = false;  // a 1-D GGUF vector HF keeps as a [1, n] matrix
};

constexpr LayerName kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", true},
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
};

// Names one architecture gives otherwise (checked before the table above). GLM-4.5 and gpt-oss
// keep HF's post_attention_layernorm as llama.cpp's post_attention_norm; gpt-oss's router is
// mlp.router, and its experts' biases, which HF interleaves (gate_up_proj_bias), come as three
// stacks, under names of their own here; DeepSeek's latent attention has tensors of its own; the
// DeepSeek-style routers' correction bias is exp_probs_b, their shared experts plural.
struct ArchName {
  ArchId arch;
  LayerName name;
};

constexpr ArchName kArchNames[] = {
    {ArchId::kGlm4Moe, {"post_attention_norm.weight", "post_attention_layernorm.weight"}},
    {ArchId::kGlm4Moe, {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"}},
    {ArchId::kGlm4Moe, {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"}},
    {ArchId::kGlm4Moe, {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"}},
    {ArchId::kGlm4Moe, {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"}},
    {ArchId::kGptOss, {"post_attention_norm.weight", "post_attention_layernorm.weight"}},
    {ArchId::kGptOss, {"attn_sinks.weight", "self_attn.sinks"}},
    {ArchId::kGptOss, {"ffn_gate_inp.weight", "mlp.router.weight"}},
    {ArchId::kGptOss, {"ffn_gate_inp.bias", "mlp.router.bias"}},
    {ArchId::kGptOss, {"ffn_gate_exps.bias", "mlp.experts.gate_proj_bias"}},
    {ArchId::kGptOss, {"ffn_up_exps.bias", "mlp.experts.up_proj_bias"}},
    {ArchId::kGptOss, {"ffn_down_exps.bias", "mlp.experts.down_proj_bias"}},
    {ArchId::kDeepseek2, {"attn_q_a.weight", "self_attn.q_a_proj.weight"}},
    {ArchId::kDeepseek2, {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"}},
    {ArchId::kDeepseek2, {"attn_q_b.weight", "self_attn.q_b_proj.weight"}},
    {ArchId::kDeepseek2, {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"}},
    {ArchId::kDeepseek2, {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"}},
    {ArchId::kDeepseek2, {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"}},  // older converters
    {ArchId::kDeepseek2, {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"}},
    {ArchId::kDeepseek2, {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"}},
    {ArchId::kDeepseek2, {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"}},
    {ArchId::kDeepseek2, {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"}},
    {ArchId::kErnie4_5Moe, {"exp_probs_b.bias", "mlp.moe_statics.e_score_correction_bias"}},
    {ArchId::kErnie4_5Moe, {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"}},
    {ArchId::kErnie4_5Moe, {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"}},
    {ArchId::kErnie4_5Moe, {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"}},
};

// The Gated DeltaNet hybrids' names (qwen3next, qwen35moe): the layer norms as GLM's, the linear
// attention's projections (Qwen3-Next's in_proj_qkvz arrives split as Qwen3.5's in_proj_qkv +
// in_proj_z; its in_proj_ba is ssm_ba, taken apart below), convolution, gates and output.
constexpr LayerName kDeltaNetNames[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight"},
    {"attn_gate.weight", "linear_attn.in_proj_z.weight"},
    {"ssm_beta.weight", "linear_attn.in_proj_b.weight"},
    {"ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
    {"ssm_dt.bias", "linear_attn.dt_bias"},
    {"ssm_a", "linear_attn.A_log"},
    {"ssm_conv1d.weight", "linear_attn.conv1d.weight"},
    {"ssm_norm.weight", "linear_attn.norm.weight"},
    {"ssm_out.weight", "linear_attn.out_proj.weight"},
};

// Expert stacks [E, R, C]: one view per expert, model.layers.N.mlp.experts.E.<hf>.
constexpr LayerName kExpertStacks[] = {
    {"ffn_gate_exps.weight", "gate_proj.weight"},
    {"ffn_up_exps.weight", "up_proj.weight"},
    {"ffn_down_exps.weight", "down_proj.weight"},
};
// convert_hf_to_gguf.py --fuse-gate-up-exps: [E, 2I, H], gate rows first.
constexpr std::string_view kFusedGateUp = "ffn_gate_up_exps.weight";

const GgufArch* find_arch(std::string_view name) {
  for (const GgufArch& a : kArchs) {
    if (a.arch == name) return &a;
  }
  return nullptr;
}

// Bytes of one row of `cols` values of the tensor's ggml type.
std::size_t row_bytes(const GgufTensor& t, int64_t cols) {
  const GgmlType* type = ggml_type(t.ggml_type);
  return std::size_t(cols) / type->block_elems * type->block_bytes;
}

class Translator {
 public:
  Translator(const GgufFile& file, const GgufArch& arch, std::string label)
      : file_(file), md_(file.metadata()), arch_(arch), label_(std::move(label)) {}

  Result<GgufAsHf> run() {
    // llama.cpp reads a "llama" without expert_count as a dense model (Llama, Mistral): not ours.
    if (arch_.id == ArchId::kLlama && !md_.find(key("expert_count"))) {
      return unsupported(label_ + ": a llama GGUF without experts is a dense model; FreeToken runs MoE models");
    }
    FT_RETURN_IF_ERROR(count_layers());
    FT_RETURN_IF_ERROR(map_tensors());
    FT_RETURN_IF_ERROR(build_config());
    return std::move(out_);
  }

 private:
  std::string key(std::string_view k) const { return std::string(arch_.arch) + "." + std::string(k); }

  // The decoder layers: block_count less the multi-token-prediction layers GLM's converter appends.
  Status count_layers() {
    if (!md_.find(key("block_count")))
      return corrupt(label_ + ": metadata key '" + key("block_count") + "' is missing");
    FT_ASSIGN_OR_RETURN(const int64_t blocks, md_.get_int(key("block_count")));
    int64_t nextn = 0;
    if (md_.find(key("nextn_predict_layers"))) {
      FT_ASSIGN_OR_RETURN(nextn, md_.get_int(key("nextn_predict_layers")));
    }
    layers_ = blocks - nextn;
    if (blocks <= 0 || nextn < 0 || layers_ <= 0) {
      return corrupt(label_ + ": block_count " + std::to_string(blocks) + " with " + std::to_string(nextn) +
                     " prediction layers leaves no decoder layers");
    }
    return Status::ok();
  }

  // Copies an integer metadata key into the config when present (required: an error when absent).
  Status int_field(std::string_view gguf_key, const char* hf_key, bool required = false) {
    if (!md_.find(key(gguf_key))) {
      if (required) return corrupt(label_ + ": metadata key '" + key(gguf_key) + "' is missing");
      return Status::ok();
    }
    FT_ASSIGN_OR_RETURN(cfg_[hf_key], md_.get_int(key(gguf_key)));
    return Status::ok();
  }
  Status float_field(std::string_view gguf_key, const char* hf_key) {
    if (!md_.find(key(gguf_key))) return Status::ok();
    FT_ASSIGN_OR_RETURN(cfg_[hf_key], md_.get_float(key(gguf_key)));
    return Status::ok();
  }

  Status add(std::string hf_name, std::size_t tensor, std::size_t offset, std::size_t nbytes,
             std::vector<int64_t> shape) {
    if (!names_.emplace(hf_name, tensor).second) {
      return corrupt(label_ + ": two tensors map to '" + hf_name + "' (the second is '" + file_.tensors()[tensor].name +
                     "')");
    }
    out_.tensors.push_back({std::move(hf_name), tensor, offset, nbytes, std::move(shape)});
    return Status::ok();
  }

  Status build(GgufBuilt b) {
    if (!names_.emplace(b.hf_name, b.src).second) {
      return corrupt(label_ + ": two tensors map to '" + b.hf_name + "' (the second is '" +
                     file_.tensors()[b.src].name + "')");
    }
    out_.built.push_back(std::move(b));
    return Status::ok();
  }

  // A whole GGUF tensor under its HF name: in place, or built where the converter changed its
  // values (the DeltaNet hybrids' 1 + w norms and -exp(A_log)).
  Status place(std::string hf_name, std::size_t index, std::vector<int64_t> shape) {
    const GgufTensor& t = file_.tensors()[index];
    if (is_deltanet_arch(arch_.id)) {
      const bool one_plus = gguf_stores_one_plus(hf_name);
      const bool a_log = std::string_view(hf_name).ends_with("linear_attn.A_log");
      if (one_plus || a_log) {
        GgufBuilt b;
        b.op = a_log ? GgufBuilt::Op::kLogOfNegated : GgufBuilt::Op::kMinusOne;
        b.hf_name = std::move(hf_name);
        b.shape = std::move(shape);
        b.src = index;
        return build(std::move(b));
      }
    }
    return add(std::move(hf_name), index, 0, t.nbytes, std::move(shape));
  }

  // Qwen3-Next's in_proj_ba [nk * 2r, hidden]: per key head its r beta rows, then its r alpha rows
  // (HF's grouping) -> in_proj_b and in_proj_a [nv, hidden], value heads in order.
  Status split_ba(const std::string& prefix, std::size_t index) {
    const GgufTensor& t = file_.tensors()[index];
    FT_ASSIGN_OR_RETURN(const int64_t nk, md_.get_int(key("ssm.group_count")));
    FT_ASSIGN_OR_RETURN(const int64_t nv, md_.get_int(key("ssm.time_step_rank")));
    if (t.shape.size() != 2 || nk <= 0 || nv % nk != 0 || t.shape[0] != 2 * nv) {
      return corrupt(label_ + ": '" + t.name + "' is not [2 * ssm.time_step_rank, hidden] over ssm.group_count groups");
    }
    const int64_t r = nv / nk;
    for (const int half : {0, 1}) {
      GgufBuilt b;
      b.op = GgufBuilt::Op::kGatherRows;
      b.hf_name = prefix + (half ? "linear_attn.in_proj_a.weight" : "linear_attn.in_proj_b.weight");
      b.shape = {nv, t.shape[1]};
      b.src = index;
      for (int64_t g = 0; g < nk; ++g)
        for (int64_t j = 0; j < r; ++j) b.rows.push_back(g * 2 * r + half * r + j);
      FT_RETURN_IF_ERROR(build(std::move(b)));
    }
    return Status::ok();
  }

  // One view per expert of a stack [E, R, C], rows [row0, row0 + rows) of each.
  Status add_experts(const std::string& layer_prefix, std::string_view hf, std::size_t index, int64_t row0,
                     int64_t rows) {
    const GgufTensor& t = file_.tensors()[index];
    if (t.shape.size() != 3) {
      return corrupt(label_ + ": expert tensor '" + t.name + "' has " + std::to_string(t.shape.size()) +
                     " dimensions, expected 3");
    }
    const std::size_t rb = row_bytes(t, t.shape[2]);
    for (int64_t e = 0; e < t.shape[0]; ++e) {
      const std::size_t offset = (std::size_t(e) * std::size_t(t.shape[1]) + std::size_t(row0)) * rb;
      FT_RETURN_IF_ERROR(add(layer_prefix + "mlp.experts." + std::to_string(e) + "." + std::string(hf), index, offset,
                             std::size_t(rows) * rb, {rows, t.shape[2]}));
    }
    return Status::ok();
  }

  Status map_layer_tensor(std::size_t index, int64_t layer, std::string_view rest) {
    const GgufTensor& t = file_.tensors()[index];
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    if (layer >= layers_) return Status::ok();  // multi-token-prediction layers (GLM's nextn): unused
    if (rest == "ffn_gate_inp.weight") moe_layers_.push_back(layer);
    if (arch_.id == ArchId::kDeepseek2 && (rest == "attn_k_b.weight" || rest == "attn_v_b.weight")) {
      (rest == "attn_k_b.weight" ? k_b_ : v_b_)[layer] = index;
      return Status::ok();
    }
    for (const ArchName& a : kArchNames) {
      if (a.arch != arch_.id || a.name.gguf != rest) continue;
      return place(prefix + std::string(a.name.hf), index, t.shape);
    }
    if (is_deltanet_arch(arch_.id)) {
      if (rest == "ssm_a") linear_layers_.push_back(layer);
      if (rest == "ssm_ba.weight") return split_ba(prefix, index);
      for (const LayerName& n : kDeltaNetNames) {
        if (n.gguf != rest) continue;
        std::vector<int64_t> shape = t.shape;  // the conv1d weight squeezed: HF's [channels, 1, K]
        if (rest == "ssm_conv1d.weight" && shape.size() == 2) shape = {shape[0], 1, shape[1]};
        return place(prefix + std::string(n.hf), index, std::move(shape));
      }
    }
    for (const LayerName& n : kLayerNames) {
      if (n.gguf != rest) continue;
      std::vector<int64_t> shape = t.shape;
      if (n.as_row && shape.size() == 1) shape = {1, shape[0]};
      return place(prefix + std::string(n.hf), index, std::move(shape));
    }
    for (const LayerName& n : kExpertStacks) {
      if (n.gguf == rest) return add_experts(prefix, n.hf, index, 0, t.shape.size() == 3 ? t.shape[1] : 0);
    }
    if (rest == kFusedGateUp && t.shape.size() == 3 && t.shape[1] % 2 == 0) {
      const int64_t inter = t.shape[1] / 2;
      FT_RETURN_IF_ERROR(add_experts(prefix, "gate_proj.weight", index, 0, inter));
      return add_experts(prefix, "up_proj.weight", index, inter, inter);
    }
    return unsupported(label_ + ": tensor '" + t.name + "' of a " + std::string(arch_.arch) +
                       " model has no meaning to FreeToken's " + std::string(arch_.model_type) + " (a newer variant?)");
  }

  Status map_tensors() {
    const std::vector<GgufTensor>& tensors = file_.tensors();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const GgufTensor& t = tensors[i];
      const std::string_view name = t.name;
      if (name == "token_embd.weight") {
        FT_RETURN_IF_ERROR(add("model.embed_tokens.weight", i, 0, t.nbytes, t.shape));
        if (!t.shape.empty()) vocab_ = t.shape[0];
      } else if (name == "output_norm.weight") {
        FT_RETURN_IF_ERROR(place("model.norm.weight", i, t.shape));
      } else if (name == "output.weight") {
        FT_RETURN_IF_ERROR(add("lm_head.weight", i, 0, t.nbytes, t.shape));
        has_output_ = true;
      } else if (name == "rope_freqs.weight") {
        return unsupported(label_ + ": tensor 'rope_freqs.weight' (precomputed RoPE frequencies) is not supported");
      } else if (name.starts_with("blk.")) {
        const std::size_t dot = name.find('.', 4);
        int64_t layer = -1;
        if (dot != std::string_view::npos && dot > 4 && dot - 4 <= 6 &&
            std::all_of(name.begin() + 4, name.begin() + long(dot), [](char c) { return c >= '0' && c <= '9'; })) {
          layer = std::stoll(std::string(name.substr(4, dot - 4)));
        }
        if (layer < 0) return corrupt(label_ + ": tensor '" + t.name + "' has no layer number after 'blk.'");
        FT_RETURN_IF_ERROR(map_layer_tensor(i, layer, name.substr(dot + 1)));
      } else {
        return unsupported(label_ + ": tensor '" + t.name + "' of a " + std::string(arch_.arch) +
                           " model has no meaning to FreeToken's " + std::string(arch_.model_type));
      }
    }
    if (vocab_ <= 0) return corrupt(label_ + ": no token_embd.weight tensor");
    return join_kv_b();
  }

  // DeepSeek's split kv_b_proj: both halves of every layer that has one, shapes that fit together.
  Status join_kv_b() {
    for (const auto& [layer, k] : k_b_) {
      const auto v = v_b_.find(layer);
      const std::string name = "model.layers." + std::to_string(layer) + ".self_attn.kv_b_proj.weight";
      if (v == v_b_.end())
        return corrupt(label_ + ": layer " + std::to_string(layer) + " has attn_k_b but no attn_v_b");
      const GgufTensor& kt = file_.tensors()[k];
      const GgufTensor& vt = file_.tensors()[v->second];
      // k_b [heads, kv_lora, nope], v_b [heads, v, kv_lora]
      if (kt.shape.size() != 3 || vt.shape.size() != 3 || kt.shape[0] != vt.shape[0] || kt.shape[1] != vt.shape[2]) {
        return corrupt(label_ + ": '" + kt.name + "' and '" + vt.name + "' do not split one kv_b_proj");
      }
      GgufBuilt b;
      b.op = GgufBuilt::Op::kJoinKvB;
      b.hf_name = name;
      b.shape = {kt.shape[0] * (kt.shape[2] + vt.shape[1]), kt.shape[1]};
      b.src = k;
      b.src2 = v->second;
      b.heads = kt.shape[0];
      b.nope = kt.shape[2];
      b.v_dim = vt.shape[1];
      b.kv_lora = kt.shape[1];
      FT_RETURN_IF_ERROR(build(std::move(b)));
    }
    for (const auto& [layer, v] : v_b_) {
      if (!k_b_.contains(layer)) {
        return corrupt(label_ + ": layer " + std::to_string(layer) + " has attn_v_b but no attn_k_b");
      }
    }
    return Status::ok();
  }

  Status build_config() {
    cfg_["architectures"] = json::array({std::string(arch_.hf_class)});
    cfg_["model_type"] = std::string(arch_.model_type);
    cfg_["vocab_size"] = vocab_;
    cfg_["hidden_act"] = "silu";
    FT_RETURN_IF_ERROR(int_field("embedding_length", "hidden_size", true));
    cfg_["num_hidden_layers"] = layers_;
    FT_RETURN_IF_ERROR(int_field("attention.head_count", "num_attention_heads", true));
    FT_RETURN_IF_ERROR(int_field("attention.head_count_kv", "num_key_value_heads"));
    FT_RETURN_IF_ERROR(int_field("attention.key_length", "head_dim"));
    FT_RETURN_IF_ERROR(int_field("context_length", "max_position_embeddings"));
    FT_RETURN_IF_ERROR(int_field("feed_forward_length", "intermediate_size"));
    FT_RETURN_IF_ERROR(int_field("expert_feed_forward_length", "moe_intermediate_size"));
    FT_RETURN_IF_ERROR(int_field("expert_shared_feed_forward_length", "shared_expert_intermediate_size"));
    FT_RETURN_IF_ERROR(int_field("expert_count", "num_experts"));
    FT_RETURN_IF_ERROR(int_field("expert_used_count", "num_experts_per_tok"));
    FT_RETURN_IF_ERROR(float_field("attention.layer_norm_rms_epsilon", "rms_norm_eps"));
    if (arch_.id != ArchId::kDeepseek2 && md_.find(key("attention.value_length")) && cfg_.contains("head_dim")) {
      FT_ASSIGN_OR_RETURN(const int64_t v, md_.get_int(key("attention.value_length")));
      if (v != cfg_["head_dim"].get<int64_t>()) {
        return unsupported(label_ + ": value heads (" + std::to_string(v) + ") narrower or wider than key heads (" +
                           std::to_string(cfg_["head_dim"].get<int64_t>()) + ") are not supported for " +
                           std::string(arch_.arch));
      }
    }
    bool norm_topk = arch_.norm_topk_prob;
    if (md_.find(key("expert_weights_norm"))) {
      FT_ASSIGN_OR_RETURN(norm_topk, md_.get_bool(key("expert_weights_norm")));
    }
    cfg_["norm_topk_prob"] = norm_topk;
    cfg_["tie_word_embeddings"] = !has_output_;
    cfg_["use_sliding_window"] = false;
    cfg_["decoder_sparse_step"] = 1;
    // Biases are in the file or not: the config says what it holds (Qwen2-MoE's q/k/v biases,
    // Qwen3-MoE's attention_bias).
    cfg_["qkv_bias"] = names_.contains("model.layers.0.self_attn.q_proj.bias");
    cfg_["attention_bias"] = names_.contains("model.layers.0.self_attn.q_proj.bias");
    // Layers without a router are dense MLPs (Qwen's mlp_only_layers).
    if (cfg_.contains("num_hidden_layers")) {
      json dense = json::array();
      std::sort(moe_layers_.begin(), moe_layers_.end());
      for (int64_t i = 0; i < cfg_["num_hidden_layers"].get<int64_t>(); ++i) {
        if (!std::binary_search(moe_layers_.begin(), moe_layers_.end(), i)) dense.push_back(i);
      }
      cfg_["mlp_only_layers"] = dense;
    }
    FT_RETURN_IF_ERROR(rope());
    FT_RETURN_IF_ERROR(arch_config());
    json gen = json::object();
    for (const auto& [gguf_key, hf_key] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token_id"},
                                           std::pair{"tokenizer.ggml.eos_token_id", "eos_token_id"}}) {
      if (!md_.find(gguf_key)) continue;
      FT_ASSIGN_OR_RETURN(const int64_t id, md_.get_int(gguf_key));
      cfg_[hf_key] = id;
      gen[hf_key] = id;
    }
    // An end-of-turn token other than eos also ends generation (Qwen3's <|im_end|> vs <|endoftext|>).
    if (md_.find("tokenizer.ggml.eot_token_id") && gen.contains("eos_token_id")) {
      FT_ASSIGN_OR_RETURN(const int64_t eot, md_.get_int("tokenizer.ggml.eot_token_id"));
      const int64_t eos = gen["eos_token_id"].get<int64_t>();
      if (eot != eos) gen["eos_token_id"] = json::array({eos, eot});
    }
    out_.config_json = cfg_.dump(1);
    out_.generation_config_json = gen.empty() ? "" : gen.dump(1);
    return Status::ok();
  }

  // What one architecture's config says beyond the common keys.
  Status arch_config() {
    switch (arch_.id) {
      case ArchId::kLlama:
        // The converter permutes q and k rows so RoPE rotates adjacent pairs (llama.cpp's order):
        // rotating those pairs computes the same scores as HF's rotation of halves.
        cfg_["rope_interleave"] = true;
        return Status::ok();
      case ArchId::kGlm4Moe:
        return glm4_moe_config();
      case ArchId::kGptOss:
        return gpt_oss_config();
      case ArchId::kErnie4_5Moe:
        return ernie4_5_moe_config();
      case ArchId::kDeepseek2:
        return deepseek2_config();
      case ArchId::kQwen3Next:
      case ArchId::kQwen35Moe:
        return deltanet_config();
      default:
        return Status::ok();
    }
  }

  // GLM-4.5's DeepSeek-V3-style router and shared experts; dense layers first.
  Status glm4_moe_config() {
    FT_RETURN_IF_ERROR(sigmoid_moe_config());
    cfg_["use_qk_norm"] = names_.contains("model.layers.0.self_attn.q_norm.weight");
    return Status::ok();
  }

  // The DeepSeek-V3-style MoE keys GLM-4.5 and DeepSeek share: routed and shared experts, dense
  // leading layers, the routed scaling, expert groups (one when the file says none: GLM-4.5's
  // converter writes no group keys, its releases route in one group).
  Status sigmoid_moe_config() {
    // llama.cpp's expert_gating_func: 2 sigmoid, 1 softmax (DeepSeek-V2's routers, which the config
    // parser refuses by their scoring_func).
    int64_t gating = 2;
    if (md_.find(key("expert_gating_func"))) {
      FT_ASSIGN_OR_RETURN(gating, md_.get_int(key("expert_gating_func")));
    }
    cfg_["scoring_func"] = gating == 2 ? "sigmoid" : "softmax";
    if (cfg_.contains("num_experts")) cfg_["n_routed_experts"] = cfg_["num_experts"];
    FT_RETURN_IF_ERROR(int_field("expert_shared_count", "n_shared_experts"));
    // The dense leading layers are those without a router: the tensors say it even where
    // leading_dense_block_count does not (GLM-4.7-Flash's config names its dense layers in
    // mlp_layer_types, which the converter does not read).
    const int64_t dense = first_moe_layer();
    for (int64_t i = dense; i < layers_; ++i) {
      if (!std::binary_search(moe_layers_.begin(), moe_layers_.end(), i)) {
        return unsupported(label_ + ": layer " + std::to_string(i) +
                           " has no router after MoE layers: only leading dense layers are supported");
      }
    }
    cfg_["first_k_dense_replace"] = dense;
    FT_RETURN_IF_ERROR(float_field("expert_weights_scale", "routed_scaling_factor"));
    cfg_["n_group"] = 1;
    cfg_["topk_group"] = 1;
    FT_RETURN_IF_ERROR(int_field("expert_group_count", "n_group"));
    return int_field("expert_group_used_count", "topk_group");
  }

  // DeepSeek-V3: latent attention (the GGUF says one kv head: the latent; HF repeats none), the
  // sigmoid router with its correction bias and groups, shared experts, dense leading layers, and
  // YaRN whose softmax factor the file keeps as 0.1 * mscale_all_dim (mscale: 1, as released).
  Status deepseek2_config() {
    cfg_["num_key_value_heads"] = cfg_["num_attention_heads"];
    cfg_.erase("head_dim");  // key_length is the latent's (kv_lora + rope); MLA widths follow
    const auto get = [&](std::string_view k) -> Result<int64_t> { return md_.get_int(key(k)); };
    FT_ASSIGN_OR_RETURN(const int64_t kv_lora, get("attention.kv_lora_rank"));
    FT_ASSIGN_OR_RETURN(const int64_t rope_dim, get("rope.dimension_count"));
    // Absorption-era files say the per-head widths in *_mla keys; older ones in key/value_length.
    const bool mla_keys = md_.find(key("attention.key_length_mla")) != nullptr;
    FT_ASSIGN_OR_RETURN(const int64_t qk_head, get(mla_keys ? "attention.key_length_mla" : "attention.key_length"));
    FT_ASSIGN_OR_RETURN(const int64_t v_head, get(mla_keys ? "attention.value_length_mla" : "attention.value_length"));
    cfg_["kv_lora_rank"] = kv_lora;
    cfg_["qk_rope_head_dim"] = rope_dim;
    cfg_["qk_nope_head_dim"] = qk_head - rope_dim;
    cfg_["v_head_dim"] = v_head;
    cfg_["q_lora_rank"] = nullptr;
    FT_RETURN_IF_ERROR(int_field("attention.q_lora_rank", "q_lora_rank"));
    cfg_["rope_interleave"] = true;
    FT_RETURN_IF_ERROR(sigmoid_moe_config());
    // DeepSeek-V2's routers have no correction bias: refused by the config parser by topk_method.
    cfg_["topk_method"] =
        names_.contains("model.layers." + std::to_string(first_moe_layer()) + ".mlp.gate.e_score_correction_bias")
            ? "noaux_tc"
            : "greedy";
    json& rp = cfg_["rope_parameters"];
    if (rp["rope_type"] == "yarn") {
      rp["mscale"] = 1.0;
      if (md_.find(key("rope.scaling.yarn_log_multiplier"))) {
        FT_ASSIGN_OR_RETURN(const double log_mul, md_.get_float(key("rope.scaling.yarn_log_multiplier")));
        rp["mscale_all_dim"] = log_mul / 0.1;
      }
      for (const auto& [gguf_key, hf_key] : {std::pair{"rope.scaling.yarn_beta_fast", "beta_fast"},
                                             std::pair{"rope.scaling.yarn_beta_slow", "beta_slow"}}) {
        if (!md_.find(key(gguf_key))) continue;
        FT_ASSIGN_OR_RETURN(rp[hf_key], md_.get_float(key(gguf_key)));
      }
    }
    return Status::ok();
  }

  // Qwen3-Next / Qwen3.5: the linear attention's widths from the ssm.* keys, which layers are
  // linear (those with an ssm_a: the file's layer list is optional), and for qwen35moe the value
  // heads the converter reordered into tiled order.
  Status deltanet_config() {
    FT_RETURN_IF_ERROR(int_field("ssm.conv_kernel", "linear_conv_kernel_dim", true));
    FT_RETURN_IF_ERROR(int_field("ssm.state_size", "linear_key_head_dim", true));
    FT_RETURN_IF_ERROR(int_field("ssm.group_count", "linear_num_key_heads", true));
    FT_RETURN_IF_ERROR(int_field("ssm.time_step_rank", "linear_num_value_heads", true));
    FT_RETURN_IF_ERROR(int_field("ssm.inner_size", "linear_value_head_dim", true));
    const int64_t nv = cfg_["linear_num_value_heads"].get<int64_t>();
    const int64_t inner = cfg_["linear_value_head_dim"].get<int64_t>();
    if (nv <= 0 || inner % nv != 0) {
      return corrupt(label_ + ": ssm.inner_size " + std::to_string(inner) +
                     " is not a multiple of ssm.time_step_rank " + std::to_string(nv));
    }
    cfg_["linear_value_head_dim"] = inner / nv;
    std::sort(linear_layers_.begin(), linear_layers_.end());
    json types = json::array();
    for (int64_t i = 0; i < layers_; ++i) {
      types.push_back(std::binary_search(linear_layers_.begin(), linear_layers_.end(), i) ? "linear_attention"
                                                                                          : "full_attention");
    }
    cfg_["layer_types"] = types;
    cfg_["linear_value_heads_tiled"] = arch_.id == ArchId::kQwen35Moe;
    return Status::ok();
  }

  // The first layer with a router (moe_layers_ is sorted by build_config).
  int64_t first_moe_layer() const { return moe_layers_.empty() ? layers_ : moe_layers_.front(); }

  // ERNIE 4.5: MoE layers from moe_layer_start_index on, every moe_layer_interval-th; shared
  // experts as wide as moe_num_shared_experts routed ones.
  Status ernie4_5_moe_config() {
    if (cfg_.contains("num_experts")) cfg_["moe_num_experts"] = cfg_["num_experts"];
    FT_RETURN_IF_ERROR(int_field("expert_shared_count", "moe_num_shared_experts"));
    FT_RETURN_IF_ERROR(int_field("leading_dense_block_count", "moe_layer_start_index"));
    FT_RETURN_IF_ERROR(int_field("interleave_moe_layer_step", "moe_layer_interval"));
    cfg_["use_bias"] = false;
    return Status::ok();
  }

  // gpt-oss: every other layer (the first included) attends within the window, YaRN untruncated.
  Status gpt_oss_config() {
    FT_RETURN_IF_ERROR(int_field("attention.sliding_window", "sliding_window", true));
    json types = json::array();
    for (int64_t i = 0; i < layers_; ++i) types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    cfg_["layer_types"] = types;
    cfg_["rope_parameters"]["truncate"] = false;
    return Status::ok();
  }

  Status rope() {
    json rp = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
    if (md_.find(key("rope.freq_base"))) {
      FT_ASSIGN_OR_RETURN(rp["rope_theta"], md_.get_float(key("rope.freq_base")));
    }
    if (md_.find(key("rope.dimension_count")) && cfg_.contains("head_dim")) {
      FT_ASSIGN_OR_RETURN(const int64_t dims, md_.get_int(key("rope.dimension_count")));
      const int64_t head_dim = cfg_["head_dim"].get<int64_t>();
      if (dims != head_dim) rp["partial_rotary_factor"] = double(dims) / double(head_dim);
    }
    if (md_.find(key("rope.scaling.type"))) {
      FT_ASSIGN_OR_RETURN(const std::string_view type, md_.get_string(key("rope.scaling.type")));
      if (type == "yarn") {
        rp["rope_type"] = "yarn";
        FT_ASSIGN_OR_RETURN(rp["factor"], md_.get_float(key("rope.scaling.factor")));
        FT_ASSIGN_OR_RETURN(rp["original_max_position_embeddings"],
                            md_.get_int(key("rope.scaling.original_context_length")));
      } else if (type != "none") {
        return unsupported(label_ + ": RoPE scaling '" + std::string(type) + "' is not supported for " +
                           std::string(arch_.arch));
      }
    }
    cfg_["rope_parameters"] = rp;
    return Status::ok();
  }

  const GgufFile& file_;
  const GgufMetadata& md_;
  const GgufArch& arch_;
  std::string label_;
  json cfg_ = json::object();
  GgufAsHf out_;
  std::map<std::string, std::size_t> names_;
  std::vector<int64_t> moe_layers_;
  std::map<int64_t, std::size_t> k_b_, v_b_;  // DeepSeek's kv_b_proj halves by layer
  std::vector<int64_t> linear_layers_;        // the DeltaNet hybrids' linear-attention layers
  int64_t vocab_ = 0;
  int64_t layers_ = 0;
  bool has_output_ = false;
};

}  // namespace

Result<GgufAsHf> gguf_as_hf(const GgufFile& file, const std::string& label) {
  FT_ASSIGN_OR_RETURN(const std::string_view arch_name, file.metadata().get_string("general.architecture"));
  const GgufArch* arch = find_arch(arch_name);
  if (!arch) {
    std::string known;
    for (const std::string& a : gguf_supported_architectures()) known += (known.empty() ? "" : ", ") + a;
    return unsupported(label + ": GGUF architecture '" + std::string(arch_name) +
                       "' is not supported (supported: " + known + ")");
  }
  return Translator(file, *arch, label).run();
}

namespace {

// kv_b_proj rows: per head its nope key rows (k_b transposed), then its v rows.
Status join_kv_b(const GgufBuilt& j, const TensorView& k, const TensorView& v, float* out) {
  const std::size_t heads = std::size_t(j.heads), nope = std::size_t(j.nope), vd = std::size_t(j.v_dim),
                    lora = std::size_t(j.kv_lora);
  std::vector<float> kf(heads * lora * nope);
  FT_RETURN_IF_ERROR(to_f32(k, kf.data(), 0, kf.size()));
  for (std::size_t h = 0; h < heads; ++h) {
    float* rows = out + h * (nope + vd) * lora;
    for (std::size_t i = 0; i < nope; ++i)
      for (std::size_t c = 0; c < lora; ++c) rows[i * lora + c] = kf[(h * lora + c) * nope + i];
    FT_RETURN_IF_ERROR(to_f32(v, rows + nope * lora, h * vd * lora, vd * lora));  // v rows as stored
  }
  return Status::ok();
}

}  // namespace

std::size_t GgufBuilt::numel() const {
  std::size_t n = 1;
  for (const int64_t d : shape) n *= std::size_t(d);
  return n;
}

bool gguf_stores_one_plus(std::string_view hf_name) {
  constexpr std::string_view kOnePlus[] = {"input_layernorm.weight", "post_attention_layernorm.weight",
                                           "self_attn.q_norm.weight", "self_attn.k_norm.weight", "model.norm.weight"};
  return std::any_of(std::begin(kOnePlus), std::end(kOnePlus),
                     [&](std::string_view n) { return hf_name.ends_with(n); });
}

Status gguf_build(const GgufBuilt& b, const TensorView& src, const TensorView* src2, float* out) {
  const std::size_t n = b.numel();
  switch (b.op) {
    case GgufBuilt::Op::kJoinKvB:
      if (!src2) return internal_error("gguf_build: kv_b_proj needs attn_v_b");
      return join_kv_b(b, src, *src2, out);
    case GgufBuilt::Op::kMinusOne:
    case GgufBuilt::Op::kLogOfNegated: {
      FT_RETURN_IF_ERROR(to_f32(src, out, 0, n));
      for (std::size_t i = 0; i < n; ++i) out[i] = b.op == GgufBuilt::Op::kMinusOne ? out[i] - 1.0f : std::log(-out[i]);
      return Status::ok();
    }
    case GgufBuilt::Op::kGatherRows: {
      const std::size_t cols = b.shape.size() == 2 ? std::size_t(b.shape[1]) : 0;
      for (std::size_t i = 0; i < b.rows.size(); ++i) {
        FT_RETURN_IF_ERROR(to_f32(src, out + i * cols, std::size_t(b.rows[i]) * cols, cols));
      }
      return Status::ok();
    }
  }
  return internal_error("gguf_build: unknown op");
}

std::string_view gguf_layer_name(std::string_view hf) {
  for (const LayerName& n : kLayerNames)
    if (n.hf == hf) return n.gguf;
  return {};
}

std::string_view gguf_deltanet_layer_name(std::string_view hf) {
  for (const LayerName& n : kDeltaNetNames)
    if (n.hf == hf) return n.gguf;
  return gguf_layer_name(hf);
}

std::string_view gguf_expert_stack_name(std::string_view hf) {
  for (const LayerName& n : kExpertStacks)
    if (n.hf == hf) return n.gguf;
  return {};
}

std::vector<std::string> gguf_supported_architectures() {
  std::vector<std::string> out;
  for (const GgufArch& a : kArchs) out.emplace_back(a.arch);
  return out;
}

}  // namespace ft::engine

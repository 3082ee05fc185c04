// Writes a Qwen-MoE HF checkpoint (the tests' random ones) as the GGUF file llama.cpp's converter
// would make of it: qwen3moe / qwen2moe metadata, llama.cpp's tensor names, experts stacked into
// ffn_*_exps, the weights' bytes unchanged (F32, F16, BF16). Test-only: it lets the tests compare a
// model loaded from GGUF with the same weights loaded from safetensors, and serve a GGUF with a
// real vocabulary (`extra_kvs`, e.g. every tokenizer.* entry of a vocab-only GGUF).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ft/engine/checkpoint.h"
#include "ft/engine/gguf.h"
#include "gguf_test_util.h"

namespace ft::test::gguf_from_hf {

using engine::gguf_test::kv_bool;
using engine::gguf_test::kv_f32;
using engine::gguf_test::kv_string;
using engine::gguf_test::kv_u32;
using engine::gguf_test::le;
using engine::gguf_test::str;

// One metadata entry of another GGUF file, re-encoded as it was.
inline std::string kv_copy(const engine::GgufKv& kv) {
  const auto* raw = reinterpret_cast<const char*>(kv.value.data);
  std::string out = str(kv.key) + le<uint32_t>(uint32_t(kv.value.type));
  if (kv.value.type == engine::GgufValueType::kArray) {
    out += le<uint32_t>(uint32_t(kv.value.elem_type)) + le<uint64_t>(kv.value.count);
  } else if (kv.value.type == engine::GgufValueType::kString) {
    out += le<uint64_t>(kv.value.size);
  }
  return out + std::string(raw, kv.value.size);
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // slowest-first
  uint32_t type = 0;           // ggml: F32 0, F16 1, BF16 30
  std::string data;
};

inline uint32_t ggml_type_of(engine::DType d) {
  return d == engine::DType::kF32 ? 0 : d == engine::DType::kF16 ? 1 : 30;
}

inline std::string bytes_of(const engine::TensorView& v) {
  return std::string(reinterpret_cast<const char*>(v.data), v.nbytes);
}

// GGUF v3, alignment 32.
inline void write_gguf(const std::filesystem::path& path, const std::vector<std::string>& kvs,
                       const std::vector<Tensor>& tensors) {
  std::string head = "GGUF" + le<uint32_t>(3) + le<uint64_t>(tensors.size()) + le<uint64_t>(kvs.size());
  for (const std::string& kv : kvs) head += kv;
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors) {
    head += str(t.name) + le<uint32_t>(uint32_t(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) head += le<uint64_t>(uint64_t(*d));
    head += le(t.type) + le(offset);
    offsets.push_back(offset);
    offset += (t.data.size() + 31) / 32 * 32;
  }
  head.resize((head.size() + 31) / 32 * 32, '\0');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(head.data(), std::streamsize(head.size()));
  for (const Tensor& t : tensors) {
    std::string d = t.data;
    d.resize((d.size() + 31) / 32 * 32, '\0');
    out.write(d.data(), std::streamsize(d.size()));
  }
}

// HF per-layer names -> llama.cpp's (the converter's tensor map for the Qwen MoE architectures).
inline const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> m = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
  };
  return m;
}

// `dir` (a qwen3_moe or qwen2_moe checkpoint with per-expert tensors) as a GGUF at `out`.
inline void write(const std::filesystem::path& dir, const std::filesystem::path& out,
                  const std::vector<std::string>& extra_kvs = {}) {
  auto ckpt = engine::Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  const auto cfg = nlohmann::json::parse(ckpt->config_text());
  const std::string model_type = cfg["model_type"];
  const std::string arch = model_type == "qwen2_moe" ? "qwen2moe" : "qwen3moe";
  const int64_t L = cfg["num_hidden_layers"], E = cfg.value("num_experts", 0), heads = cfg["num_attention_heads"];
  const int64_t hidden = cfg["hidden_size"], head_dim = cfg.value("head_dim", hidden / heads);
  std::vector<std::string> kvs = {
      kv_string("general.architecture", arch),
      kv_u32(arch + ".block_count", uint32_t(L)),
      kv_u32(arch + ".context_length", uint32_t(cfg.value("max_position_embeddings", 4096))),
      kv_u32(arch + ".embedding_length", uint32_t(hidden)),
      kv_u32(arch + ".feed_forward_length", uint32_t(cfg.value("intermediate_size", 0))),
      kv_u32(arch + ".attention.head_count", uint32_t(heads)),
      kv_u32(arch + ".attention.head_count_kv", uint32_t(cfg.value("num_key_value_heads", heads))),
      kv_u32(arch + ".attention.key_length", uint32_t(head_dim)),
      kv_u32(arch + ".attention.value_length", uint32_t(head_dim)),
      kv_f32(arch + ".attention.layer_norm_rms_epsilon", cfg.value("rms_norm_eps", 1e-6f)),
      kv_f32(arch + ".rope.freq_base",
             float(cfg.contains("rope_parameters") ? cfg["rope_parameters"].value("rope_theta", 1e4)
                                                   : cfg.value("rope_theta", 1e4))),
      kv_u32(arch + ".expert_count", uint32_t(E)),
      kv_u32(arch + ".expert_used_count", uint32_t(cfg.value("num_experts_per_tok", 0))),
      kv_u32(arch + ".expert_feed_forward_length", uint32_t(cfg.value("moe_intermediate_size", 0))),
      kv_bool(arch + ".expert_weights_norm", cfg.value("norm_topk_prob", false)),
  };
  if (cfg.value("shared_expert_intermediate_size", 0) > 0) {
    kvs.push_back(
        kv_u32(arch + ".expert_shared_feed_forward_length", uint32_t(cfg["shared_expert_intermediate_size"])));
  }
  kvs.insert(kvs.end(), extra_kvs.begin(), extra_kvs.end());

  std::vector<Tensor> tensors;
  std::map<std::string, Tensor> stacks;  // "blk.N.ffn_gate_exps.weight" -> experts in order
  for (const std::string& name : ckpt->tensor_names()) {
    auto v = ckpt->tensor(name);
    ASSERT_TRUE(v.is_ok()) << v.status().to_string();
    const Tensor t{"", v->shape, ggml_type_of(v->dtype), bytes_of(*v)};
    if (name == "model.embed_tokens.weight") {
      tensors.push_back({"token_embd.weight", t.shape, t.type, t.data});
    } else if (name == "model.norm.weight") {
      tensors.push_back({"output_norm.weight", t.shape, t.type, t.data});
    } else if (name == "lm_head.weight") {
      tensors.push_back({"output.weight", t.shape, t.type, t.data});
    } else {
      ASSERT_EQ(name.rfind("model.layers.", 0), 0u) << name;
      const std::size_t dot = name.find('.', 13);
      const std::string layer = name.substr(13, dot - 13), rest = name.substr(dot + 1);
      const std::string blk = "blk." + layer + ".";
      if (rest.rfind("mlp.experts.", 0) == 0) {
        // mlp.experts.E.{gate,up,down}_proj.weight: appended in expert order (names sort 0, 1, 10, 11, ..: keyed).
        const std::size_t e_end = rest.find('.', 12);
        const int64_t e = std::stoll(rest.substr(12, e_end - 12));
        const std::string kind = rest.substr(e_end + 1, rest.find('_', e_end) - e_end - 1);  // gate, up, down
        Tensor& s = stacks[blk + "ffn_" + kind + "_exps.weight"];
        if (s.data.empty())
          s = {blk + "ffn_" + kind + "_exps.weight",
               {E, t.shape[0], t.shape[1]},
               t.type,
               std::string(std::size_t(E) * t.data.size(), '\0')};
        s.data.replace(std::size_t(e) * t.data.size(), t.data.size(), t.data);
      } else {
        const auto it = layer_names().find(rest);
        ASSERT_NE(it, layer_names().end()) << "no llama.cpp name for " << name;
        std::vector<int64_t> shape = t.shape;
        if (rest == "mlp.shared_expert_gate.weight") shape = {shape.back()};  // a vector in GGUF
        tensors.push_back({blk + it->second, shape, t.type, t.data});
      }
    }
  }
  for (auto& [name, s] : stacks) tensors.push_back(std::move(s));
  write_gguf(out, kvs, tensors);
}

}  // namespace ft::test::gguf_from_hf

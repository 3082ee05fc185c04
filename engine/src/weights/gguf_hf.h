// A GGUF model file seen as the Hugging Face checkpoint it was converted from: config.json rebuilt
// from the metadata (`{arch}.embedding_length`, `{arch}.expert_count`, ...) and every tensor under
// its HF name, as a view into the GGUF tensor (an expert stack [E, R, C] becomes E per-expert
// views). The models then load a GGUF exactly as they load safetensors.
//
// The names and keys are those llama.cpp's convert_hf_to_gguf.py writes; an architecture without
// a table here is a one-line kUnsupported naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/gguf.h"

namespace ft::engine {

struct GgufHfTensor {
  std::string hf_name;
  std::size_t tensor = 0;       // index into GgufFile::tensors()
  std::size_t byte_offset = 0;  // of this view inside the GGUF tensor's data
  std::size_t nbytes = 0;
  std::vector<int64_t> shape;  // the HF shape, slowest-first
};

// A matrix no GGUF tensor holds as HF does: DeepSeek-V2/V3's kv_b_proj [heads * (nope + v),
// kv_lora], which the converter split into attn_k_b [heads, kv_lora, nope] (each head's key part
// transposed, for llama.cpp's absorbed attention) and attn_v_b [heads, v, kv_lora]. Checkpoint
// builds it at open (gguf_join_kv_b), the only weight a GGUF does not give in place.
struct GgufKvB {
  std::string hf_name;
  std::size_t k_b = 0, v_b = 0;  // indices into GgufFile::tensors()
  int64_t heads = 0, nope = 0, v_dim = 0, kv_lora = 0;
};

struct GgufAsHf {
  std::string config_json;             // what config.json would say
  std::string generation_config_json;  // bos/eos from the tokenizer metadata
  std::vector<GgufHfTensor> tensors;
  std::vector<GgufKvB> kv_b;
};

// kv_b_proj rows from attn_k_b / attn_v_b (k and v as TensorViews of those tensors, any dtype
// to_f32 reads): per head its nope key rows (k_b transposed), then its v rows, as fp32 into `out`
// [heads * (nope + v_dim), kv_lora].
Status gguf_join_kv_b(const GgufKvB& j, const TensorView& k, const TensorView& v, float* out);

Result<GgufAsHf> gguf_as_hf(const GgufFile& file, const std::string& label);

// llama.cpp's names for HF ones, the other way: a per-layer tensor ("self_attn.q_proj.weight" ->
// "attn_q.weight") and the stack a routed expert's matrix goes into ("gate_proj.weight" ->
// "ffn_gate_exps.weight"); empty when there is none.
std::string_view gguf_layer_name(std::string_view hf);
std::string_view gguf_expert_stack_name(std::string_view hf);

// The GGUF architectures (`general.architecture`) gguf_as_hf knows, for messages and listings.
std::vector<std::string> gguf_supported_architectures();

}  // namespace ft::engine

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

// A tensor no GGUF tensor holds as HF does, which Checkpoint builds in fp32 at open (gguf_build):
// the only weights a GGUF does not give in place, all small next to the model.
//   kJoinKvB:      DeepSeek-V2/V3's kv_b_proj [heads * (nope + v), kv_lora], which the converter
//                  split into attn_k_b [heads, kv_lora, nope] (each head's key part transposed, for
//                  llama.cpp's absorbed attention) and attn_v_b [heads, v, kv_lora] (src2).
//   kMinusOne:     a norm weight HF applies as (1 + w), stored by the converter as 1 + w (Qwen3-Next,
//                  Qwen3.5/3.6): w back, exactly (the converter adds in fp32).
//   kLogOfNegated: DeltaNet's A_log, stored as A = -exp(A_log): log(-A).
//   kGatherRows:   rows of src in the order `rows` lists (Qwen3-Next's in_proj_ba, whose b and a rows
//                  interleave by key head, as two matrices).
struct GgufBuilt {
  enum class Op { kJoinKvB, kMinusOne, kLogOfNegated, kGatherRows };
  Op op = Op::kMinusOne;
  std::string hf_name;
  std::vector<int64_t> shape;                           // of the result, slowest-first
  std::size_t src = 0, src2 = 0;                        // indices into GgufFile::tensors()
  int64_t heads = 0, nope = 0, v_dim = 0, kv_lora = 0;  // kJoinKvB
  std::vector<int64_t> rows;                            // kGatherRows
  std::size_t numel() const;                            // of the result
};

struct GgufAsHf {
  std::string config_json;             // what config.json would say
  std::string generation_config_json;  // bos/eos from the tokenizer metadata
  std::vector<GgufHfTensor> tensors;
  std::vector<GgufBuilt> built;
};

// Fills `out` (b.numel() floats) from the GGUF tensors `src` and, for kJoinKvB, `src2` (TensorViews
// of b.src and b.src2, any dtype to_f32 reads; src2 is null for the other ops).
Status gguf_build(const GgufBuilt& b, const TensorView& src, const TensorView* src2, float* out);

// Whether a Gated DeltaNet hybrid's converter stores this HF tensor as 1 + w (Qwen3-Next's and
// Qwen3.5's zero-centred norms: the layer norms, q/k norms and the final norm; not the linear
// attention's gated norm).
bool gguf_stores_one_plus(std::string_view hf_name);

Result<GgufAsHf> gguf_as_hf(const GgufFile& file, const std::string& label);

// llama.cpp's names for HF ones, the other way: a per-layer tensor ("self_attn.q_proj.weight" ->
// "attn_q.weight") and the stack a routed expert's matrix goes into ("gate_proj.weight" ->
// "ffn_gate_exps.weight"); empty when there is none.
std::string_view gguf_layer_name(std::string_view hf);
// The same for the Gated DeltaNet hybrids (qwen3next, qwen35moe), whose names differ for the linear
// attention ("linear_attn.A_log" -> "ssm_a") and the post-attention norm.
std::string_view gguf_deltanet_layer_name(std::string_view hf);
std::string_view gguf_expert_stack_name(std::string_view hf);

// The GGUF architectures (`general.architecture`) gguf_as_hf knows, for messages and listings.
std::vector<std::string> gguf_supported_architectures();

}  // namespace ft::engine

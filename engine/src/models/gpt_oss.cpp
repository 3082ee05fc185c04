// gpt-oss (model_type "gpt_oss", GptOssForCausalLM; gpt-oss-20b, gpt-oss-120b): GQA with biases on
// q/k/v/o, no q/k norms, NeoX RoPE with YaRN, a learned sink logit per head in every softmax, and
// sliding-window attention on the "sliding_attention" layers (every other one); every layer a MoE
// whose router has a bias and takes the softmax over its top-k logits, and whose experts carry
// biases and gate with the clamped GLU (ref::ExpertGlu: alpha 1.702, limit 7, as HF hard-codes).
// HF's bf16 expert tensors are [in, out] with gate and up interleaved: MoeBlock transposes them at
// load (blocks/moe_block.h). The released weights are MXFP4 (experts.*_blocks / *_scales), read as
// [out, in] MXFP4 row blocks (weights/quantized_safetensors.h), gate and up gathered from their rows.
#include "models/registry.h"

namespace ft::engine::models {
namespace {

using namespace blocks;

Result<DecoderLayer> build_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t i) {
  AttentionSpec spec = attention_spec(cfg);  // q/k/v/o biases from attention_bias
  spec.qk_norm = false;
  spec.sinks = true;
  spec.window = cfg.is_sliding_layer(i) ? cfg.sliding_window : 0;
  FT_ASSIGN_OR_RETURN(DecoderLayer layer, attention_layer(w, cfg, i, spec));
  MoeSpec ms = moe_spec(cfg);
  ms.gpt_oss = true;
  ms.glu.clamped = true;
  FT_ASSIGN_OR_RETURN(layer.moe, MoeBlock::load(w, layer_prefix(i) + "mlp.", ms));
  return layer;
}

}  // namespace

DecoderRecipe gpt_oss(const Checkpoint&) { return {"model.", /*zero_centered_norms=*/false, build_layer}; }

}  // namespace ft::engine::models

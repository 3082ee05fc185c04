// Sparse MoE feed-forward: router -> top-k routed SwiGLU experts (+ an optional shared expert,
// scaled by sigmoid(shared_expert_gate(x)) or ungated), run by Backend::moe over the whole batch. Every expert
// is its own addressable unit (three matrix views into the mapped checkpoint), so a runtime can
// place each in host RAM or a GPU slot.
//
// Reads the expert layouts found in real checkpoints, in place (prefix is the block's, "mlp." or
// Mixtral's "block_sparse_moe."):
//   per expert: experts.N.{gate,up}_proj.weight [inter, hidden], experts.N.down_proj.weight
//               [hidden, inter]   (Qwen releases, OLMoE; what HF save_pretrained writes for them)
//               or experts.N.{w1,w3}.weight (gate, up) and experts.N.w2.weight (down) (Mixtral)
//   fused 3-D:  experts.gate_up_proj [E, 2*inter, hidden] (gate rows first, then up: HF
//               `linear(x, gate_up_proj[e]).chunk(2)`) and experts.down_proj [E, hidden, inter]
//               (HF 5.x modules, Qwen3.5 releases)
//   gpt-oss:    router.{weight,bias}; experts.gate_up_proj [E, hidden, 2*inter] stored [in, out]
//               with gate and up interleaved column by column (gate = [..., ::2]), its bias
//               [E, 2*inter] interleaved alike, experts.down_proj [E, inter, hidden] [in, out] and
//               its bias [E, hidden]. HF's bf16 layout is transposed into host memory at load. The
//               MXFP4 release stores [out, in] ([E, 2*inter, hidden] with interleaved rows): down is
//               read in place, gate's and up's rows gathered into host memory.
//   Llama 4:    router.weight; experts.gate_up_proj [E, hidden, 2*inter] stored [in, out], gate
//               the first half of the columns and up the second, experts.down_proj [E, inter,
//               hidden] [in, out] (transposed at load as gpt-oss's); shared_expert.* as wide.
//
//   Gemma 4:    router.proj.weight, router.scale [hidden], router.per_expert_scale [E] beside
//               experts.gate_up_proj / experts.down_proj (the fused 3-D layout above), GeGLU.
//   DeepSeek-V4: gate.weight, gate.bias (HF's e_score_correction_bias) on score-routed layers or
//               gate.tid2eid [vocab, top_k] I64 on hash layers; experts.N.{w1,w3,w2} (or the
//               layouts above); shared_experts.{w1,w3,w2} (or {gate,up,down}_proj).
//
// DeepSeek-V4's hash layers take each token's experts from tid2eid[token id] (so forward needs the
// token ids), weighed by the router's scores of them (Backend::moe_chosen); its routed and shared
// experts clamp their gate and up products (ref::ExpertGlu), the shared one added to the routed sum.
//
// Gemma 4's router reads the layer's residual, not the experts' input: RMSNorm without a weight,
// times router.scale and hidden^-0.5 (one RMSNorm whose weight is their product), then the
// softmax's top-k renormalised and times each chosen expert's per_expert_scale.
//
// Llama 4 scales each routed expert's input, not its output, by its router score (sigmoid of the
// top-1 logit) and adds the output unweighted. A positive factor does not move the top logit, so
// the plain top-1 MoE over the scaled rows (its renormalised weight exactly 1) computes it on every
// backend and under offload; the shared expert sees the unscaled rows and is added after.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "blocks/weights.h"

namespace ft::engine::blocks {

struct MoeSpec {
  int64_t hidden = 0;
  int64_t moe_inter = 0;
  int64_t shared_inter = 0;  // 0: no shared expert
  // Qwen: shared_expert.* behind shared_expert_gate; DeepSeek-V3 / GLM-4.5: shared_experts.* added
  // as they are (Hunyuan: shared_mlp.*).
  bool shared_gated = true;
  std::string ungated_shared_name = "shared_experts.";
  std::string router_name = "gate.weight";  // Hunyuan: gate.wg.weight
  // The router has a score-correction bias (router.correction_bias is set to it): DeepSeek-V3's
  // gate.e_score_correction_bias [num_experts], or ERNIE 4.5's moe_statics.e_score_correction_bias
  // [1, num_experts] (HF 5.x keeps it under gate.; the releases beside it): the first name found.
  bool correction_bias = false;
  std::vector<std::string> correction_bias_names = {"gate.e_score_correction_bias"};
  bool correction_bias_one_row = false;  // stored [1, num_experts]
  ref::RouterSpec router;  // num_experts, top_k, scoring, renormalize, scaling, groups
  bool gpt_oss = false;    // gpt-oss's names and layout (above), biases and clamped GLU
  ref::ExpertGlu glu;      // with gpt_oss
  bool llama4 = false;     // Llama 4's names, layout and input-scaled top-1 experts (above)
  bool gemma4 = false;     // Gemma 4's router (above); glu.gelu_tanh for its experts
  float router_norm_eps = 1e-6f;
  bool deepseek_v4 = false;  // DeepSeek-V4's names, clamped shared expert (above); glu for every expert
  int64_t hash_vocab = 0;    // > 0: a DeepSeek-V4 hash layer, tid2eid [hash_vocab, top_k]
};

class MoeBlock {
 public:
  // prefix: e.g. "layers.3.mlp." (relative to the loader's prefix); the router is prefix +
  // spec.router_name.
  static Result<MoeBlock> load(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec);

  // out [T, hidden] = moe(x [T, hidden]); out may not alias x. residual [T, hidden]: what a router
  // with its own norm reads (Gemma 4; null elsewhere). ids [T] (host memory): the tokens, which a
  // hash layer routes by (null elsewhere).
  void forward(Backend& be, const float* x, float* out, std::size_t T, const float* residual = nullptr,
               const int32_t* ids = nullptr) const;

  std::size_t num_experts() const { return w_.experts.size(); }
  const SwiGluMatrices& expert(std::size_t e) const { return w_.experts[e]; }
  const MoeWeights& weights() const { return w_; }

 private:
  MoeWeights w_;
  // The router's e_score_correction_bias: w_.router_spec.correction_bias points at its placed
  // values (a moved Vector keeps them where they are).
  Vector correction_bias_;
  // Gemma 4: the router's own norm weight (router.scale * hidden^-0.5) and per_expert_scale, which
  // w_.router_spec points at.
  Vector router_norm_, per_expert_scale_;
  float router_norm_eps_ = 1e-6f;
  // gpt-oss: the biases w_ points at (a moved vector keeps its buffers).
  Vector router_bias_, gate_bias_, up_bias_, down_bias_;
  // Llama 4: the shared expert, applied beside the MoE to the unscaled rows.
  std::optional<SwiGlu> input_shared_;
  // DeepSeek-V4: the clamped shared expert, added to the routed experts' sum; a hash layer's table.
  std::optional<SwiGlu> clamped_shared_;
  std::vector<int32_t> hash_table_;  // [vocab, top_k]
  Status load_deepseek_v4(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec);
  Status load_gpt_oss_experts(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec);
  Status load_llama4_experts(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec);
  // gpt-oss's and Llama 4's [in, out] experts, gate and up interleaved or in halves, transposed
  // into the backend's host memory (WeightLoader::transposed).
  Status load_transposed_experts(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec,
                                 bool interleaved);
};

}  // namespace ft::engine::blocks

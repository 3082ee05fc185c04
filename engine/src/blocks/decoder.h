// The decoder stack shared by every family: a DecoderLayer is pre-norm token mixer + pre-norm
// feed-forward with residuals; the decoder model is embedding -> layers -> final norm -> lm_head
// and implements Model. A model file supplies only how one layer is composed (build_layer) and
// where its tensors live (prefix). With hyper-connections (DeepSeek-V4's mHC, hyper_connection.h)
// the residual is N streams of the hidden size: the embedding is copied into each, every layer
// reads and writes them through its connections, and the recipe's head collapses them before the
// final norm.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "blocks/attention_block.h"
#include "blocks/hyper_connection.h"
#include "blocks/linear_attention_block.h"
#include "blocks/mla_attention_block.h"
#include "blocks/moe_block.h"
#include "blocks/v4_attention_block.h"
#include "blocks/weights.h"
#include "ft/engine/model.h"

namespace ft::engine::blocks {

// What one layer needs to know about the batch: rows grouped by sequence, each sequence's KV
// pages and, for a layer with state (linear attention, DeepSeek-V4's compressors), its state.
struct LayerBatch {
  const KvLayout* kv = nullptr;
  std::span<const AttentionSeq> attention;  // per sequence
  std::span<const DeltaNetSeq> linear;      // per sequence, this layer's states
  const int64_t* positions = nullptr;       // per row
  const int32_t* ids = nullptr;             // per row, host memory: the tokens (hash routing)
};

struct DecoderLayer {
  RmsNorm input_norm;
  RmsNorm post_norm;  // the feed-forward's pre-norm (HF post_attention_layernorm in most families)
  // Sandwich norms (AFMoE, Gemma): the mixer's and the feed-forward's outputs are normed before
  // they join the residual stream.
  std::optional<RmsNorm> mixer_out_norm;
  std::optional<RmsNorm> ffn_out_norm;
  // Token mixer: exactly one of these.
  std::optional<AttentionBlock> attention;
  std::optional<LinearAttentionBlock> linear_attention;
  std::optional<MlaAttentionBlock> mla_attention;
  std::optional<V4AttentionBlock> v4_attention;
  // Feed-forward: exactly one of these, or both with `parallel`.
  std::optional<MoeBlock> moe;
  std::optional<SwiGlu> mlp;
  // Gemma 4: the MLP and the MoE side by side on the same residual h. The MLP takes post_norm(h)
  // and its output is normed by mlp_out_norm; the MoE takes moe_in_norm(h), its router h itself
  // (MoeBlock), and its output is normed by moe_out_norm; their sum is the feed-forward's output.
  struct Parallel {
    RmsNorm moe_in_norm, mlp_out_norm, moe_out_norm;
  };
  std::optional<Parallel> parallel;
  // Gemma 4's layer_scalar: the stream is scaled by it once the layer's output has joined it.
  std::optional<float> output_scale;
  // DeepSeek-V4: the residual's streams reach the mixer and the feed-forward through these.
  struct Hyper {
    HyperConnection mixer, ffn;
  };
  std::optional<Hyper> hyper;

  // Whether the layer keeps per-sequence state besides its KV pages (SequenceState::linear()).
  bool has_state() const { return linear_attention || (v4_attention && v4_attention->has_state()); }
  LinearState empty_state(int64_t layer) const {
    return linear_attention ? linear_attention->empty_state(layer) : v4_attention->empty_state(layer);
  }

  // hidden [T, hidden] in place: h += mixer(norm(h)); h += ffn(norm(h)) (each output normed first
  // where the layer has sandwich norms) — but the last add is left
  // to the caller: ffn(...) goes to `delta`, which the next layer adds as it norms its input (one
  // op, add_rms_norm). delta_pending: `delta` holds the previous layer's, not yet added. Returns
  // whether `delta` holds this layer's output, not yet added (a layer with output_scale adds it).
  bool forward(Backend& be, float* hidden, float* delta, bool delta_pending, std::size_t T,
               const LayerBatch& batch) const;
  // With hyper: streams [T, N, hidden] in place, each sub-layer between its connection's pre and post.
  void forward_hyper(Backend& be, float* streams, std::size_t T, const LayerBatch& batch) const;

 private:
  // The token mixer: out [T, hidden] of normed [T, hidden].
  void mix(Backend& be, const float* normed, std::size_t T, const LayerBatch& batch, float* out) const;
};

using LayerBuilder = std::function<Result<DecoderLayer>(const WeightLoader&, const ModelConfig&, int64_t layer)>;

struct DecoderRecipe {
  std::string prefix;                 // of embed_tokens / layers / norm, e.g. "model."
  bool zero_centered_norms = false;   // final norm uses (1 + w)
  LayerBuilder build_layer;
  std::string lm_head = "lm_head.weight";  // from the checkpoint's root
  std::string embed = "embed_tokens.weight";  // under prefix
  // Hyper-connections: the head that collapses the streams (its spec says how many), loaded
  // through the prefixed loader; null for a plain residual.
  std::function<Result<HyperConnection>(const WeightLoader&, const ModelConfig&)> hyper_head = nullptr;
  // Refuses a backend that lacks ops the layers need, before anything is placed (null: any runs).
  std::function<Status(const Backend&)> check_backend = nullptr;
};

// Loads embed_tokens, every layer through recipe.build_layer, the final norm and lm_head (or ties
// it to the embedding when config.tie_word_embeddings), all as views into `ckpt`, which the model
// keeps mapped for its whole life.
Result<std::unique_ptr<Model>> load_decoder_model(std::shared_ptr<const Checkpoint> ckpt, const ModelConfig& cfg,
                                                  const DecoderRecipe& recipe, const LoadOptions& options);

// Specs derived from the config, shared by the model files; each file adjusts what its family
// does differently (gated attention, zero-centred norms, projection layout).
// A layer with its two pre-norms loaded (input_layernorm, post_attention_layernorm, hidden wide;
// zero_centered: the stored weight is an offset from 1): the model file adds the token mixer and
// the feed-forward.
Result<DecoderLayer> layer_with_norms(const WeightLoader& w, const ModelConfig& cfg, int64_t layer, bool zero_centered);
// The softmax-attention families' layer: plain pre-norms and layers.<layer>.self_attn. per `spec`;
// the model file adds the feed-forward.
Result<DecoderLayer> attention_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t layer,
                                     const AttentionSpec& spec);
// The Qwen3-Next family's layer (Qwen3-Next, Qwen3.5/3.6 MoE): zero-centred pre-norms and, by
// cfg.layer_types, a Gated DeltaNet at layers.<layer>.linear_attn. (projections in `layout`) or a
// gated softmax attention with zero-centred q/k norms at layers.<layer>.self_attn.; the model file
// adds the feed-forward.
Result<DecoderLayer> hybrid_delta_net_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t layer,
                                            ref::DeltaNetProjLayout layout);
// The feed-forward at layers.<layer>.mlp.: the MoE on MoE layers (ModelConfig::is_moe_layer), else
// a dense SwiGLU of intermediate_size.
Status load_feed_forward(const WeightLoader& w, const ModelConfig& cfg, int64_t layer, DecoderLayer& out);
AttentionSpec attention_spec(const ModelConfig& cfg);
// deepseek_v3's latent attention: dims, biases, the softmax scale (YaRN's mscale^2 included) and RoPE.
MlaSpec mla_spec(const ModelConfig& cfg);
// RoPE over rotary_dim() of a head_dim-wide head: theta, pairing (rope_interleave), YaRN.
ref::RopeSpec rope_spec(const ModelConfig& cfg, int64_t head_dim);
// The MoE of MoE layers: softmax routing, or the DeepSeek-V3-style router (cfg.sigmoid_router)
// with its correction bias, groups, scaling and ungated shared experts, or ERNIE 4.5's softmax
// router with a correction bias (cfg.biased_softmax_router).
MoeSpec moe_spec(const ModelConfig& cfg);
LinearAttentionSpec linear_attention_spec(const ModelConfig& cfg, ref::DeltaNetProjLayout layout);
std::string layer_prefix(int64_t layer);  // "layers.<i>."

}  // namespace ft::engine::blocks

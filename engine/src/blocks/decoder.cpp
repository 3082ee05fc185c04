#include "blocks/decoder.h"

#include <algorithm>
#include <cstdio>

#include "ft/engine/checkpoint.h"
#include "ft/engine/ops_dense.h"

namespace ft::engine::blocks {
namespace {

// FNV-1a 64: cheap, dependency-free, and stable across builds (the fingerprint is persisted).
void fnv_mix(uint64_t& h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
}

// Config, tensor names/shapes/dtypes, and a sample of each tensor's bytes (four 64-byte windows):
// two checkpoints of one architecture (a base model and its fine-tune) then differ, without
// reading hundreds of GB at load time.
std::string make_fingerprint(const Checkpoint& ckpt, const ModelConfig& cfg) {
  uint64_t h = 0xcbf29ce484222325ull;
  fnv_mix(h, ckpt.config_text());
  for (const std::string& name : ckpt.tensor_names()) {
    auto view = ckpt.tensor(name);
    fnv_mix(h, name);
    if (!view) continue;
    fnv_mix(h, view->shape_string() + dtype_name(view->dtype));
    constexpr std::size_t kWindow = 64;
    for (int i = 0; i < 4 && view->nbytes > 0; ++i) {
      const std::size_t at = (view->nbytes - std::min(view->nbytes, kWindow)) * std::size_t(i) / 3;
      const std::size_t n = std::min(kWindow, view->nbytes - at);
      fnv_mix(h, std::string_view(reinterpret_cast<const char*>(view->data + at), n));
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string(model_family_name(cfg.family)) + "-" + hex;
}

class DecoderModel final : public Model {
 public:
  DecoderModel(ModelConfig cfg, std::string fingerprint) : cfg_(std::move(cfg)), fingerprint_(std::move(fingerprint)) {}

  static Result<std::unique_ptr<Model>> load(const Checkpoint& ckpt, const ModelConfig& cfg,
                                             const DecoderRecipe& recipe) {
    auto m = std::make_unique<DecoderModel>(cfg, make_fingerprint(ckpt, cfg));
    const WeightLoader w(ckpt, recipe.prefix);
    const WeightLoader top(ckpt, "");
    FT_ASSIGN_OR_RETURN(m->embed_, w.tensor("embed_tokens.weight", {cfg.vocab_size, cfg.hidden_size}));
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      FT_ASSIGN_OR_RETURN(DecoderLayer layer, recipe.build_layer(w, cfg, i));
      m->layers_.push_back(std::move(layer));
    }
    FT_ASSIGN_OR_RETURN(m->norm_, w.rms_norm("norm.weight", cfg.hidden_size, cfg.rms_norm_eps,
                                             recipe.zero_centered_norms));
    if (!cfg.tie_word_embeddings) {
      FT_ASSIGN_OR_RETURN(m->lm_head_, top.tensor("lm_head.weight", {cfg.vocab_size, cfg.hidden_size}));
    }
    return std::unique_ptr<Model>(std::move(m));
  }

  const ModelConfig& config() const override { return cfg_; }
  const std::string& fingerprint() const override { return fingerprint_; }

  SequenceState new_state() const override {
    std::vector<LayerState> states;
    states.reserve(layers_.size());
    for (const DecoderLayer& l : layers_) states.push_back(l.empty_state());
    return SequenceState(fingerprint_, std::move(states));
  }

  Status forward_batch(std::span<const BatchSlice> batch) const override {
    if (batch.empty()) return invalid_argument("forward: empty batch");
    std::size_t T = 0;
    for (const BatchSlice& b : batch) {
      if (b.tokens.empty()) return invalid_argument("forward: no tokens");
      for (int32_t id : b.tokens) {
        if (id < 0 || id >= cfg_.vocab_size) {
          return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(cfg_.vocab_size) + ")");
        }
      }
      if (!b.state || b.state->fingerprint() != fingerprint_ || b.state->layers().size() != layers_.size()) {
        return invalid_argument("forward: the sequence state belongs to another model");
      }
      if (b.mode != LogitsMode::kNone && !b.logits_out) return invalid_argument("forward: logits_out is null");
      for (const BatchSlice& other : batch) {
        if (&other != &b && other.state == b.state) return invalid_argument("forward: a state appears twice");
      }
      T += b.tokens.size();
    }

    const std::size_t H = std::size_t(cfg_.hidden_size), V = std::size_t(cfg_.vocab_size);
    std::vector<float> hidden(T * H);
    std::vector<DecoderLayer::Segment> segments(batch.size());
    for (std::size_t i = 0, row = 0; i < batch.size(); row += batch[i].tokens.size(), ++i) {
      ref::embedding(embed_.data(), H, batch[i].tokens.data(), batch[i].tokens.size(), hidden.data() + row * H);
      segments[i].begin = row;
      segments[i].rows = batch[i].tokens.size();
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      for (std::size_t i = 0; i < batch.size(); ++i) segments[i].state = &batch[i].state->layers()[l];
      FT_RETURN_IF_ERROR(layers_[l].forward(hidden.data(), T, segments));
    }

    // Gather the rows whose logits are wanted, then one lm_head pass over all of them.
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i].state->advance(int64_t(segments[i].rows));
      if (batch[i].mode == LogitsMode::kNone) continue;
      const std::size_t first = batch[i].mode == LogitsMode::kLast ? segments[i].rows - 1 : 0;
      for (std::size_t r = first; r < segments[i].rows; ++r) rows.push_back(segments[i].begin + r);
    }
    if (rows.empty()) return Status::ok();
    std::vector<float> picked(rows.size() * H), normed(rows.size() * H), logits(rows.size() * V);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::copy_n(hidden.data() + rows[r] * H, H, picked.data() + r * H);
    }
    norm_.forward(picked.data(), normed.data(), rows.size());
    const float* head = cfg_.tie_word_embeddings ? embed_.data() : lm_head_.data();
    ref::linear(normed.data(), head, nullptr, logits.data(), rows.size(), V, H);
    std::size_t at = 0;
    for (const BatchSlice& b : batch) {
      if (b.mode == LogitsMode::kNone) continue;
      const std::size_t n = b.mode == LogitsMode::kLast ? 1 : b.tokens.size();
      std::copy_n(logits.data() + at * V, n * V, b.logits_out);
      at += n;
    }
    return Status::ok();
  }

 private:
  ModelConfig cfg_;
  std::string fingerprint_;
  std::vector<float> embed_;    // [vocab, hidden]
  std::vector<DecoderLayer> layers_;
  RmsNorm norm_;
  std::vector<float> lm_head_;  // [vocab, hidden]; empty when tied to embed_
};

}  // namespace

LayerState DecoderLayer::empty_state() const {
  LayerState s;
  if (linear_attention) {
    s.kind = LayerStateKind::kLinear;
    s.linear = linear_attention->empty_state();
  } else {
    s.kind = LayerStateKind::kAttention;
    s.kv.kv_heads = attention->spec().kv_heads;
    s.kv.head_dim = attention->spec().head_dim;
  }
  return s;
}

Status DecoderLayer::forward(float* hidden, std::size_t T, std::span<const Segment> segments) const {
  const std::size_t H = input_norm.weight.size(), n = T * H;
  std::vector<float> normed(n), delta(n);
  input_norm.forward(hidden, normed.data(), T);
  for (const Segment& seg : segments) {
    const float* x = normed.data() + seg.begin * H;
    float* out = delta.data() + seg.begin * H;
    if (linear_attention) {
      FT_RETURN_IF_ERROR(linear_attention->forward(x, seg.rows, seg.state->linear, out));
    } else {
      attention->forward(x, seg.rows, seg.state->kv, out);
    }
  }
  ref::add_inplace(hidden, delta.data(), n);

  post_norm.forward(hidden, normed.data(), T);
  if (moe) {
    moe->forward(normed.data(), delta.data(), T);
  } else {
    mlp->forward(normed.data(), delta.data(), T);
  }
  ref::add_inplace(hidden, delta.data(), n);
  return Status::ok();
}

Result<std::unique_ptr<Model>> load_decoder_model(const Checkpoint& ckpt, const ModelConfig& cfg,
                                                  const DecoderRecipe& recipe) {
  return DecoderModel::load(ckpt, cfg, recipe);
}

AttentionSpec attention_spec(const ModelConfig& cfg) {
  AttentionSpec s;
  s.hidden = cfg.hidden_size;
  s.heads = cfg.num_attention_heads;
  s.kv_heads = cfg.num_key_value_heads;
  s.head_dim = cfg.head_dim;
  s.bias = cfg.attention_bias;
  s.eps = cfg.rms_norm_eps;
  s.rope.head_dim = std::size_t(cfg.head_dim);
  s.rope.rotary_dim = std::size_t(cfg.rotary_dim());
  s.rope.theta = cfg.rope_theta;
  s.rope.layout = ref::RopeLayout::kNeox;
  return s;
}

MoeSpec moe_spec(const ModelConfig& cfg) {
  MoeSpec s;
  s.hidden = cfg.hidden_size;
  s.moe_inter = cfg.moe_intermediate_size;
  s.shared_inter = cfg.shared_expert_intermediate_size;
  s.router.num_experts = std::size_t(cfg.num_experts);
  s.router.top_k = std::size_t(cfg.num_experts_per_tok);
  s.router.scoring = ref::RouterScoring::kSoftmax;
  s.router.renormalize = cfg.norm_topk_prob;
  return s;
}

LinearAttentionSpec linear_attention_spec(const ModelConfig& cfg, ref::DeltaNetProjLayout layout) {
  LinearAttentionSpec s;
  s.layout = layout;
  s.dims.hidden = std::size_t(cfg.hidden_size);
  s.dims.num_k_heads = std::size_t(cfg.linear_num_key_heads);
  s.dims.num_v_heads = std::size_t(cfg.linear_num_value_heads);
  s.dims.head_k_dim = std::size_t(cfg.linear_key_head_dim);
  s.dims.head_v_dim = std::size_t(cfg.linear_value_head_dim);
  s.dims.conv_kernel = std::size_t(cfg.linear_conv_kernel_dim);
  s.dims.norm_eps = cfg.rms_norm_eps;
  return s;
}

std::string layer_prefix(int64_t layer) { return "layers." + std::to_string(layer) + "."; }

}  // namespace ft::engine::blocks

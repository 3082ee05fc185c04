#include "ft/engine/random_checkpoint.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "ft/engine/checkpoint.h"

namespace ft::engine {
namespace {

using nlohmann::json;

// splitmix64 + Box-Muller: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed ^ 0x9e3779b97f4a7c15ull) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    spare_ = r * std::sin(a);
    have_spare_ = true;
    return r * std::cos(a);
  }

 private:
  uint64_t s_;
  double spare_ = 0;
  bool have_spare_ = false;
};

class TensorWriter {
 public:
  explicit TensorWriter(uint64_t seed) : rng_(seed) {}

  // values = offset + scale * N(0, 1), stored as bf16.
  void normal(const std::string& name, std::vector<int64_t> shape, double scale, double offset = 0.0) {
    add(name, std::move(shape), [&] { return offset + scale * rng_.normal(); });
  }
  // A matrix (or stack of matrices) initialised N(0, 1/fan_in), fan_in = the last dimension.
  void matrix(const std::string& name, std::vector<int64_t> shape) {
    normal(name, shape, 1.0 / std::sqrt(double(shape.back())));
  }
  void uniform(const std::string& name, std::vector<int64_t> shape, double lo, double hi, bool log_of = false) {
    add(name, std::move(shape), [&] {
      const double v = lo + (hi - lo) * rng_.uniform();
      return log_of ? std::log(v) : v;
    });
  }
  std::vector<OwnedTensor>& tensors() { return tensors_; }

 private:
  template <typename Gen>
  void add(const std::string& name, std::vector<int64_t> shape, Gen gen) {
    OwnedTensor t;
    t.name = name;
    t.dtype = DType::kBF16;
    t.shape = std::move(shape);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.data.resize(std::size_t(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t b = f32_to_bf16(float(gen()));
      std::memcpy(t.data.data() + 2 * i, &b, 2);
    }
    tensors_.push_back(std::move(t));
  }
  Rng rng_;
  std::vector<OwnedTensor> tensors_;
};

bool hybrid(const RandomCheckpointSpec& s) { return s.family != ModelFamily::kQwen3Moe; }

bool is_linear_layer(const RandomCheckpointSpec& s, int64_t i) {
  return hybrid(s) && (i + 1) % s.full_attention_interval != 0;
}

bool is_moe_layer(const RandomCheckpointSpec& s, int64_t i) {
  if (s.family == ModelFamily::kQwen3_5Moe) return true;
  for (int64_t m : s.mlp_only_layers) {
    if (m == i) return false;
  }
  return s.num_experts > 0 && (i + 1) % s.decoder_sparse_step == 0;
}

double partial_rotary(const RandomCheckpointSpec& s) {
  return s.partial_rotary_factor > 0 ? s.partial_rotary_factor : hybrid(s) ? 0.25 : 1.0;
}

void write_weights(TensorWriter& w, const RandomCheckpointSpec& s) {
  const std::string root = s.family == ModelFamily::kQwen3_5Moe ? "model.language_model." : "model.";
  const int64_t H = s.hidden_size, D = s.head_dim;
  const bool zc = hybrid(s);  // zero-centred RMSNorm weights
  auto norm = [&](const std::string& name, int64_t dim) { w.normal(name, {dim}, 0.1, zc ? 0.0 : 1.0); };

  w.normal(root + "embed_tokens.weight", {s.vocab_size, H}, 1.0);
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = root + "layers." + std::to_string(i) + ".";
    norm(p + "input_layernorm.weight", H);
    norm(p + "post_attention_layernorm.weight", H);
    if (is_linear_layer(s, i)) {
      const std::string a = p + "linear_attn.";
      const int64_t nk = s.linear_num_key_heads, nv = s.linear_num_value_heads;
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
    } else {
      const std::string a = p + "self_attn.";
      const int64_t q_out = s.num_heads * D * (hybrid(s) ? 2 : 1), kv_out = s.num_kv_heads * D;
      const bool bias = s.attention_bias && !hybrid(s);
      w.matrix(a + "q_proj.weight", {q_out, H});
      if (bias) w.normal(a + "q_proj.bias", {q_out}, 0.1);
      w.matrix(a + "k_proj.weight", {kv_out, H});
      if (bias) w.normal(a + "k_proj.bias", {kv_out}, 0.1);
      w.matrix(a + "v_proj.weight", {kv_out, H});
      if (bias) w.normal(a + "v_proj.bias", {kv_out}, 0.1);
      w.matrix(a + "o_proj.weight", {H, s.num_heads * D});
      if (bias) w.normal(a + "o_proj.bias", {H}, 0.1);
      norm(a + "q_norm.weight", D);
      norm(a + "k_norm.weight", D);
    }
    const std::string m = p + "mlp.";
    if (!is_moe_layer(s, i)) {
      w.matrix(m + "gate_proj.weight", {s.intermediate_size, H});
      w.matrix(m + "up_proj.weight", {s.intermediate_size, H});
      w.matrix(m + "down_proj.weight", {H, s.intermediate_size});
      continue;
    }
    const int64_t E = s.num_experts, I = s.moe_intermediate_size;
    w.matrix(m + "gate.weight", {E, H});
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
    if (hybrid(s)) {
      const int64_t S = s.shared_expert_intermediate_size;
      w.matrix(m + "shared_expert.gate_proj.weight", {S, H});
      w.matrix(m + "shared_expert.up_proj.weight", {S, H});
      w.matrix(m + "shared_expert.down_proj.weight", {H, S});
      w.matrix(m + "shared_expert_gate.weight", {1, H});
    }
  }
  norm(root + "norm.weight", H);
  if (!s.tie_word_embeddings) w.matrix("lm_head.weight", {s.vocab_size, H});
}

json text_config(const RandomCheckpointSpec& s, const std::vector<int32_t>& eos) {
  json c = {
      {"vocab_size", s.vocab_size},
      {"hidden_size", s.hidden_size},
      {"num_hidden_layers", s.num_layers},
      {"num_attention_heads", s.num_heads},
      {"num_key_value_heads", s.num_kv_heads},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", 32768},
      {"initializer_range", 0.02},
      {"rms_norm_eps", 1e-6},
      {"attention_bias", s.attention_bias && !hybrid(s)},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", s.tie_word_embeddings},
      {"num_experts", s.num_experts},
      {"num_experts_per_tok", s.top_k},
      {"moe_intermediate_size", s.moe_intermediate_size},
      {"bos_token_id", s.bos_token_id},
      {"eos_token_id", eos.size() == 1 ? json(eos[0]) : json(eos)},
      {"dtype", "bfloat16"},
  };
  json rope = {{"rope_type", "default"}, {"rope_theta", s.rope_theta}};
  if (s.family != ModelFamily::kQwen3_5Moe) {
    c["intermediate_size"] = s.intermediate_size;
    c["decoder_sparse_step"] = s.decoder_sparse_step;
    c["mlp_only_layers"] = s.mlp_only_layers;
    c["norm_topk_prob"] = s.norm_topk_prob;
  }
  if (s.family == ModelFamily::kQwen3Moe) {
    c["use_sliding_window"] = false;
    c["sliding_window"] = nullptr;
  } else {
    rope["partial_rotary_factor"] = partial_rotary(s);
    c["shared_expert_intermediate_size"] = s.shared_expert_intermediate_size;
    c["linear_conv_kernel_dim"] = s.linear_conv_kernel_dim;
    c["linear_key_head_dim"] = s.linear_key_head_dim;
    c["linear_value_head_dim"] = s.linear_value_head_dim;
    c["linear_num_key_heads"] = s.linear_num_key_heads;
    c["linear_num_value_heads"] = s.linear_num_value_heads;
    json types = json::array();
    for (int64_t i = 0; i < s.num_layers; ++i) types.push_back(is_linear_layer(s, i) ? "linear_attention" : "full_attention");
    c["layer_types"] = types;
    c["full_attention_interval"] = s.full_attention_interval;
  }
  if (s.family == ModelFamily::kQwen3_5Moe) {
    // mRoPE sections over the rotary half (text-only input makes them irrelevant, but real
    // checkpoints carry them).
    const int64_t half = int64_t(double(s.head_dim) * partial_rotary(s)) / 2;
    rope["mrope_section"] = {half - 2 * (half / 3), half / 3, half / 3};
    rope["mrope_interleaved"] = true;
    c["model_type"] = "qwen3_5_moe_text";
  }
  c["rope_parameters"] = rope;
  return c;
}

json config_json(const RandomCheckpointSpec& s, const std::vector<int32_t>& eos) {
  json text = text_config(s, eos);
  json c;
  switch (s.family) {
    case ModelFamily::kQwen3Moe:
      c = text;
      c["architectures"] = {"Qwen3MoeForCausalLM"};
      c["model_type"] = "qwen3_moe";
      break;
    case ModelFamily::kQwen3Next:
      c = text;
      c["architectures"] = {"Qwen3NextForCausalLM"};
      c["model_type"] = "qwen3_next";
      break;
    case ModelFamily::kQwen3_5Moe:
      // The multimodal wrapper: the text model nested, a (small) vision config beside it. The
      // vision tower's weights are not written: this engine serves text only.
      c = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
           {"model_type", "qwen3_5_moe"},
           {"text_config", text},
           {"vision_config",
            {{"model_type", "qwen3_5_moe_vision"}, {"depth", 1}, {"hidden_size", 64}, {"intermediate_size", 128},
             {"num_heads", 2}, {"out_hidden_size", s.hidden_size}}},
           {"tie_word_embeddings", s.tie_word_embeddings},
           {"dtype", "bfloat16"}};
      break;
  }
  c["transformers_version"] = "5.0.0";
  if (s.demo) {
    c["freetoken_demo"] =
        "DEMO MODEL WITH RANDOM WEIGHTS written by `freetoken make-demo-model`: it has the shapes and tensor "
        "layout of a real checkpoint but produces meaningless text.";
  }
  return c;
}

Status write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return io_error("cannot write " + path.string());
  return Status::ok();
}

const char* kDemoReadme =
    "# FreeToken demo model: RANDOM WEIGHTS\n\n"
    "Written by `freetoken make-demo-model`. This is **not a trained model**: every weight is random\n"
    "(seeded, so the files are reproducible). It has the real Hugging Face layout of a Qwen3.5-MoE\n"
    "checkpoint (`qwen3_5_moe` wrapper config with `text_config`, tensors under\n"
    "`model.language_model.*`, `lm_head.weight` at the top level, bf16) at a tiny size: hidden 128,\n"
    "8 layers (6 Gated DeltaNet + 2 gated full attention), 16 experts top-4 plus a shared expert, and\n"
    "the Qwen3 tokenizer's vocabulary size (151936). Use it to exercise the engine end to end\n"
    "(loading, prefill, decode, state snapshots, the CLI and the server), never to judge output quality.\n"
    "The vision tower of the wrapper is not included.\n";

}  // namespace

Status write_random_checkpoint(const std::filesystem::path& dir, const RandomCheckpointSpec& spec) {
  if (spec.num_layers <= 0 || spec.hidden_size <= 0 || spec.vocab_size <= 0 || spec.full_attention_interval <= 0 ||
      spec.decoder_sparse_step <= 0) {
    return invalid_argument("random checkpoint: sizes must be positive");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir.string() + ": " + ec.message());

  std::vector<int32_t> eos = spec.eos_token_ids;
  if (eos.empty()) eos = {int32_t(spec.vocab_size - 1)};
  TensorWriter w(spec.seed);
  write_weights(w, spec);
  FT_RETURN_IF_ERROR(write_safetensors(dir / "model.safetensors", w.tensors(), {{"format", "pt"}}));
  FT_RETURN_IF_ERROR(write_text(dir / "config.json", config_json(spec, eos).dump(2) + "\n"));
  const json gen = {{"bos_token_id", spec.bos_token_id},
                    {"eos_token_id", eos.size() == 1 ? json(eos[0]) : json(eos)},
                    {"do_sample", false},
                    {"transformers_version", "5.0.0"}};
  FT_RETURN_IF_ERROR(write_text(dir / "generation_config.json", gen.dump(2) + "\n"));
  if (spec.demo) FT_RETURN_IF_ERROR(write_text(dir / "README.md", kDemoReadme));
  return Status::ok();
}

RandomCheckpointSpec demo_model_spec() {
  RandomCheckpointSpec s;
  s.family = ModelFamily::kQwen3_5Moe;
  // hidden 128 rather than 256: the two vocab x hidden matrices dominate the size, and at 256 they
  // alone would be 156 MB in bf16.
  s.vocab_size = 151936;
  s.hidden_size = 128;
  s.num_layers = 8;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.num_experts = 16;
  s.top_k = 4;
  s.moe_intermediate_size = 64;
  s.shared_expert_intermediate_size = 128;
  s.full_attention_interval = 4;
  s.linear_num_key_heads = 2;
  s.linear_num_value_heads = 4;
  s.linear_key_head_dim = 32;
  s.linear_value_head_dim = 32;
  s.linear_conv_kernel_dim = 4;
  s.fused_experts = true;
  s.eos_token_ids = {151645, 151643};  // <|im_end|>, <|endoftext|>
  s.bos_token_id = 151643;
  s.seed = 20240601;
  s.demo = true;
  return s;
}

}  // namespace ft::engine

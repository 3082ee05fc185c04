// write_synthetic_gguf: the tensors of a random checkpoint spec under llama.cpp's names (experts
// stacked), each in the type llama-quantize would give it, written in parallel into a GGUF file
// created at its final size.
#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>

#include "ft/engine/synthetic_model.h"
#include "weights/gguf_hf.h"
#include "weights/gguf_writer.h"
#include "weights/random_checkpoint_layout.h"
#include "weights/synthetic_fill.h"
#include "weights/synthetic_values.h"

namespace ft::engine {
namespace {

namespace fs = std::filesystem;

// ggml's type ids and block sizes (gguf.h's ggml_type table says the same).
struct BlockType {
  std::uint32_t id;
  int elems, bytes;
};
constexpr BlockType kF32{0, 1, 4}, kQ4_0{2, 32, 18}, kQ8_0{8, 32, 34}, kQ4_K{12, 256, 144}, kQ5_K{13, 256, 176},
    kQ6_K{14, 256, 210};

// Output bytes per work item (whole blocks): the unit of determinism and of parallel work.
constexpr std::uint64_t kItemBytes = std::uint64_t(4) << 20;

// How the converter changes an F32 tensor's values: Qwen3-Next / Qwen3.5 norms stored as 1 + w,
// DeltaNet's A_log stored as A = -exp(A_log).
enum class Stored { kAsIs, kOnePlus, kNegExp };

struct Planned {
  std::string name;            // llama.cpp's
  std::vector<int64_t> shape;  // slowest-first
  BlockType type;
  TensorInit init;
  Stored stored = Stored::kAsIs;
  std::uint64_t bytes() const {
    std::uint64_t n = 1;
    for (int64_t d : shape) n *= std::uint64_t(d);
    return n / std::uint64_t(type.elems) * std::uint64_t(type.bytes);
  }
};

// llama-quantize's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool ends_with(std::string_view s, std::string_view tail) { return s.size() >= tail.size() && s.ends_with(tail); }

// The type llama-quantize's mix gives a tensor (llama_tensor_get_type for these architectures).
BlockType quant_type(SyntheticQuant q, const std::string& name, std::size_t dims, int64_t layer, int64_t layers) {
  // Norms, routers and DeltaNet's short convolution (4 taps a row) stay F32, as llama-quantize keeps them.
  if (dims < 2 || ends_with(name, "_norm.weight") || name.find("ffn_gate_inp") != std::string::npos ||
      name.find("ssm_conv1d") != std::string::npos)
    return kF32;
  const BlockType base = q == SyntheticQuant::kQ4_K_M   ? kQ4_K
                         : q == SyntheticQuant::kQ5_K_M ? kQ5_K
                         : q == SyntheticQuant::kQ4_0   ? kQ4_0
                                                        : kQ8_0;
  if (name == "output.weight") return base.id == kQ8_0.id ? kQ8_0 : kQ6_K;
  const bool k_mix = q == SyntheticQuant::kQ4_K_M || q == SyntheticQuant::kQ5_K_M;
  if (!k_mix || layer < 0) return base;
  const bool more = use_more_bits(layer, layers);
  if (more && (name.find(".attn_v.") != std::string::npos || name.find(".attn_qkv.") != std::string::npos ||
               name.find(".ffn_down") != std::string::npos))
    return kQ6_K;
  return base;
}

std::uint16_t f16_bits(float v) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(v)); }

void put_f16(std::uint8_t* at, float v) {
  const std::uint16_t h = f16_bits(v);
  std::memcpy(at, &h, 2);
}

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// `n` blocks of random bytes whose scale fields make the values spread like N(0, sigma^2): the
// standard deviation of the decoded values for uniformly random quants and scales is a known
// multiple of the block's d (Q8_0: 73.9 d; Q4_0: 4.61 d; Q6_K: int8 scales times 6-bit quants
// around 32, 73.9 * 18.5 d; Q4_K with dmin = 7.5 d, centring the 4-bit quants: 258 d; Q5_K with
// dmin = 15.5 d, centring the 5-bit ones: 528 d).
void random_blocks(BlockType t, double sigma, std::uint64_t state, std::uint8_t* out, std::size_t n) {
  const std::size_t bytes = n * std::size_t(t.bytes);
  for (std::size_t i = 0; i < bytes; i += 8) {
    const std::uint64_t r = splitmix(state);
    std::memcpy(out + i, &r, std::min<std::size_t>(8, bytes - i));
  }
  for (std::size_t b = 0; b < n; ++b) {
    std::uint8_t* blk = out + b * std::size_t(t.bytes);
    if (t.id == kQ8_0.id) {
      put_f16(blk, float(sigma / 73.9));
    } else if (t.id == kQ4_0.id) {
      put_f16(blk, float(sigma / 4.61));
    } else if (t.id == kQ6_K.id) {
      put_f16(blk + 208, float(sigma / (73.9 * 18.5)));
    } else if (t.id == kQ4_K.id) {
      const float d = float(sigma / 258.0);
      put_f16(blk, d);
      put_f16(blk + 2, 7.5f * d);
    } else if (t.id == kQ5_K.id) {
      const float d = float(sigma / 528.0);
      put_f16(blk, d);
      put_f16(blk + 2, 15.5f * d);
    }
  }
}

// The spec's tensors under llama.cpp's names, routed experts stacked [E, rows, cols].
Result<std::vector<Planned>> plan_tensors(const RandomCheckpointSpec& spec, SyntheticQuant quant) {
  std::vector<Planned> out;
  std::map<std::string, std::size_t> stacks;
  const bool hybrid = is_hybrid(spec);
  const auto add = [&](std::string name, std::vector<int64_t> shape, const TensorInit& init, int64_t layer,
                       Stored stored = Stored::kAsIs) {
    const BlockType t = quant_type(quant, name, shape.size(), layer, spec.num_layers);
    if (shape.back() % t.elems != 0) {
      return invalid_argument("tensor " + name + " has " + std::to_string(shape.back()) +
                              " columns, not whole blocks of " + std::to_string(t.elems));
    }
    out.push_back({std::move(name), std::move(shape), t, init, stored});
    return Status::ok();
  };
  // The hybrids' zero-centred norms, which the converter stores as 1 + w.
  const auto norm_stored = [&](std::string_view hf) {
    return hybrid && gguf_stores_one_plus(hf) ? Stored::kOnePlus : Stored::kAsIs;
  };
  for (const PlannedTensor& t : random_checkpoint_tensors(spec)) {
    std::string_view n = t.name;
    std::string unnested;  // Qwen3.5's text tensors under model.language_model.: as a text-only export
    if (n.starts_with("model.language_model.")) {
      unnested = "model." + std::string(n.substr(21));
      n = unnested;
    }
    if (n == "model.embed_tokens.weight") {
      FT_RETURN_IF_ERROR(add("token_embd.weight", t.shape, t.init, -1));
    } else if (n == "model.norm.weight") {
      FT_RETURN_IF_ERROR(add("output_norm.weight", t.shape, t.init, -1, norm_stored(n)));
    } else if (n == "lm_head.weight") {
      FT_RETURN_IF_ERROR(add("output.weight", t.shape, t.init, -1));
    } else if (n.starts_with("model.layers.")) {
      const std::size_t dot = n.find('.', 13);
      const std::string layer(n.substr(13, dot - 13));
      const std::string_view rest = n.substr(dot + 1);
      const std::string blk = "blk." + layer + ".";
      if (rest == "mlp.experts.gate_up_proj" || rest == "mlp.experts.down_proj") {  // fused stacks [E, R, C]
        const bool gate_up = rest == "mlp.experts.gate_up_proj";
        FT_RETURN_IF_ERROR(add(blk + (gate_up ? "ffn_gate_up_exps.weight" : "ffn_down_exps.weight"), t.shape, t.init,
                               std::stoll(layer)));
      } else if (rest.starts_with("mlp.experts.")) {
        const std::size_t e_end = rest.find('.', 12);
        const std::string_view stack = gguf_expert_stack_name(rest.substr(e_end + 1));
        if (stack.empty()) return unsupported("no GGUF name for " + t.name);
        const std::string name = blk + std::string(stack);
        if (!stacks.contains(name)) {
          stacks[name] = out.size();
          FT_RETURN_IF_ERROR(add(name, {spec.num_experts, t.shape[0], t.shape[1]}, t.init, std::stoll(layer)));
        }
      } else {
        const std::string_view gguf = hybrid ? gguf_deltanet_layer_name(rest) : gguf_layer_name(rest);
        if (gguf.empty()) return unsupported("no GGUF name for " + t.name);
        std::vector<int64_t> shape = t.shape;
        if (rest == "mlp.shared_expert_gate.weight") shape = {shape.back()};        // a vector in GGUF
        if (rest == "linear_attn.conv1d.weight") shape = {shape[0], shape.back()};  // squeezed
        const Stored stored = rest == "linear_attn.A_log" ? Stored::kNegExp : norm_stored(rest);
        FT_RETURN_IF_ERROR(add(blk + std::string(gguf), shape, t.init, std::stoll(layer), stored));
      }
    } else {
      return unsupported("no GGUF name for " + t.name);
    }
  }
  return out;
}

// The metadata llama.cpp's converter writes for the architecture.
Result<std::vector<std::string>> metadata(const RandomCheckpointSpec& s, SyntheticQuant quant) {
  using namespace gguf_writer;
  std::string arch;
  if (s.family == ModelFamily::kQwen3Moe) {
    arch = "qwen3moe";
  } else if (s.family == ModelFamily::kQwen2Moe) {
    arch = "qwen2moe";
  } else if (s.family == ModelFamily::kQwen3_5Moe) {
    arch = "qwen35moe";
  } else {
    return unsupported(std::string("synthetic GGUF files are written for Qwen3-MoE, Qwen2-MoE and Qwen3.5-MoE only, "
                                   "not ") +
                       model_family_name(s.family));
  }
  const auto u32 = [](int64_t v) { return std::uint32_t(v); };
  std::vector<std::string> kvs = {
      kv_string("general.architecture", arch),
      kv_string("general.name", std::string("FreeToken synthetic ") + synthetic_quant_name(quant)),
      kv_string("freetoken.synthetic",
                "RANDOM WEIGHTS for benchmarks: the shapes and tensor types of a real model, meaningless output"),
      kv_u32(arch + ".block_count", u32(s.num_layers)),
      kv_u32(arch + ".context_length", u32(s.max_position_embeddings)),
      kv_u32(arch + ".embedding_length", u32(s.hidden_size)),
      kv_u32(arch + ".feed_forward_length", u32(s.intermediate_size)),
      kv_u32(arch + ".attention.head_count", u32(s.num_heads)),
      kv_u32(arch + ".attention.head_count_kv", u32(s.num_kv_heads)),
      kv_u32(arch + ".attention.key_length", u32(s.head_dim)),
      kv_u32(arch + ".attention.value_length", u32(s.head_dim)),
      kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f),
      kv_f32(arch + ".rope.freq_base", float(s.rope_theta)),
      kv_u32(arch + ".expert_count", u32(s.num_experts)),
      kv_u32(arch + ".expert_used_count", u32(s.top_k)),
      kv_u32(arch + ".expert_feed_forward_length", u32(s.moe_intermediate_size)),
      kv_bool(arch + ".expert_weights_norm", s.norm_topk_prob),
  };
  if (s.family == ModelFamily::kQwen2Moe || s.family == ModelFamily::kQwen3_5Moe)
    kvs.push_back(kv_u32(arch + ".expert_shared_feed_forward_length", u32(s.shared_expert_intermediate_size)));
  if (s.family == ModelFamily::kQwen3_5Moe) {
    const auto rope_dims = int64_t(double(s.head_dim) * s.partial_rotary_factor);
    for (std::string kv : {kv_u32(arch + ".rope.dimension_count", u32(rope_dims)),
                           kv_u32(arch + ".ssm.conv_kernel", u32(s.linear_conv_kernel_dim)),
                           kv_u32(arch + ".ssm.state_size", u32(s.linear_key_head_dim)),
                           kv_u32(arch + ".ssm.group_count", u32(s.linear_num_key_heads)),
                           kv_u32(arch + ".ssm.time_step_rank", u32(s.linear_num_value_heads)),
                           kv_u32(arch + ".ssm.inner_size", u32(s.linear_value_head_dim * s.linear_num_value_heads)),
                           kv_u32(arch + ".full_attention_interval", u32(s.full_attention_interval))}) {
      kvs.push_back(std::move(kv));
    }
  }
  return kvs;
}

}  // namespace

const char* synthetic_quant_name(SyntheticQuant quant) {
  switch (quant) {
    case SyntheticQuant::kQ4_K_M:
      return "Q4_K_M";
    case SyntheticQuant::kQ5_K_M:
      return "Q5_K_M";
    case SyntheticQuant::kQ4_0:
      return "Q4_0";
    case SyntheticQuant::kQ8_0:
      return "Q8_0";
  }
  return "?";
}

Result<SyntheticQuant> parse_synthetic_quant(std::string_view name) {
  for (SyntheticQuant q :
       {SyntheticQuant::kQ4_K_M, SyntheticQuant::kQ5_K_M, SyntheticQuant::kQ4_0, SyntheticQuant::kQ8_0}) {
    if (name == synthetic_quant_name(q)) return q;
  }
  return invalid_argument("unknown quantisation '" + std::string(name) + "' (known: Q4_K_M, Q5_K_M, Q4_0, Q8_0)");
}

Status write_synthetic_gguf(const fs::path& file, const SyntheticModelOptions& options, SyntheticQuant quant) {
  FT_ASSIGN_OR_RETURN(const RandomCheckpointSpec spec, synthetic_model_spec(options.like, options.layers));
  return write_synthetic_gguf(file, spec, options, quant);
}

Status write_synthetic_gguf(const fs::path& file, const RandomCheckpointSpec& spec,
                            const SyntheticModelOptions& options, SyntheticQuant quant) {
  FT_ASSIGN_OR_RETURN(const std::vector<std::string> kvs, metadata(spec, quant));
  FT_ASSIGN_OR_RETURN(const std::vector<Planned> tensors, plan_tensors(spec, quant));
  std::vector<gguf_writer::TensorEntry> entries;
  for (const Planned& t : tensors) entries.push_back({t.name, t.shape, t.type.id, t.bytes()});
  const gguf_writer::Layout layout = gguf_writer::layout(kvs, entries);
  FT_RETURN_IF_ERROR(synthetic::check_free_space(file.has_parent_path() ? file.parent_path() : fs::path("."),
                                                 layout.file_size + (1 << 20)));

  const std::string path = file.string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return errno == EEXIST ? invalid_argument(path + " exists (write a new file)")
                           : io_error("cannot create " + path + ": " + std::strerror(errno));
  }
  bool done = false;
  struct Cleanup {
    int fd;
    const std::string& path;
    const bool& done;
    ~Cleanup() {
      if (fd >= 0) ::close(fd);
      if (!done) ::unlink(path.c_str());
    }
  } cleanup{fd, path, done};
  FT_RETURN_IF_ERROR(synthetic::pwrite_all(fd, layout.prefix.data(), layout.prefix.size(), 0, path));
  if (::ftruncate(fd, off_t(layout.file_size)) != 0)
    return io_error("cannot size " + path + ": " + std::strerror(errno));

  // Work items: (tensor, piece of at most kItemBytes of whole blocks), each seeded by its name and index.
  struct Item {
    std::size_t tensor;
    std::uint64_t piece;
  };
  std::vector<Item> items;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint64_t bytes = tensors[i].bytes();
    const std::uint64_t per = kItemBytes / std::uint64_t(tensors[i].type.bytes) * std::uint64_t(tensors[i].type.bytes);
    for (std::uint64_t p = 0; p * per < bytes; ++p) items.push_back({i, p});
    total += bytes;
  }
  const auto fill = [&](std::size_t k, std::atomic<std::uint64_t>& written) -> Status {
    const Planned& t = tensors[items[k].tensor];
    const std::uint64_t per = kItemBytes / std::uint64_t(t.type.bytes) * std::uint64_t(t.type.bytes);
    const std::uint64_t first = items[k].piece * per, n = std::min(per, t.bytes() - first);
    std::vector<std::uint8_t> buf(n);
    const std::uint64_t seed = synthetic::block_seed(options.seed, t.name, items[k].piece);
    if (t.type.id == kF32.id) {
      // The init's values (bf16 draws, as the safetensors models), widened.
      const std::vector<bf16_t> table = t.init.kind == TensorInit::Kind::kNormal
                                            ? synthetic::normal_table(t.init.scale, t.init.offset)
                                            : std::vector<bf16_t>();
      std::vector<bf16_t> v(n / 4);
      synthetic::BlockGenerator(t.init, table.data(), seed).fill(v.data(), v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        float f = bf16_to_f32(v[i]);
        if (t.stored == Stored::kOnePlus) f += 1.0f;
        if (t.stored == Stored::kNegExp) f = -std::exp(f);
        std::memcpy(buf.data() + 4 * i, &f, 4);
      }
    } else {
      const double sigma = t.init.kind == TensorInit::Kind::kNormal ? t.init.scale : 0.02;
      random_blocks(t.type, sigma, seed, buf.data(), std::size_t(n / std::uint64_t(t.type.bytes)));
    }
    FT_RETURN_IF_ERROR(
        synthetic::pwrite_all(fd, buf.data(), buf.size(), layout.offsets[items[k].tensor] + first, path));
    written.fetch_add(n, std::memory_order_relaxed);
    return Status::ok();
  };
  FT_RETURN_IF_ERROR(synthetic::parallel_fill(items.size(), options.threads, total, options.progress, fill));
  if (::close(std::exchange(cleanup.fd, -1)) != 0)
    return io_error("cannot write " + path + ": " + std::strerror(errno));
  done = true;
  return Status::ok();
}

}  // namespace ft::engine

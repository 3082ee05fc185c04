#include "blocks/decoder.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "ft/common/log.h"
#include "ft/common/priority_mutex.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/device.h"
#include "ft/engine/reserved_memory.h"

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

// One KV page of the model (every full-attention layer), before its layers are built: what the
// GPU budget check needs to know.
uint64_t recipe_kv_page_bytes(const ModelConfig& cfg, const LoadOptions& options) {
  KvLayout kv;
  kv.kv_heads = cfg.num_key_value_heads;
  kv.head_dim = cfg.head_dim;
  kv.page_tokens = options.kv_page_tokens;
  kv.dtype = KvDType::kBf16;  // the GPU's KV
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    if (cfg.layer_types[std::size_t(i)] != LayerKind::kFullAttention) continue;
    kv.per_layer.push_back({cfg.attention_kv_heads(i), cfg.attention_head_dim(i)});
    ++kv.layers;
  }
  return kv.page_bytes();
}

// The KV pages of one whole context (LoadOptions::context_tokens), `page_bytes` a page.
uint64_t context_kv_bytes(uint64_t page_bytes, const LoadOptions& options) {
  if (options.context_tokens <= 0 || options.kv_page_tokens <= 0) return 0;
  return uint64_t((options.context_tokens + options.kv_page_tokens - 1) / options.kv_page_tokens) * page_bytes;
}

uint64_t default_kv_budget(uint64_t context_bytes) {
  // A quarter of physical memory, or one whole context if more: reserved as address space only,
  // committed as pages are used.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const uint64_t ram = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : (uint64_t(16) << 30);
  return std::max(ram / 4, context_bytes);
}

// The checkpoint's weights by kind, from the HF tensor names, and how many layers have routed
// experts.
void weigh_checkpoint(const Checkpoint& ckpt, const ModelConfig& cfg, PlacementPlan& plan) {
  std::map<std::string, std::uint64_t> layer_expert_bytes;  // "layers.N" -> its routed experts' bytes
  for (const std::string& name : ckpt.tensor_names()) {
    auto view = ckpt.tensor(name);
    if (!view) continue;
    const bool routed = name.find(".experts.") != std::string::npos || name.find(".experts_") != std::string::npos;
    // DeepSeek-V4's releases name them embed.weight and head.weight.
    if (name.find("embed_tokens") != std::string::npos || name.find("lm_head") != std::string::npos ||
        name == "embed.weight" || name == "head.weight") {
      plan.embedding_bytes += view->nbytes;
    } else if (routed && name.find("shared_expert") == std::string::npos) {
      plan.routed_expert_bytes += view->nbytes;
      if (const std::size_t at = name.find("layers."); at != std::string::npos)
        layer_expert_bytes[name.substr(at, name.find('.', at + 7) - at)] += view->nbytes;
    } else {
      plan.dense_bytes += view->nbytes;
    }
  }
  plan.moe_layers = layer_expert_bytes.size();
  plan.experts_per_layer = uint64_t(std::max<int64_t>(cfg.num_experts, 0));
  // A layer's experts share one shape and dtype (the offload checks it); layers may differ.
  for (const auto& [layer, bytes] : layer_expert_bytes)
    if (plan.experts_per_layer)
      plan.largest_expert_bytes = std::max(plan.largest_expert_bytes, bytes / plan.experts_per_layer);
}

// The GPU budget: --gpu-mem or what is free, less what is allocated outside the plan as it is
// needed: cuBLAS/cuBLASLt workspaces, CUDA graphs' memory (a batch-16 decode graph failed to launch
// with 512 MiB kept), and the device copies linear-attention snapshots are taken through (up to
// 256 MiB: without them each snapshot is a synchronous copy, +38% on a Qwen3.6 prefill chunk).
Result<uint64_t> gpu_budget(const LoadOptions& options) {
  FT_ASSIGN_OR_RETURN(CudaDeviceInfo dev, query_cuda_device());
  constexpr uint64_t kLibraryRoom = (uint64_t(1) << 30) + (uint64_t(256) << 20);
  if (options.gpu_mem_bytes > dev.free_bytes) {
    return unavailable("--gpu-mem " + gib_text(options.gpu_mem_bytes) + " is more than the GPU has free (" +
                       gib_text(dev.free_bytes) + ")");
  }
  return options.gpu_mem_bytes ? options.gpu_mem_bytes : dev.free_bytes - std::min(dev.free_bytes, kLibraryRoom);
}

// The GPU workspace a prefill pass takes (the CUDA backend's temporaries), for an offload plan to
// size it. A row: the MoE's grouped products (each of its top_k expert rows holds the gathered
// input and the gate, up and down outputs in two halves, fp32 and bf16: 12 x hidden + 20 x
// intermediate bytes), the router's scores, and a dozen hidden-wide fp32 vectors the layer keeps
// (attention's per-row temporaries are freed before the MoE and smaller). A pass: every expert's
// last rows padded to the 64-row GEMM tile, and the dequantised weight tiles and uploads.
std::pair<uint64_t, uint64_t> pass_workspace(const ModelConfig& cfg) {
  if (cfg.num_experts <= 0 || cfg.num_experts_per_tok <= 0) return {0, 0};
  const auto h = uint64_t(cfg.hidden_size), e = uint64_t(cfg.num_experts), k = uint64_t(cfg.num_experts_per_tok);
  const uint64_t expert_row = 12 * h + 20 * uint64_t(cfg.moe_intermediate_size);
  const uint64_t row = k * expert_row + 4 * e + 28 * k + 48 * h;
  const uint64_t fixed = e * 63 * expert_row + (uint64_t(256) << 20);
  return {row, fixed};
}

// A slot's share of the per-layer floor: at most two, and never more than a quarter of the cache
// spread over the layers (so one layer's prefill can still take most of the slots).
int expert_floor(uint64_t slots, uint64_t layers) {
  return int(std::min<uint64_t>(2, slots / (4 * std::max<uint64_t>(layers, 1))));
}

class DecoderModel final : public Model {
 public:
  DecoderModel(std::shared_ptr<const Checkpoint> ckpt, ModelConfig cfg, std::string fingerprint,
               std::unique_ptr<Backend> backend)
      : ckpt_(std::move(ckpt)), cfg_(std::move(cfg)), fingerprint_(std::move(fingerprint)), be_(std::move(backend)) {}

  static Result<std::unique_ptr<Model>> load(std::shared_ptr<const Checkpoint> ckpt, const ModelConfig& cfg,
                                             const DecoderRecipe& recipe, const LoadOptions& options) {
    FT_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                        make_backend({options.backend, options.threads, std::nullopt, options.deterministic,
                                      options.cpu_bf16_activations}));
    if (recipe.check_backend) FT_RETURN_IF_ERROR(recipe.check_backend(*backend));
    const Checkpoint& c = *ckpt;
    auto m = std::make_unique<DecoderModel>(ckpt, cfg, make_fingerprint(c, cfg), std::move(backend));
    PlacementPlan& plan = m->plan_;
    plan.device = m->be_->device_name();
    weigh_checkpoint(c, cfg, plan);
    if (options.backend == BackendKind::kCuda) {
      plan.kv_page_bytes = recipe_kv_page_bytes(cfg, options);
      FT_ASSIGN_OR_RETURN(const uint64_t budget, gpu_budget(options));
      const auto [row_bytes, pass_bytes] = pass_workspace(cfg);
      FT_RETURN_IF_ERROR(
          plan_gpu_memory(plan, {budget, options.kv_budget_bytes, context_kv_bytes(plan.kv_page_bytes, options),
                                 options.expert_slots, row_bytes, pass_bytes}));
      m->pass_row_bytes_ = row_bytes;
      m->pass_fixed_bytes_ = pass_bytes;
      m->planned_workspace_ = plan.workspace_bytes;
      if (plan.experts_on_host) {
        plan.moe_policy = options.moe_policy.name();
        ExpertOffloadOptions o;
        o.slots = int(plan.expert_slots);
        o.slot_bytes = plan.expert_slot_bytes;
        o.layers = int(plan.moe_layers);
        o.experts = int(plan.experts_per_layer);
        o.floor_per_layer = expert_floor(plan.expert_slots, plan.moe_layers);
        o.lend_workspace = options.expert_slots <= 0;
        o.top_k = int(cfg.num_experts_per_tok);
        o.costs_cache = options.offload_costs_cache;
        o.recalibrate = options.recalibrate;
        o.policy = options.moe_policy;
        // Every core but one: the thread issuing the GPU's work waits on it spinning.
        o.cpu_threads =
            options.threads > 0 ? options.threads : std::max(1, int(std::thread::hardware_concurrency()) - 1);
        FT_RETURN_IF_ERROR(m->be_->set_expert_offload(o));
        // Copies of experts read the mapped files: pinned, they run at PCIe speed.
        plan.experts_pinned = true;
        for (std::span<const std::byte> f : c.mapped_files())
          plan.experts_pinned = m->be_->pin_host(f) && plan.experts_pinned;
      }
    }
    std::uint64_t placed = 0;
    const WeightLoader w(c, recipe.prefix, *m->be_, &placed);
    const WeightLoader top(c, "", *m->be_, &placed);
    const auto progress = [&](bool done) {
      if (options.progress) options.progress(placed, plan.weight_bytes(), done);
    };
    FT_ASSIGN_OR_RETURN(m->embed_, w.matrix(recipe.embed, {cfg.vocab_size, cfg.hidden_size}));
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      FT_ASSIGN_OR_RETURN(DecoderLayer layer, recipe.build_layer(w, cfg, i));
      if (layer.has_state()) ++m->linear_layers_;
      m->layers_.push_back(std::move(layer));
      progress(false);
    }
    FT_ASSIGN_OR_RETURN(m->norm_, w.rms_norm("norm.weight", cfg.hidden_size, cfg.rms_norm_eps,
                                             recipe.zero_centered_norms));
    if (recipe.hyper_head) {
      FT_ASSIGN_OR_RETURN(m->hyper_head_, recipe.hyper_head(w, cfg));
    }
    if (cfg.tie_word_embeddings) {
      m->lm_head_ = m->embed_;
    } else {
      FT_ASSIGN_OR_RETURN(m->lm_head_, top.matrix(recipe.lm_head, {cfg.vocab_size, cfg.hidden_size}));
    }
    progress(true);
    if (m->plan_.workspace_bytes) FT_RETURN_IF_ERROR(m->be_->reserve_workspace(m->plan_.workspace_bytes));
    for (const DecoderLayer& l : m->layers_) {
      if (!l.has_state()) continue;
      const LinearState st = l.empty_state(0);
      m->plan_.linear_state_bytes += ReservedMemory::aligned(st.conv_floats() * sizeof(float)) +
                                     ReservedMemory::aligned(st.recurrent_floats() * sizeof(float));
    }
    FT_RETURN_IF_ERROR(m->make_room_for_linear_state(options));
    FT_RETURN_IF_ERROR(m->make_kv_pool(options));
    return std::unique_ptr<Model>(std::move(m));
  }

  const ModelConfig& config() const override { return cfg_; }
  const std::string& fingerprint() const override { return fingerprint_; }
  std::optional<KvLayout> kv_layout() const override {
    return pool_ ? std::optional<KvLayout>(pool_->layout()) : std::nullopt;
  }
  BackendKind backend_kind() const override { return be_->kind(); }
  int64_t pass_rows() const override {
    std::lock_guard lock(plan_mu_);
    return int64_t(plan_.pass_rows);
  }
  PlacementPlan placement() const override {
    std::lock_guard lock(plan_mu_);
    return plan_;
  }
  Result<PlacementPlan> resize_gpu_memory(uint64_t budget_bytes) const override {
    const PlacementPlan plan = placement();
    if (!plan.experts_on_host || plan.expert_slot_bytes == 0) return Model::resize_gpu_memory(budget_bytes);
    // Shrinking, the expert cache gives way first (to its fewest slots), then the KV pool's free
    // chunks, then the workspace (to a prefill pass of 256 rows: a long prompt takes more passes,
    // each streaming the experts the cache lacks); growing, the workspace comes back first (to its
    // size at load), then the pool (to its planned size), and the cache takes what is left.
    const uint64_t kv_before = plan.kv_pages * plan.kv_page_bytes;
    const uint64_t fixed =
        plan.total_bytes() - plan.expert_cache_bytes() - kv_before - plan.workspace_bytes;  // weights, state
    const std::optional<ExpertOffloadStats> experts = be_->expert_offload_stats();
    const uint64_t least_cache = uint64_t(experts ? experts->min_slots : 3) * plan.expert_slot_bytes;
    const uint64_t least_ws = plan.least_workspace_bytes ? plan.least_workspace_bytes : planned_workspace_;
    const auto less = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };  // a - b, not below 0
    const uint64_t room = less(budget_bytes, fixed);
    uint64_t kv_pages = plan.kv_pages, workspace = plan.workspace_bytes;
    Result<int> now = unsupported("");
    Status workspace_status = Status::ok();
    {
      UrgentLock lock(mu_);  // between passes: right after the one that runs now
      if (pool_ && plan.kv_page_bytes > 0) {
        kv_pages = pool_->set_capacity(less(room, planned_workspace_ + least_cache) / plan.kv_page_bytes);
      }
      const uint64_t kv = kv_pages * plan.kv_page_bytes;
      const uint64_t want_ws = std::clamp(less(room, kv + least_cache) / 256 * 256, least_ws, planned_workspace_);
      // A budget too small for the fewest slots beside the least workspace changes no workspace:
      // the cache refuses it below.
      const bool fits = room >= kv + want_ws + least_cache;
      if (fits && want_ws != plan.workspace_bytes && least_ws < planned_workspace_) {
        // Failed, the workspace is gone (passes then take what they need, outside the budget) and
        // the plan says so before the error is returned.
        Result<std::size_t> ws = be_->resize_workspace(want_ws);
        workspace = ws ? *ws : 0;
        if (!ws) workspace_status = ws.status();
      }
      const uint64_t slots = less(room, kv + workspace) / plan.expert_slot_bytes;
      if (slots > uint64_t(std::numeric_limits<int>::max())) {
        now = invalid_argument("a GPU memory budget of " + gib_text(budget_bytes) + " is more than the cache can use");
      } else {
        now = be_->resize_expert_cache(int(slots), expert_floor(slots, plan.moe_layers));
      }
    }
    {
      std::lock_guard lock(plan_mu_);
      plan_.kv_pages = kv_pages;
      plan_.kv_tokens = kv_pages * uint64_t(pool_ ? pool_->layout().page_tokens : 0);
      plan_.workspace_bytes = workspace;
      if (pass_row_bytes_) plan_.pass_rows = pass_rows_for(workspace, pass_row_bytes_, pass_fixed_bytes_);
      if (now) plan_.expert_slots = uint64_t(*now);
      plan_.budget_bytes = plan_.total_bytes();  // what it takes now: cache and pool move in whole chunks
    }
    if (!workspace_status) return workspace_status;
    if (!now) {
      if (now.status().code() != ErrorCode::kInvalidArgument) return now.status();
      return invalid_argument(gib_text(budget_bytes) + " of GPU memory is too little: the weights, workspace and " +
                              "KV pages in use take " + gib_text(fixed + workspace + kv_pages * plan.kv_page_bytes) +
                              ", and " + now.status().message());
    }
    return placement();
  }
  std::optional<Backend::DeviceMemoryInfo> device_memory() const override { return be_->device_memory(); }
  void set_routing_trace(RoutingTrace* trace) const override {
    std::lock_guard lock(mu_);
    be_->set_routing_trace(trace);
  }
  bool set_forced_routing(const RoutingTrace* forced) const override {
    std::lock_guard lock(mu_);
    return be_->set_forced_routing(forced);
  }
  void set_profile(OpProfile* profile) const override {
    std::lock_guard lock(mu_);
    be_->set_profile(profile);
  }
  int threads() const override { return be_->threads(); }
  KvPoolStats kv_stats() const override { return pool_ ? pool_->stats() : KvPoolStats{}; }
  std::shared_ptr<KvPool> kv_pool() const override { return pool_; }
  // Not under mu_: the backend publishes a copy after each pass, readable while the next runs.
  std::optional<ExpertOffloadStats> expert_offload_stats() const override { return be_->expert_offload_stats(); }
  void set_moe_policy(const MoePolicy& policy) const override {
    std::lock_guard lock(mu_);
    be_->set_moe_policy(policy);
  }

  SequenceState new_state() const override {
    std::vector<LinearState> linear;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (layers_[i].has_state()) linear.push_back(layers_[i].empty_state(int64_t(i)));
    }
    return SequenceState(fingerprint_, pool_, std::move(linear), state_memory_ ? state_memory_ : be_->memory());
  }

  Status forward_batch(std::span<const BatchSlice> batch) const override {
    if (batch.empty()) return invalid_argument("forward: empty batch");
    for (const BatchSlice& b : batch) {
      if (b.tokens.empty()) return invalid_argument("forward: no tokens");
      for (int32_t id : b.tokens) {
        if (id < 0 || id >= cfg_.vocab_size) {
          return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(cfg_.vocab_size) + ")");
        }
      }
      if (!b.state || b.state->fingerprint() != fingerprint_ || b.state->pool() != pool_.get() ||
          b.state->linear().size() != linear_layers_) {
        return invalid_argument("forward: the sequence state belongs to another model");
      }
      if (b.mode != LogitsMode::kNone && !b.logits_out && !b.sample)
        return invalid_argument("forward: logits_out is null");
      if (b.sample && (b.mode != LogitsMode::kLast || !b.token_out))
        return invalid_argument("forward: sampling takes the last row's logits and a token_out");
      for (const BatchSlice& other : batch) {
        if (&other != &b && other.state == b.state) return invalid_argument("forward: a state appears twice");
      }
    }
    // One pass at a time: the backend's scratch and threads serve the whole pass.
    std::lock_guard lock(mu_);
    for (const BatchSlice& b : batch) FT_RETURN_IF_ERROR(b.state->reserve(int64_t(b.tokens.size())));
    if (const std::optional<Backend::PassShape> shape = decode_shape(batch)) {
      return be_->execute([&] { run(batch); }, *shape);
    }
    return be_->execute([&] { run(batch); });
  }

 private:
  Status make_kv_pool(const LoadOptions& options) {
    KvLayout kv;
    kv.page_tokens = options.kv_page_tokens;
    kv.dtype = be_->kv_dtype();
    std::vector<KvLayerShape> shapes;
    for (DecoderLayer& l : layers_) {
      if (l.attention) {
        shapes.push_back({l.attention->spec().kv_heads, l.attention->spec().head_dim});
        l.attention->set_kv_layer(kv.layers++);
      } else if (l.mla_attention) {
        // Latent attention stores every head's expanded key and value (mla_attention_block.h).
        shapes.push_back({l.mla_attention->kv_heads(), l.mla_attention->spec().width()});
        l.mla_attention->set_kv_layer(kv.layers++);
      } else if (l.v4_attention) {
        shapes.push_back({l.v4_attention->kv_heads(), l.v4_attention->head_dim()});
        l.v4_attention->set_kv_layer(kv.layers++);
      }
    }
    if (kv.layers == 0) return Status::ok();
    kv.kv_heads = shapes.front().kv_heads;
    kv.head_dim = shapes.front().head_dim;
    for (const KvLayerShape& sh : shapes)
      if (!(sh == shapes.front())) kv.per_layer = shapes;
    // Attention kernels work a page at a time in 16-key tiles and at most 64 keys.
    if (kv.page_tokens < 16 || kv.page_tokens > 64 || kv.page_tokens % 16 != 0)
      return invalid_argument("KV page size must be 16, 32, 48 or 64 tokens");
    // The GPU's attention kernels give each lane 32-dim slices of a head.
    for (const KvLayerShape& sh : shapes) {
      if (be_->kind() == BackendKind::kCuda && (sh.head_dim % 32 != 0 || sh.head_dim > 256))
        return unsupported("attention with head_dim " + std::to_string(sh.head_dim) +
                           " on the GPU (it takes multiples of 32 up to 256): use --device cpu");
    }
    const std::shared_ptr<Memory> memory = be_->memory();
    uint64_t budget = options.kv_budget_bytes ? options.kv_budget_bytes
                                              : default_kv_budget(context_kv_bytes(kv.page_bytes(), options));
    if (!memory->is_host()) {
      // What the GPU budget leaves once the weights are in and the workspace, the sequences'
      // linear state (and expert cache) are set aside; an offload plan has sized the pool itself.
      if (plan_.linear_state_bytes) plan_.linear_state_sequences = uint64_t(std::max(1, options.state_sequences));
      const uint64_t used =
          plan_.device_weight_bytes() + plan_.workspace_bytes + plan_.linear_state_room() + plan_.expert_cache_bytes();
      const uint64_t room = plan_.budget_bytes > used ? plan_.budget_bytes - used : 0;
      if (options.kv_budget_bytes > room) {
        return unavailable("--kv-budget " + gib_text(options.kv_budget_bytes) +
                           " does not fit: the GPU budget leaves " + gib_text(room) +
                           " after weights, workspace and linear state");
      }
      if (!options.kv_budget_bytes) budget = plan_.kv_budget_bytes ? std::min(plan_.kv_budget_bytes, room) : room;
      if (plan_.linear_state_sequences) {
        FT_ASSIGN_OR_RETURN(state_memory_, ReservedMemory::create(memory, plan_.linear_state_room()));
      }
    }
    Result<std::shared_ptr<KvPool>> pool = KvPool::create(kv, budget, memory);
    if (!memory->is_host() && !options.kv_budget_bytes && !plan_.kv_budget_bytes) {
      // The driver's own bookkeeping takes a little of what it reports free, more for one huge
      // block: step down a sixteenth at a time until the block is granted (the plan shows the result).
      for (uint64_t step = budget / 16; !pool && pool.status().code() == ErrorCode::kUnavailable &&
                                        budget > step + kv.page_bytes();) {
        budget -= step;
        pool = KvPool::create(kv, budget, memory);
      }
    }
    if (!pool) return pool.status();
    pool_ = std::move(pool).value();
    if (!memory->is_host()) {
      // Host buffers for the pages a checkpoint copies out, made and touched now rather than by the
      // first checkpoints: enough for a prefill chunk of kStagingTokens (more are made as needed).
      constexpr int64_t kStagingTokens = 4096;
      const auto pages =
          std::size_t(std::min<uint64_t>(pool_->stats().pages_total, uint64_t(kv.pages_for(kStagingTokens) + 1)));
      if (Status s = pool_->reserve_mirror_buffers(pages); s) {
        plan_.checkpoint_staging_bytes = pages * kv.page_bytes();
      } else {
        FT_WARN("checkpoint staging buffers not reserved: " << s.message());
      }
    }
    plan_.kv_page_bytes = kv.page_bytes();
    plan_.kv_pages = pool_->stats().pages_total;
    plan_.kv_tokens = plan_.kv_pages * uint64_t(kv.page_tokens);
    plan_.context_tokens = uint64_t(std::max<int64_t>(options.context_tokens, 0));
    return Status::ok();
  }

  // The offload plan filled the expert cache before the layers said how much linear-attention state
  // a sequence keeps: the cache gives that room back, down to its least slots (the slots asked for
  // with --expert-slots stay), so the KV pool keeps the context it was planned for; what the cache
  // cannot give still comes out of the pool.
  Status make_room_for_linear_state(const LoadOptions& options) {
    PlacementPlan& p = plan_;
    if (!p.experts_on_host || !p.linear_state_bytes || options.expert_slots > 0 || !p.expert_slot_bytes)
      return Status::ok();
    const uint64_t room = p.linear_state_bytes * uint64_t(std::max(1, options.state_sequences));
    const uint64_t give = (room + p.expert_slot_bytes - 1) / p.expert_slot_bytes;
    const std::optional<ExpertOffloadStats> stats = be_->expert_offload_stats();
    const uint64_t least = uint64_t(stats ? stats->min_slots : 3);
    if (p.expert_slots <= least) return Status::ok();
    const uint64_t slots = std::max(least, p.expert_slots - std::min(give, p.expert_slots));
    FT_ASSIGN_OR_RETURN(const int now, be_->resize_expert_cache(int(slots), expert_floor(slots, p.moe_layers)));
    p.expert_slots = uint64_t(now);
    return Status::ok();
  }

  // A decode step's shape (every sequence one token, a few sequences): the sequences' logits modes
  // and the context its attention is shaped for, the longest one's rounded up to a power of two
  // (at least 256), so one recording serves many steps.
  static std::optional<Backend::PassShape> decode_shape(std::span<const BatchSlice> batch) {
    constexpr std::size_t kMaxSequences = 16;
    if (batch.size() > kMaxSequences) return std::nullopt;
    Backend::PassShape shape;
    int64_t ctx = 0;
    shape.key.push_back(int64_t(batch.size()));
    for (const BatchSlice& b : batch) {
      if (b.tokens.size() != 1) return std::nullopt;
      shape.key.push_back(int64_t(b.mode) * 4 + (b.logits_out ? 2 : 0) + (b.sample ? 1 : 0));
      ctx = std::max(ctx, b.state->position() + 1);
    }
    shape.kv_tokens = 256;
    while (shape.kv_tokens < ctx) shape.kv_tokens *= 2;
    return shape;
  }

  // The pass itself, on the backend's threads; states have their pages reserved.
  void run(std::span<const BatchSlice> batch) const {
    Backend& be = *be_;
    Scratch& s = be.host_scratch();  // what the host writes: ids, positions, page tables
    Scratch::Frame frame(s);
    Scratch::Frame device_frame(be.scratch());
    std::size_t T = 0;
    for (const BatchSlice& b : batch) T += b.tokens.size();
    const std::size_t H = std::size_t(cfg_.hidden_size), V = std::size_t(cfg_.vocab_size), n = batch.size();

    int32_t* ids = s.take<int32_t>(T);
    int64_t* positions = s.take<int64_t>(T);
    AttentionSeq* attn = s.take<AttentionSeq>(n);
    DeltaNetSeq* linear = s.take<DeltaNetSeq>(n);
    for (std::size_t i = 0, row = 0; i < n; row += batch[i].tokens.size(), ++i) {
      const BatchSlice& b = batch[i];
      const int64_t pos0 = b.state->position();
      for (std::size_t t = 0; t < b.tokens.size(); ++t) {
        ids[row + t] = b.tokens[t];
        positions[row + t] = pos0 + int64_t(t);
      }
      attn[i] = {row, b.tokens.size(), pos0, b.state->page_data().data()};
    }
    const int64_t* staged_positions = be.stage({positions, T});
    // The residual: one row of H a token, or with hyper-connections N streams of it, each the embedding.
    const std::size_t width = (hyper_head_ ? hyper_head_->spec().streams : 1) * H;
    float* hidden = be.scratch().floats(T * width);
    if (hyper_head_) {
      float* embedded = be.scratch().floats(T * H);
      be.embedding(embed_, {ids, T}, embedded);
      be.copy_columns(embedded, H, width / H, hidden, H, T * (width / H), H);
    } else {
      be.embedding(embed_, {ids, T}, hidden);
    }
    if (cfg_.embedding_scale != 1.0) be.scale(hidden, T * width, float(cfg_.embedding_scale));

    const KvLayout* kv = pool_ ? &pool_->layout() : nullptr;
    std::size_t linear_index = 0;
    float* delta = be.scratch().floats(T * H);  // a layer's last residual, added by the next one
    bool delta_pending = false;
    for (const DecoderLayer& layer : layers_) {
      if (layer.has_state()) {
        for (std::size_t i = 0; i < n; ++i) {
          LinearState& st = batch[i].state->linear()[linear_index];
          linear[i] = {attn[i].row0, attn[i].rows, st.conv_data(), st.recurrent_data()};
        }
        ++linear_index;
      }
      const LayerBatch layer_batch{kv, {attn, n}, {linear, n}, staged_positions, ids};
      if (layer.hyper) {
        layer.forward_hyper(be, hidden, T, layer_batch);
      } else {
        delta_pending = layer.forward(be, hidden, delta, delta_pending, T, layer_batch);
      }
    }
    if (delta_pending) be.add(hidden, delta, T * H);

    // The rows whose logits are wanted, then one lm_head pass over all of them.
    std::size_t* rows = s.take<std::size_t>(T);
    std::size_t picked = 0;
    for (std::size_t i = 0; i < n; ++i) {
      batch[i].state->advance(int64_t(attn[i].rows));
      if (batch[i].mode == LogitsMode::kNone) continue;
      const std::size_t first = batch[i].mode == LogitsMode::kLast ? attn[i].rows - 1 : 0;
      for (std::size_t r = first; r < attn[i].rows; ++r) rows[picked++] = attn[i].row0 + r;
    }
    if (picked == 0) return;
    float* x = be.scratch().floats(picked * H);
    float* logits = be.scratch().floats(picked * V);
    if (hyper_head_) {
      float* streams = be.scratch().floats(picked * width);
      be.gather_rows(hidden, {rows, picked}, width, streams);
      hyper_head_->head(be, streams, picked, x);
    } else {
      be.gather_rows(hidden, {rows, picked}, H, x);
    }
    norm_.forward(be, x, x, picked);
    be.linear(x, picked, lm_head_, nullptr, logits);
    if (cfg_.final_logit_softcapping > 0) be.softcap(logits, picked * V, float(cfg_.final_logit_softcapping));
    std::size_t at = 0;
    std::vector<std::size_t> sample_rows;
    std::vector<SampleRequest> requests;
    std::vector<int32_t*> tokens;
    for (const BatchSlice& b : batch) {
      if (b.mode == LogitsMode::kNone) continue;
      const std::size_t k = b.mode == LogitsMode::kLast ? 1 : b.tokens.size();
      if (b.logits_out) be.to_host(logits + at * V, k * V, b.logits_out);
      if (b.sample) {
        sample_rows.push_back(at);
        requests.push_back(*b.sample);
        tokens.push_back(b.token_out);
      }
      at += k;
    }
    if (!requests.empty()) be.sample(logits, V, sample_rows, requests, tokens);
  }

  std::shared_ptr<const Checkpoint> ckpt_;  // mapped for the model's whole life: the weights live there
  ModelConfig cfg_;
  std::string fingerprint_;
  std::unique_ptr<Backend> be_;
  mutable PriorityMutex mu_;    // one pass at a time; a resize goes before the next pass
  mutable std::mutex plan_mu_;  // plan_ after load (the expert cache's size changes)
  Matrix embed_;  // [vocab, hidden]
  std::vector<DecoderLayer> layers_;
  RmsNorm norm_;
  std::optional<HyperConnection> hyper_head_;  // the streams' collapse before norm_ (hyper-connections)
  Matrix lm_head_;  // [vocab, hidden]; the embedding when tied
  std::shared_ptr<KvPool> pool_;
  std::shared_ptr<Memory> state_memory_;  // GPU: the sequences' linear state, reserved at load
  std::size_t linear_layers_ = 0;
  mutable PlacementPlan plan_;  // under plan_mu_ once loaded: resize_gpu_memory changes the cache
  // The workspace a prefill row and a pass take (pass_workspace), and the workspace at load: what
  // an elastic budget gives back.
  uint64_t pass_row_bytes_ = 0, pass_fixed_bytes_ = 0, planned_workspace_ = 0;
};

}  // namespace

bool DecoderLayer::forward(Backend& be, float* hidden, float* delta, bool delta_pending, std::size_t T,
                           const LayerBatch& batch) const {
  const std::size_t H = input_norm.weight.size(), n = T * H;
  Scratch::Frame frame(be.scratch());
  float* normed = be.scratch().floats(n);
  if (delta_pending) {
    input_norm.add_forward(be, hidden, delta, normed, T);
  } else {
    input_norm.forward(be, hidden, normed, T);
  }
  mix(be, normed, T, batch, delta);
  if (mixer_out_norm) mixer_out_norm->forward(be, delta, delta, T);
  post_norm.add_forward(be, hidden, delta, normed, T);
  if (parallel) {
    mlp->forward(be, normed, delta, T);
    parallel->mlp_out_norm.forward(be, delta, delta, T);
    parallel->moe_in_norm.forward(be, hidden, normed, T);
    float* routed = be.scratch().floats(n);
    moe->forward(be, normed, routed, T, hidden);
    parallel->moe_out_norm.forward(be, routed, routed, T);
    be.add(delta, routed, n);
  } else if (moe) {
    moe->forward(be, normed, delta, T);
  } else {
    mlp->forward(be, normed, delta, T);
  }
  if (ffn_out_norm) ffn_out_norm->forward(be, delta, delta, T);
  if (!output_scale) return true;
  be.add(hidden, delta, n);
  be.scale(hidden, n, *output_scale);
  return false;
}

void DecoderLayer::mix(Backend& be, const float* normed, std::size_t T, const LayerBatch& batch, float* out) const {
  if (linear_attention) {
    linear_attention->forward(be, normed, T, batch.linear, out);
  } else if (mla_attention) {
    mla_attention->forward(be, *batch.kv, normed, T, batch.attention, batch.positions, out);
  } else if (v4_attention) {
    v4_attention->forward(be, *batch.kv, normed, T, batch.attention, batch.linear, batch.positions, out);
  } else {
    attention->forward(be, *batch.kv, normed, T, batch.attention, batch.positions, out);
  }
}

void DecoderLayer::forward_hyper(Backend& be, float* streams, std::size_t T, const LayerBatch& batch) const {
  const std::size_t H = input_norm.weight.size(), N = hyper->mixer.spec().streams;
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);
  float* x = s.floats(T * H);
  float* normed = s.floats(T * H);
  float* out = s.floats(T * H);
  float* post = s.floats(T * N);
  float* comb = s.floats(T * N * N);
  hyper->mixer.pre(be, streams, T, x, post, comb);
  input_norm.forward(be, x, normed, T);
  mix(be, normed, T, batch, out);
  hyper->mixer.post(be, streams, out, post, comb, T);
  hyper->ffn.pre(be, streams, T, x, post, comb);
  post_norm.forward(be, x, normed, T);
  if (moe) {
    moe->forward(be, normed, out, T, nullptr, batch.ids);
  } else {
    mlp->forward(be, normed, out, T);
  }
  hyper->ffn.post(be, streams, out, post, comb, T);
}

Result<std::unique_ptr<Model>> load_decoder_model(std::shared_ptr<const Checkpoint> ckpt, const ModelConfig& cfg,
                                                  const DecoderRecipe& recipe, const LoadOptions& options) {
  return DecoderModel::load(std::move(ckpt), cfg, recipe, options);
}

Result<DecoderLayer> layer_with_norms(const WeightLoader& w, const ModelConfig& cfg, int64_t layer, bool zero_centered) {
  const std::string p = layer_prefix(layer);
  DecoderLayer out;
  FT_ASSIGN_OR_RETURN(out.input_norm,
                      w.rms_norm(p + "input_layernorm.weight", cfg.hidden_size, cfg.rms_norm_eps, zero_centered));
  FT_ASSIGN_OR_RETURN(out.post_norm, w.rms_norm(p + "post_attention_layernorm.weight", cfg.hidden_size,
                                                cfg.rms_norm_eps, zero_centered));
  return out;
}

Result<DecoderLayer> attention_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t layer,
                                     const AttentionSpec& spec) {
  FT_ASSIGN_OR_RETURN(DecoderLayer out, layer_with_norms(w, cfg, layer, /*zero_centered=*/false));
  FT_ASSIGN_OR_RETURN(out.attention, AttentionBlock::load(w, layer_prefix(layer) + "self_attn.", spec));
  return out;
}

Result<DecoderLayer> hybrid_delta_net_layer(const WeightLoader& w, const ModelConfig& cfg, int64_t layer,
                                            ref::DeltaNetProjLayout layout) {
  const std::string p = layer_prefix(layer);
  FT_ASSIGN_OR_RETURN(DecoderLayer out, layer_with_norms(w, cfg, layer, /*zero_centered=*/true));
  if (cfg.layer_types[std::size_t(layer)] == LayerKind::kLinearAttention) {
    FT_ASSIGN_OR_RETURN(out.linear_attention,
                        LinearAttentionBlock::load(w, p + "linear_attn.", linear_attention_spec(cfg, layout)));
  } else {
    AttentionSpec spec = attention_spec(cfg);
    spec.gated = true;
    spec.zero_centered_qk_norm = true;
    FT_ASSIGN_OR_RETURN(out.attention, AttentionBlock::load(w, p + "self_attn.", spec));
  }
  return out;
}

Status load_feed_forward(const WeightLoader& w, const ModelConfig& cfg, int64_t layer, DecoderLayer& out) {
  const std::string p = layer_prefix(layer) + "mlp.";
  if (cfg.is_moe_layer(layer)) {
    FT_ASSIGN_OR_RETURN(out.moe, MoeBlock::load(w, p, moe_spec(cfg)));
  } else {
    FT_ASSIGN_OR_RETURN(out.mlp, w.swiglu(p, cfg.hidden_size, cfg.intermediate_size));
  }
  return Status::ok();
}

AttentionSpec attention_spec(const ModelConfig& cfg) {
  AttentionSpec s;
  s.hidden = cfg.hidden_size;
  s.heads = cfg.num_attention_heads;
  s.kv_heads = cfg.num_key_value_heads;
  s.head_dim = cfg.head_dim;
  s.qkv_bias = cfg.attention_bias || cfg.qkv_bias;
  s.o_bias = cfg.attention_bias;
  s.eps = cfg.rms_norm_eps;
  s.rope = rope_spec(cfg, cfg.head_dim);
  return s;
}

ref::RopeSpec rope_spec(const ModelConfig& cfg, int64_t head_dim) {
  ref::RopeSpec r;
  r.head_dim = std::size_t(head_dim);
  r.rotary_dim = std::size_t(cfg.rotary_dim());
  r.theta = cfg.rope_theta;
  r.layout = cfg.rope_interleave ? ref::RopeLayout::kGptj : ref::RopeLayout::kNeox;
  if (cfg.rope_type == "yarn") {
    r.yarn.factor = cfg.yarn.factor;
    r.yarn.beta_fast = cfg.yarn.beta_fast;
    r.yarn.beta_slow = cfg.yarn.beta_slow;
    r.yarn.original_max_position_embeddings = cfg.yarn.original_max_position_embeddings;
    r.yarn.truncate = cfg.yarn.truncate;
    r.attention_factor = float(cfg.yarn.attention_factor);
  }
  if (cfg.rope_type == "llama3") {
    r.llama3.factor = cfg.llama3.factor;
    r.llama3.low_freq_factor = cfg.llama3.low_freq_factor;
    r.llama3.high_freq_factor = cfg.llama3.high_freq_factor;
    r.llama3.original_max_position_embeddings = cfg.llama3.original_max_position_embeddings;
  }
  return r;
}

MlaSpec mla_spec(const ModelConfig& cfg) {
  MlaSpec s;
  s.hidden = cfg.hidden_size;
  s.heads = cfg.num_attention_heads;
  s.q_lora_rank = cfg.q_lora_rank;
  s.kv_lora_rank = cfg.kv_lora_rank;
  s.qk_nope_head_dim = cfg.qk_nope_head_dim;
  s.qk_rope_head_dim = cfg.qk_rope_head_dim;
  s.v_head_dim = cfg.v_head_dim;
  s.bias = cfg.attention_bias;
  // HF DeepseekV3Attention: qk_head_dim ** -0.5, times mscale^2 under a scaled RoPE with
  // mscale_all_dim set (Python doubles; the product meets the fp32 scores as a float).
  double scale = 1.0 / std::sqrt(double(s.qk_head_dim()));
  if (cfg.rope_type != "default" && cfg.yarn.mscale_all_dim != 0) {
    const double m = ref::yarn_mscale(cfg.yarn.factor, cfg.yarn.mscale_all_dim);
    scale *= m * m;
  }
  s.scale = float(scale);
  s.rope = rope_spec(cfg, s.width());
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
  if (cfg.sigmoid_router) {
    s.router.scoring = ref::RouterScoring::kSigmoid;
    s.router.n_group = std::size_t(cfg.n_group);
    s.router.topk_group = std::size_t(cfg.topk_group);
    s.router.scaling = float(cfg.routed_scaling_factor);
    s.correction_bias = true;
    s.shared_gated = false;
  }
  if (cfg.biased_softmax_router) {  // ERNIE 4.5: softmax scores, the bias for the choice only
    s.correction_bias = true;
    s.correction_bias_names = {"gate.moe_statics.e_score_correction_bias", "moe_statics.e_score_correction_bias"};
    s.correction_bias_one_row = true;
    s.shared_gated = false;
  }
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
  s.dims.v_heads_tiled = cfg.linear_value_heads_tiled;
  s.dims.norm_eps = cfg.rms_norm_eps;
  return s;
}

std::string layer_prefix(int64_t layer) { return "layers." + std::to_string(layer) + "."; }

}  // namespace ft::engine::blocks

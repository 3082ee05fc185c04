#include "expert_slots.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "device_memory.h"
#include "ft/engine/expert_copy_runs.h"
#include "ft/engine/offload_bandwidth.h"
#include "kernels.h"

namespace ft::engine::cuda {
namespace {

constexpr std::size_t kAlign = ExpertSlots::kSlotAlign;
// Slots are allocated a chunk at a time, and a resize frees or adds whole chunks: small enough
// that the cache can give back memory in steps of a few hundred MiB.
constexpr std::size_t kChunkBytes = std::size_t(256) << 20;

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Misses read in place go through staging slots first (FT_CUDA_STAGE_MISSES=1; off until measured
// against the kernels' own reads over PCIe). Read once, at creation: a recorded step keeps the
// way it was recorded.
bool stage_misses_enabled() {
  const char* env = std::getenv("FT_CUDA_STAGE_MISSES");
  return env && std::strcmp(env, "1") == 0;
}

// Each layer's misses split by the share on the device (split_misses_to_host); FT_CUDA_SPLIT=hash
// fixes the CPU's share per (layer, expert) by a hash in the table instead (kept to compare: the
// split per layer decoded 5-8% faster, docs/perf-notes.md).
bool split_by_layer_enabled() {
  const char* env = std::getenv("FT_CUDA_SPLIT");
  return !(env && std::strcmp(env, "hash") == 0);
}

// The next layer's experts copied ahead in decode (ExpertSlots::prefetch) under the policies that
// take the choices to the host; FT_CUDA_PREFETCH=0 turns it off, to compare (docs/perf-notes.md).
bool prefetch_enabled() {
  const char* env = std::getenv("FT_CUDA_PREFETCH");
  return !(env && std::strcmp(env, "0") == 0);
}
// The in-place policies' (direct) copies ahead, by the SMs: FT_CUDA_PREFETCH=direct (measured
// slower than direct:auto without them, so not the default).
bool prefetch_in_place_enabled() {
  const char* env = std::getenv("FT_CUDA_PREFETCH");
  return env && std::strcmp(env, "direct") == 0;
}
// A measuring aid: FT_CUDA_PREFETCH_MAX=N copies at most N experts ahead a layer (else `most`).
int copies_ahead_cap(int most) {
  static const int cap = [] {
    const char* env = std::getenv("FT_CUDA_PREFETCH_MAX");
    return env ? std::atoi(env) : 0;
  }();
  return cap > 0 ? std::min(cap, most) : most;
}

// A measuring aid: FT_CPU_WARM=<microseconds> wakes the CPU experts' threads when the share starts
// waiting for a layer's input (CpuExperts::warm); unset or 0, the layer's loops wake them.
std::chrono::microseconds cpu_warm_horizon() {
  static const std::chrono::microseconds horizon = [] {
    const char* env = std::getenv("FT_CPU_WARM");
    return std::chrono::microseconds(env ? std::max(0, std::atoi(env)) : 0);
  }();
  return horizon;
}

}  // namespace

int ExpertSlots::transient_for(int slots, int top_k) {
  // A quarter of the slots, at least a token's choices and at most 128, are transient: a decode
  // step's fetches the cache declines, and the experts copied ahead for the next layer. The cache
  // keeps two at least (a prefill round's copies overlap the round before, whose slots stay
  // protected). FT_CUDA_TRANSIENT_SLOTS=N asks for N (tests: a tiny model's few slots mostly
  // transient, so that decode copies ahead and still misses).
  int want = std::max(slots / 4, top_k);
  if (const char* env = std::getenv("FT_CUDA_TRANSIENT_SLOTS"); env && std::atoi(env) > 0) want = std::atoi(env);
  return std::clamp(want, 1, std::max(1, std::min(128, slots - 2)));
}

int ExpertSlots::min_slots(int top_k) { return std::max(top_k, 1) + 2; }

int ExpertSlots::floor_for(int slots, int top_k, int layers, int floor) {
  // The floors together take at most a quarter of the cache, so one layer's prefill rounds still
  // find slots that other layers' floors do not hold.
  const int cache = slots - transient_for(slots, top_k);
  return std::clamp(cache / (4 * std::max(layers, 1)), 0, std::max(floor, 0));
}

void copy_expert_async(const SwiGluMatrices& m, const ExpertPtrs& to, cudaStream_t s) {
  cudaMemcpyAsync(const_cast<std::byte*>(to.gate), m.gate.data, m.gate.bytes(), cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(const_cast<std::byte*>(to.up), m.up.data, m.up.bytes(), cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(const_cast<std::byte*>(to.down), m.down.data, m.down.bytes(), cudaMemcpyHostToDevice, s);
}

ExpertSlots::ExpertSlots(const ExpertOffloadOptions& options, int transient)
    : o_(options),
      cache_(options.slots - transient, options.layers, options.experts, options.floor_per_layer, 2),
      cpu_(options.cpu_threads),
      in_place_(options.layers, options.experts),
      noted_(std::size_t(options.layers), -1) {}

Result<std::unique_ptr<ExpertSlots>> ExpertSlots::create(const ExpertOffloadOptions& options) {
  if (options.slots < min_slots(options.top_k))
    return invalid_argument("expert offload needs at least " + std::to_string(min_slots(options.top_k)) + " slots");
  ExpertOffloadOptions o = options;
  o.floor_per_layer = floor_for(options.slots, options.top_k, options.layers, options.floor_per_layer);
  std::unique_ptr<ExpertSlots> x(new ExpertSlots(o, transient_for(options.slots, options.top_k)));
  x->floor_asked_ = options.floor_per_layer;
  x->stats_.slots = options.slots;
  x->stats_.min_slots = min_slots(options.top_k);
  x->stats_.policy = options.policy.name();
  x->stats_.layer_hit_rate.assign(std::size_t(options.layers), 0.0);
  x->stats_.layer_fetched.assign(std::size_t(options.layers), 0);
  x->stats_.layer_cpu_computed.assign(std::size_t(options.layers), 0);
  x->stats_.layer_read_in_place.assign(std::size_t(options.layers), 0);
  x->stats_.cpu_layers_by_experts.assign(33, 0);
  x->stats_.cpu_seconds_by_experts.assign(33, 0.0);
  x->last_active_.resize(std::size_t(options.layers));
  // The CPU share's thread reads these while the GPU's meets later layers: never reallocated.
  x->by_id_.reserve(std::size_t(options.layers) + 1);
  x->on_host_.reserve(std::size_t(options.layers) + 1);
  x->publish();
  const auto fail = [](const char* what, cudaError_t err) {
    cudaGetLastError();
    return unavailable(error_text(what, err));
  };
  // At least eight chunks, so a small cache resizes in steps of an eighth of it or less.
  x->slots_per_chunk_ = int(std::clamp<std::size_t>(kChunkBytes / options.slot_bytes, 1,
                                                    std::max<std::size_t>(1, std::size_t(options.slots) / 8)));
  x->o_.slots = 0;
  if (!x->grow_to(options.slots)) return fail("allocating expert slots", cudaErrorMemoryAllocation);
  void* z = nullptr;
  if (cudaError_t err = cudaMalloc(&z, options.slot_bytes); err != cudaSuccess) return fail("the zero expert", err);
  x->zero_ = static_cast<std::byte*>(z);
  if (cudaError_t err = cudaMemset(z, 0, options.slot_bytes); err != cudaSuccess) return fail("the zero expert", err);
  void* flag = nullptr;
  if (cudaError_t err = cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocMapped); err != cudaSuccess)
    return fail("the CPU experts' flag", err);
  x->flag_ = static_cast<unsigned*>(flag);
  *x->flag_ = 0;
  if (cudaError_t err = cudaStreamCreateWithFlags(&x->copy_, cudaStreamNonBlocking); err != cudaSuccess)
    return fail("the copy stream", err);
  // The in-place table and choices (small: pointers and int32s per layer), allocated here so that
  // no pass allocates while a graph is being captured.
  // The pointers, then a byte per (layer, expert): whether its entry names host memory.
  const std::size_t pointers = x->in_place_.table_size() * sizeof(const std::byte*);
  const std::size_t table = pointers + std::size_t(options.layers) * std::size_t(options.experts);
  void* mirror = nullptr;
  if (cudaError_t err = cudaHostAlloc(&mirror, table, cudaHostAllocDefault); err != cudaSuccess)
    return fail("the in-place expert table", err);
  x->mirror_ = static_cast<const std::byte**>(mirror);
  std::memset(mirror, 0, table);
  void* dev = nullptr;
  if (cudaError_t err = cudaMalloc(&dev, table); err != cudaSuccess) return fail("the in-place expert table", err);
  x->table_dev_ = static_cast<const std::byte**>(dev);
  if (cudaError_t err = cudaMemset(dev, 0, table); err != cudaSuccess) return fail("the in-place expert table", err);
  x->table_bytes_ = table;
  x->stage_misses_ = stage_misses_enabled();
  x->split_by_layer_ = split_by_layer_enabled() && options.experts <= cuda::kSplitMaxExperts;
  x->prefetch_ = prefetch_enabled();
  x->prefetch_in_place_ = prefetch_in_place_enabled();
  if (x->prefetch_in_place_) {
    const std::size_t E = std::size_t(options.experts);
    void* p = nullptr;
    if (cudaError_t err = cudaStreamCreateWithFlags(&x->ahead_stream_, cudaStreamNonBlocking); err != cudaSuccess)
      return fail("the copy-ahead stream", err);
    for (cudaEvent_t* ev : {&x->ahead_fork_, &x->ahead_join_[0], &x->ahead_join_[1]})
      if (cudaError_t err = cudaEventCreateWithFlags(ev, cudaEventDisableTiming); err != cudaSuccess)
        return fail("the copy-ahead events", err);
    const std::size_t bytes = 2 * kMaxAhead * sizeof(std::byte*) + 2 * 3 * E * sizeof(std::byte*) +
                              2 * std::size_t(kMaxInPlaceChoices) * sizeof(int32_t) + 2 * E;
    if (cudaError_t err = cudaMalloc(&p, bytes); err != cudaSuccess) return fail("the copy-ahead tables", err);
    cudaMemset(p, 0, bytes);
    auto* at = static_cast<std::byte*>(p);
    x->ahead_slots_dev_ = reinterpret_cast<std::byte**>(at);
    at += 2 * kMaxAhead * sizeof(std::byte*);
    x->ahead_table_dev_ = reinterpret_cast<const std::byte**>(at);
    at += 2 * 3 * E * sizeof(std::byte*);
    x->ahead_choices_dev_ = reinterpret_cast<int32_t*>(at);
    at += 2 * std::size_t(kMaxInPlaceChoices) * sizeof(int32_t);
    x->ahead_from_host_dev_ = reinterpret_cast<std::uint8_t*>(at);
  }
  void* routes = nullptr;
  const std::size_t route_bytes = std::size_t(options.layers) * kMaxInPlaceChoices * sizeof(int32_t);
  if (cudaError_t err = cudaHostAlloc(&routes, route_bytes, cudaHostAllocDefault); err != cudaSuccess)
    return fail("the in-place choices", err);
  x->routes_ = static_cast<int32_t*>(routes);
  if (cudaError_t err = cudaEventCreateWithFlags(&x->landed_, cudaEventDisableTiming); err != cudaSuccess)
    return fail("copy events", err);
  void* step = nullptr;
  // The step number, then the CPU's share as a float (split_misses_to_host reads it).
  if (cudaError_t err = cudaHostAlloc(&step, 2 * sizeof(unsigned), cudaHostAllocDefault); err != cudaSuccess)
    return fail("the step counter", err);
  x->step_host_ = static_cast<unsigned*>(step);
  std::memset(step, 0, 2 * sizeof(unsigned));
  if (cudaError_t err = cudaMalloc(&step, 2 * sizeof(unsigned)); err != cudaSuccess)
    return fail("the step counter", err);
  x->step_dev_ = static_cast<unsigned*>(step);
  x->io_.resize(std::size_t(options.layers));
  for (cudaEvent_t* e :
       {&x->round_done_[0], &x->round_done_[1], &x->round_done_[2], &x->all_done_, &x->group_.begin, &x->group_.end}) {
    if (cudaError_t err = cudaEventCreate(e); err != cudaSuccess) return fail("copy events", err);
  }
  return x;
}

ExpertSlots::~ExpertSlots() {
  end_cpu_share();
  cpu_.drain();
  if (copy_) cudaStreamSynchronize(copy_);
  if (flag_) cudaFreeHost(flag_);
  if (mirror_) cudaFreeHost(mirror_);
  if (routes_) cudaFreeHost(routes_);
  if (table_dev_) cudaFree(table_dev_);
  if (landed_) cudaEventDestroy(landed_);
  for (void* p : io_blocks_) cudaFreeHost(p);
  if (step_host_) cudaFreeHost(step_host_);
  if (step_dev_) cudaFree(step_dev_);
  for (void* p : pinned_) cudaHostUnregister(p);
  for (void* p : pinned_buffers_) cudaFreeHost(p);
  for (const Chunk& c : chunks_)
    if (c.owned) cudaFree(c.base);
  if (zero_) cudaFree(zero_);
  for (cudaEvent_t e : {round_done_[0], round_done_[1], round_done_[2], all_done_, group_.begin, group_.end})
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : ahead_done_) cudaEventDestroy(e);
  if (ahead_stream_) cudaStreamSynchronize(ahead_stream_);
  for (cudaEvent_t e : {ahead_fork_, ahead_join_[0], ahead_join_[1]})
    if (e) cudaEventDestroy(e);
  if (ahead_stream_) cudaStreamDestroy(ahead_stream_);
  if (ahead_slots_dev_) cudaFree(ahead_slots_dev_);
  if (copy_) cudaStreamDestroy(copy_);
}

ExpertOffloadStats ExpertSlots::snapshot() const {
  std::lock_guard lock(published_mu_);
  return published_;
}

void ExpertSlots::publish() {
  ExpertOffloadStats s = stats_;
  s.cpu_share = cpu_share() ? share_now() : 0;
  s.resident = cache_.resident();
  s.hits = cache_.hits();
  s.misses = cache_.misses();
  s.costs = model_.costs();
  for (int l = 0; l < cache_.layers(); ++l) {
    const ExpertCache::LayerStats& ls = cache_.layer_stats(l);
    const double n = double(ls.hits + ls.misses);
    s.layer_hit_rate[std::size_t(l)] = n > 0 ? double(ls.hits) / n : 0.0;
  }
  std::lock_guard lock(published_mu_);
  published_ = std::move(s);
}

bool ExpertSlots::pin(std::span<const std::byte> bytes) {
  if (bytes.empty()) return true;
  void* p = const_cast<std::byte*>(bytes.data());
  // The mapping is read-only (and shared: pinning never copies its pages), so it is registered
  // read-only; drivers without that flag get a plain registration, which may refuse it.
  for (unsigned flags : {unsigned(cudaHostRegisterReadOnly), unsigned(cudaHostRegisterDefault)}) {
    if (cudaHostRegister(p, bytes.size(), flags) == cudaSuccess) {
      pinned_.push_back(p);
      return true;
    }
    cudaGetLastError();
  }
  return false;
}

std::span<std::byte> ExpertSlots::pinned_buffer(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0 || cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  std::memset(p, 0, bytes);
  pinned_buffers_.push_back(p);
  return {static_cast<std::byte*>(p), bytes};
}

int ExpertSlots::layer_of(const MoeWeights& w) {
  auto [it, added] = layers_.try_emplace(&w, int(layers_.size()));
  if (added) {
    by_id_.push_back(&w);
    const bool host_biases = w.host_gate_bias || w.host_up_bias || w.host_down_bias;
    on_host_.push_back(host_biases ? std::make_unique<const MoeWeights>(w.on_host()) : nullptr);
  }
  return it->second;
}

std::string ExpertSlots::check(const MoeWeights& w) const {
  if (layers_.size() > std::size_t(o_.layers) || w.experts.size() != std::size_t(o_.experts))
    return "internal error: an offloaded MoE layer the plan did not count";
  const SwiGluMatrices& f = w.experts.front();
  for (const SwiGluMatrices& e : w.experts) {
    for (const Matrix* m : {&e.gate, &e.up, &e.down}) {
      // What the slot kernels read: bf16 rows of whole 16-byte vectors, or rows of GGUF blocks.
      const bool bf16 = m->dtype == DType::kBF16 && m->row_bytes % 16 == 0;
      if (!bf16 && !(is_block_dtype(m->dtype) && m->cols % 32 == 0))
        return std::string("experts kept in host RAM must be bf16 (16-byte rows) or a GGUF block type, not ") +
               dtype_name(m->dtype);
    }
    if (e.up.dtype != e.gate.dtype)
      return std::string("experts kept in host RAM need gate and up in one type (this file has gate ") +
             dtype_name(e.gate.dtype) + ", up " + dtype_name(e.up.dtype) + ")";
    if (e.gate.row_bytes != f.gate.row_bytes || e.up.row_bytes != f.gate.row_bytes ||
        e.down.row_bytes != f.down.row_bytes || e.bytes() != f.bytes() || e.gate.dtype != f.gate.dtype ||
        e.down.dtype != f.down.dtype)
      return "experts kept in host RAM must all have one shape and type in a layer";
  }
  if (aligned(f.gate.bytes()) + aligned(f.up.bytes()) + aligned(f.down.bytes()) > o_.slot_bytes)
    return "internal error: an expert larger than its slot";
  return "";
}

bool ExpertSlots::grow_to(int want) {
  while (o_.slots < want) {
    const int n = std::min(slots_per_chunk_, want - o_.slots);
    void* p = nullptr;
    if (cudaMalloc(&p, std::size_t(n) * o_.slot_bytes) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    chunks_.push_back({static_cast<std::byte*>(p), n});
    for (int i = 0; i < n; ++i) slot_base_.push_back(chunks_.back().base + std::size_t(i) * o_.slot_bytes);
    o_.slots += n;
  }
  return true;
}

Result<int> ExpertSlots::resize(int slots, int floor_per_layer) {
  if (slots < min_slots(o_.top_k))
    return invalid_argument("the expert cache needs at least " + std::to_string(min_slots(o_.top_k)) + " slots");
  floor_asked_ = floor_per_layer;
  if (slots == o_.slots && !lent_slots_) {
    o_.floor_per_layer = floor_for(slots, o_.top_k, o_.layers, floor_per_layer);
    cache_.set_floor_per_layer(o_.floor_per_layer);
    return o_.slots;
  }
  // Nothing may be reading or writing a slot: the last pass has synchronised its compute; its
  // copies and its CPU share are waited for here.
  cpu_.drain();
  if (cudaError_t err = cudaStreamSynchronize(copy_); err != cudaSuccess) {
    cudaGetLastError();
    return internal_error(error_text("expert copies before a resize", err));
  }
  settle();
  // Lent slots go first: the budget counts only the memory the cache owns.
  if (lent_slots_) drop_chunks_above(o_.slots - lent_slots_);
  if (slots < o_.slots) {
    drop_chunks_above(slots);
  } else if (slots > o_.slots) {
    grow_to(slots);  // as far as the GPU allows
  }
  resized(floor_per_layer);
  return o_.slots;
}

void ExpertSlots::drop_chunks_above(int slots) {
  int keep = o_.slots;
  while (!chunks_.empty() && keep - chunks_.back().slots >= slots) {
    keep -= chunks_.back().slots;
    if (chunks_.back().owned) {
      cudaFree(chunks_.back().base);
    } else {
      lent_slots_ = 0;
    }
    chunks_.pop_back();
  }
  if (keep < o_.slots) {
    slot_base_.resize(std::size_t(keep));
    o_.slots = keep;
  }
}

void ExpertSlots::resized(int floor_per_layer) {
  // The transient slots (at the end) take their share of the new size, as at creation: a cache
  // shrunk under a fixed 128 would keep almost nothing. What they held was one step's, and is done.
  // The experts in the freed or now transient slots are gone.
  cache_.resize(o_.slots - transient_for(o_.slots, o_.top_k));
  o_.floor_per_layer = floor_for(o_.slots, o_.top_k, o_.layers, floor_per_layer);
  cache_.set_floor_per_layer(o_.floor_per_layer);
  stats_.slots = o_.slots;
  publish();
}

int ExpertSlots::lend(std::span<std::byte> memory) {
  if (lent_slots_ || memory.empty()) return 0;
  const std::size_t skip = std::size_t(slot_start(memory.data()) - memory.data());
  if (memory.size() <= skip) return 0;
  const int n = int((memory.size() - skip) / o_.slot_bytes);
  if (n < 1) return 0;
  if (cudaStreamSynchronize(copy_) != cudaSuccess) {  // the transient slots move: no copy may be landing
    cudaGetLastError();
    return 0;
  }
  settle();
  chunks_.push_back({memory.data() + skip, n, false});
  for (int i = 0; i < n; ++i) slot_base_.push_back(chunks_.back().base + std::size_t(i) * o_.slot_bytes);
  o_.slots += n;
  lent_slots_ = n;
  resized(floor_asked_);
  return n;
}

void ExpertSlots::recall() {
  if (!lent_slots_) return;
  cpu_.drain();
  if (cudaStreamSynchronize(copy_) != cudaSuccess) cudaGetLastError();
  settle();
  drop_chunks_above(o_.slots - lent_slots_);
  resized(floor_asked_);
}

namespace {

// Where a slot holds w's gate, up and down: each matrix on a 256-byte boundary.
std::array<std::size_t, 3> offsets(const MoeWeights& w) {
  const SwiGluMatrices& f = w.experts.front();
  const std::size_t up = aligned(f.gate.bytes());
  return {0, up, up + aligned(f.up.bytes())};
}

ExpertPtrs layout(std::byte* base, const MoeWeights& w) {
  const std::array<std::size_t, 3> at = offsets(w);
  return {base, base + at[1], base + at[2]};
}

}  // namespace

std::byte* ExpertSlots::slot_start(std::byte* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  return p + ((at + kSlotAlign - 1) / kSlotAlign * kSlotAlign - at);
}

StagedExpert ExpertSlots::staged_shape(const MoeWeights& w) const {
  const SwiGluMatrices& f = w.experts.front();
  const std::array<std::size_t, 3> at = offsets(w);
  StagedExpert shape;
  const std::size_t bytes[3] = {f.gate.bytes(), f.up.bytes(), f.down.bytes()};
  for (int m = 0; m < 3; ++m) {
    shape.bytes[m] = bytes[m];
    shape.offset[m] = at[std::size_t(m)];
  }
  shape.slot_bytes = o_.slot_bytes;
  return shape;
}

ExpertPtrs ExpertSlots::slot(int s, const MoeWeights& w) const { return layout(slot_base(s), w); }
ExpertPtrs ExpertSlots::zero(const MoeWeights& w) const { return layout(zero_, w); }

void ExpertSlots::begin_round() {
  if (rounds_ >= 2) cudaStreamWaitEvent(copy_, round_done_[(rounds_ - 2) % 3], 0);
  cache_.begin_step();
}

void ExpertSlots::copy_after_all(cudaStream_t compute) {
  cudaEventRecord(all_done_, compute);
  cudaStreamWaitEvent(copy_, all_done_, 0);
  cache_.unprotect_earlier_steps();
}

void ExpertSlots::end_round(cudaStream_t compute) {
  cudaEventRecord(round_done_[rounds_ % 3], compute);
  ++rounds_;
}

void ExpertSlots::open_group() {
  if (group_.open) return;
  settle();  // the previous group's time, before its events are reused
  group_ = {group_.begin, group_.end, 0, 0, false, true, false};
  cudaEventRecord(group_.begin, copy_);
}

void ExpertSlots::count_fetch(const MoeWeights& w, int e) {
  const std::size_t bytes = w.experts[std::size_t(e)].bytes();
  group_.bytes += bytes;
  ++group_.experts;
  ++stats_.fetched;
  ++stats_.layer_fetched[std::size_t(layer_of(w))];
  stats_.fetched_bytes += bytes;
}

void ExpertSlots::fetch(const MoeWeights& w, int e, int s) {
  open_group();
  copy_expert_async(w.experts[std::size_t(e)], slot(s, w), copy_);
  count_fetch(w, e);
}

namespace {
// Strided runs of copies, on unless FT_CUDA_COPY_RUNS=0 (per-expert copies: the comparison). Read at
// every call (a round's worth of copies), so that a test can switch it.
bool copy_runs_enabled() {
  const char* env = std::getenv("FT_CUDA_COPY_RUNS");
  return !(env && std::strcmp(env, "0") == 0);
}
}  // namespace

void ExpertSlots::fetch_many(const MoeWeights& w, std::span<const std::pair<int, int>> expert_slots) {
  if (!copy_runs_enabled() || expert_slots.size() < 2) {
    for (const auto& [e, s] : expert_slots) fetch(w, e, s);
    return;
  }
  std::vector<ExpertCopy> copies;
  copies.reserve(expert_slots.size());
  for (const auto& [e, s] : expert_slots) {
    const SwiGluMatrices& m = w.experts[std::size_t(e)];
    const ExpertPtrs to = slot(s, w);
    copies.push_back(
        {{m.gate.data, m.up.data, m.down.data},
         {m.gate.bytes(), m.up.bytes(), m.down.bytes()},
         {const_cast<std::byte*>(to.gate), const_cast<std::byte*>(to.up), const_cast<std::byte*>(to.down)}});
  }
  for (const ExpertCopyRun& r : expert_copy_runs(copies)) {
    if (r.count == 1) {
      const auto& [e, s] = expert_slots[r.first];
      fetch(w, e, s);
      continue;
    }
    // Each matrix of the run at once: its rows are the run's experts, one pitch apart in the slots.
    open_group();
    const ExpertCopy& head = copies[r.first];
    bool issued = true;
    for (int m = 0; m < 3 && issued; ++m)
      issued = cudaMemcpy2DAsync(head.dst[m], r.dst_pitch, head.src[m], head.bytes[m], head.bytes[m], r.count,
                                 cudaMemcpyHostToDevice, copy_) == cudaSuccess;
    if (!issued) cudaGetLastError();  // a pitch the driver refuses: the run's experts one by one
    for (std::size_t i = r.first; i < r.first + r.count; ++i) {
      const auto& [e, s] = expert_slots[i];
      if (!issued) copy_expert_async(w.experts[std::size_t(e)], slot(s, w), copy_);
      count_fetch(w, e);
      stats_.fetched_in_runs += issued ? 1 : 0;
    }
  }
}

bool ExpertSlots::prefetch_on(int choices) const {
  if (in_place())
    return prefetch_in_place_ && split_by_layer_ && transient_half() >= 1 && choices <= kMaxInPlaceChoices;
  return prefetch_ && o_.policy.kind != MoePolicy::Kind::kCpu && transient_half() >= 2 * choices;
}

void ExpertSlots::stage_ahead_in_place(const MoeWeights& next, int next_layer, const int32_t* predicted_dev, int n,
                                       std::uint64_t pass, cudaStream_t main) {
  const int most = copies_ahead_cap(std::min(kMaxAhead, transient_half()));
  if (most <= 0 || !ahead_stream_) return;
  const int p = next_layer % 2;
  const std::size_t E = std::size_t(o_.experts);
  cudaEventRecord(ahead_fork_, main);
  cudaStreamWaitEvent(ahead_stream_, ahead_fork_, 0);
  stage_ahead(in_place_table(next_layer), in_place_from_host(next_layer), int(E), predicted_dev, n, most,
              staged_shape(next), ahead_slots_dev_ + p * kMaxAhead, ahead_table_dev_ + std::size_t(p) * 3 * E,
              ahead_from_host_dev_ + std::size_t(p) * E, ahead_stream_);
  cudaEventRecord(ahead_join_[p], ahead_stream_);
  staged_ahead_ = {next_layer, pass};
  ++stats_.staged_ahead_layers;
}

void ExpertSlots::take_staged_ahead(int layer, std::uint64_t pass, cudaStream_t main, const std::byte* const*& table,
                                    const std::uint8_t*& from_host) {
  if (staged_ahead_.layer != layer || staged_ahead_.pass != pass) return;
  const int p = layer % 2;
  const std::size_t E = std::size_t(o_.experts);
  cudaStreamWaitEvent(main, ahead_join_[p], 0);
  table = ahead_table_dev_ + std::size_t(p) * 3 * E;
  from_host = ahead_from_host_dev_ + std::size_t(p) * E;
  staged_ahead_.layer = -1;
}

int ExpertSlots::ahead_of(int layer, std::uint64_t pass) const {
  return ahead_.layer == layer && ahead_.pass == pass ? int(ahead_.experts.size()) : 0;
}

int ExpertSlots::decode_transient_slot(int layer, int i, int choices, std::uint64_t pass) const {
  if (!prefetch_on(choices)) return transient_slot(i);
  return transient_slot((layer % 2) * transient_half() + ahead_of(layer, pass) + i);
}

int ExpertSlots::decode_transient_room(int layer, int choices, std::uint64_t pass) const {
  if (!prefetch_on(choices)) return transient_slots();
  return std::max(0, transient_half() - ahead_of(layer, pass));
}

void ExpertSlots::prefetch(const MoeWeights& next, int next_layer, std::span<const int32_t> predicted,
                           std::uint64_t pass, int choices) {
  ahead_ = {next_layer, pass, {}, {}};
  // Room for the next layer's own fetches stays: its choices, all of them missing.
  const int room = copies_ahead_cap(transient_half() - choices);
  const int base = (next_layer % 2) * transient_half();
  for (int32_t e : predicted) {
    if (int(ahead_.experts.size()) >= room) break;
    if (e < 0 || std::size_t(e) >= next.experts.size() || cache_.find(next_layer, e)) continue;
    if (std::any_of(ahead_.experts.begin(), ahead_.experts.end(), [&](const auto& p) { return p.first == e; }))
      continue;
    const std::size_t i = ahead_.experts.size();
    if (ahead_done_.size() <= i) {
      cudaEvent_t ev = nullptr;
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        break;  // no event, no copy ahead: the layer fetches it as a miss
      }
      ahead_done_.push_back(ev);
    }
    const int s = transient_slot(base + int(i));
    copy_expert_async(next.experts[std::size_t(e)], slot(s, next), copy_);
    cudaEventRecord(ahead_done_[i], copy_);
    ahead_.experts.push_back({int(e), s});
    ahead_in_flight_ = true;
    const std::size_t bytes = next.experts[std::size_t(e)].bytes();
    ++stats_.prefetched;
    stats_.prefetched_bytes += bytes;
  }
  ahead_.used.assign(ahead_.experts.size(), false);
}

int ExpertSlots::prefetched(int layer, int expert, std::uint64_t pass) const {
  if (ahead_.layer != layer || ahead_.pass != pass) return -1;
  for (const auto& [e, s] : ahead_.experts)
    if (e == expert) return s;
  return -1;
}

void ExpertSlots::used_prefetch(int layer, int expert) {
  if (ahead_.layer != layer) return;
  for (std::size_t i = 0; i < ahead_.experts.size(); ++i)
    if (ahead_.experts[i].first == expert && !ahead_.used[i]) {
      ahead_.used[i] = true;
      ++stats_.prefetch_used;
    }
}

void ExpertSlots::wait_prefetched(int layer, cudaStream_t compute) {
  if (ahead_.layer != layer) return;
  // The copies cross in order: the last chosen one's event covers the others.
  for (std::size_t i = ahead_.experts.size(); i-- > 0;)
    if (ahead_.used[i]) {
      cudaStreamWaitEvent(compute, ahead_done_[i], 0);
      break;
    }
  ahead_.layer = -1;
}

void ExpertSlots::fetched_into(cudaStream_t compute, bool concurrent_cpu) {
  if (!group_.open) return;
  cudaEventRecord(group_.end, copy_);
  cudaStreamWaitEvent(compute, group_.end, 0);
  group_.open = false;
  group_.pending = true;
  group_.concurrent = concurrent_cpu;
}

void ExpertSlots::settle() {
  if (!group_.pending || cudaEventQuery(group_.end) != cudaSuccess) return;
  float ms = 0;
  if (cudaEventElapsedTime(&ms, group_.begin, group_.end) == cudaSuccess) {
    stats_.fetch_seconds += ms / 1e3;
    model_.observe_fetch(group_.bytes, group_.experts, ms / 1e3, group_.concurrent);
  }
  cudaGetLastError();
  group_.pending = false;
}

std::string ExpertSlots::know_in_place(const MoeWeights& w, int layer) {
  if (in_place_.knows(layer)) return "";
  const auto device_ptr = [](const std::byte* host, const std::byte** dev) -> std::string {
    void* d = nullptr;
    if (cudaError_t err = cudaHostGetDevicePointer(&d, const_cast<std::byte*>(host), 0); err != cudaSuccess) {
      cudaGetLastError();
      return "policy direct reads experts in place, and this one is not in pinned host memory (" +
             error_text("cudaHostGetDevicePointer", err) + ")";
    }
    *dev = static_cast<const std::byte*>(d);
    return "";
  };
  for (std::size_t e = 0; e < w.experts.size(); ++e) {
    const SwiGluMatrices& m = w.experts[e];
    const Matrix* mats[3] = {&m.gate, &m.up, &m.down};
    const std::byte* at[3] = {};
    bool fit = true;
    for (int i = 0; i < 3; ++i) {
      if (std::string why = device_ptr(mats[i]->data, &at[i]); !why.empty()) return why;
      // The kernels pick their row loads by the slot's alignment (256 bytes): rows read in place
      // must allow the same.
      const Matrix& x = *mats[i];
      fit = fit &&
            units_fit(x.dtype, at[i], x.row_bytes, int(x.cols)) ==
                units_fit(x.dtype, nullptr, x.row_bytes, int(x.cols)) &&
            reinterpret_cast<std::uintptr_t>(at[i]) % 16 == 0;
    }
    if (!fit) {
      // Rows the checkpoint stores off the kernels' alignment: an aligned pinned copy is read instead.
      const std::span<std::byte> copy = pinned_buffer(o_.slot_bytes);
      if (copy.empty()) return "policy direct could not copy an unaligned expert into pinned host memory";
      const ExpertPtrs p = layout(copy.data(), w);
      const std::byte* dst[3] = {p.gate, p.up, p.down};
      for (int i = 0; i < 3; ++i) {
        std::memcpy(const_cast<std::byte*>(dst[i]), mats[i]->data, mats[i]->bytes());
        if (std::string why = device_ptr(dst[i], &at[i]); !why.empty()) return why;
      }
    }
    in_place_.set_host(layer, int(e), {at[0], at[1], at[2]});
  }
  // The layer's exchange with the CPU: inputs and outputs for decode's most tokens, the flags on
  // cache lines of their own.
  const std::size_t H = std::size_t(w.hidden), choices = kMaxInPlaceChoices;
  const std::size_t floats = 2 * 16 * H, bytes = floats * 4 + 2 * choices * 4 + 256;
  void* block = nullptr;
  if (cudaError_t err = cudaHostAlloc(&block, bytes, cudaHostAllocMapped); err != cudaSuccess) {
    cudaGetLastError();
    return error_text("the CPU share's host memory", err);
  }
  std::memset(block, 0, bytes);
  io_blocks_.push_back(block);
  auto* b = static_cast<std::byte*>(block);
  InPlaceIo& io = io_[std::size_t(layer)];
  io.in = reinterpret_cast<unsigned*>(b);
  io.out = reinterpret_cast<unsigned*>(b + 128);
  io.x = reinterpret_cast<float*>(b + 256);
  io.y = io.x + 16 * H;
  io.chosen = reinterpret_cast<int32_t*>(io.y + 16 * H);
  io.weights = reinterpret_cast<float*>(io.chosen + choices);
  return "";
}

void ExpertSlots::begin_in_place_pass(cudaStream_t s) {
  if (!in_place()) return;
  if (ahead_in_flight_) {
    // Copies ahead that a host-synced pass queued and no layer waited for (none of them chosen) may
    // still be landing in the transient slots the in-place copies ahead use.
    if (cudaStreamSynchronize(copy_) != cudaSuccess) cudaGetLastError();
    ahead_in_flight_ = false;
  }
  *step_host_ = ++step_;
  const float share = cpu_share() ? float(share_now()) : 0.f;
  std::memcpy(step_host_ + 1, &share, sizeof share);
  pass_began_ = std::chrono::steady_clock::now();
  cudaMemcpyAsync(step_dev_, step_host_, 2 * sizeof(unsigned), cudaMemcpyHostToDevice, s);
  prepare_in_place(s);
}

void ExpertSlots::queue_cpu_share(int layer, int T, int K) {
  {
    std::lock_guard lock(share_.mu);
    share_.layers.push_back({layer, T, K});
    if (!share_.running) {
      share_.running = true;
      share_.ended = false;
      share_.abort = false;
      cpu_.submit([this, step = step_] { run_cpu_share(step); });
    }
  }
  share_.cv.notify_one();
}

void ExpertSlots::end_cpu_share() {
  {
    std::lock_guard lock(share_.mu);
    if (!share_.running) return;
    share_.ended = true;
  }
  // The GPU is done with the pass: a layer it never published (a failed pass) is not coming.
  share_.abort = true;
  share_.cv.notify_one();
  cpu_.drain();
}

void ExpertSlots::run_cpu_share(unsigned step) {
  const auto reached = [step](const unsigned* flag) {
    return int(std::atomic_ref<const unsigned>(*flag).load(std::memory_order_acquire) - step) >= 0;
  };
  std::vector<int32_t> mine;
  for (;;) {
    std::array<int, 3> item{};
    {
      std::unique_lock lock(share_.mu);
      share_.cv.wait(lock, [this] { return !share_.layers.empty() || share_.ended; });
      if (share_.layers.empty()) {
        share_.running = false;
        return;
      }
      item = share_.layers.front();
      share_.layers.pop_front();
    }
    const auto [layer, T, K] = item;
    const InPlaceIo& io = io_[std::size_t(layer)];
    const auto waited = std::chrono::steady_clock::now();
    if (cpu_warm_horizon().count() > 0 && !reached(io.in)) cpu_.warm(cpu_warm_horizon());
    while (!reached(io.in) && !share_.abort) _mm_pause();
    if (!reached(io.in)) {
      // The pass ended without the GPU publishing this layer: its output lacks the CPU's experts.
      cpu_failed("internal error: a layer's CPU share never received its input from the GPU");
      std::atomic_ref<unsigned>(*io.out).store(step, std::memory_order_release);
      continue;
    }
    const MoeWeights& w = for_cpu(layer);
    const auto t0 = std::chrono::steady_clock::now();
    stats_.cpu_wait_seconds += std::chrono::duration<double>(t0 - waited).count();
    mine.assign(std::size_t(T * K), -1);
    std::size_t experts = 0;
    for (int i = 0; i < T * K; ++i) {
      const int32_t e = io.chosen[i];
      // (split on the device, the GPU's choices arrive as -1)
      if (e < 0 || e >= o_.experts || (!split_by_layer_ && !in_place_.on_cpu(layer, e))) continue;
      mine[std::size_t(i)] = e;
      ++experts;  // a batch's tokens sharing an expert count it once each: the bytes read again from cache
    }
    if (experts > 0) {
      try {
        cpu_.run(w, io.x, std::size_t(T), std::size_t(K), mine.data(), io.weights, io.y, &stats_.cpu_phases);
      } catch (const std::exception& e) {
        cpu_failed(std::string("the CPU experts failed: ") + e.what());
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      stats_.cpu_computed += experts;
      stats_.layer_cpu_computed[std::size_t(layer)] += experts;
      stats_.cpu_bytes += experts * expert_bytes(w);
      stats_.cpu_seconds += secs;
      const std::size_t n = std::min<std::size_t>(experts, 32);
      ++stats_.cpu_layers_by_experts[n];
      stats_.cpu_seconds_by_experts[n] += secs;
    } else {
      std::memset(io.y, 0, std::size_t(T) * std::size_t(w.hidden) * sizeof(float));
    }
    std::atomic_ref<unsigned>(*io.out).store(step, std::memory_order_release);
  }
}

void ExpertSlots::prepare_in_place(cudaStream_t s) {
  if (!in_place()) return;
  if (in_place_.copies_pending()) {
    if (cudaEventQuery(landed_) == cudaSuccess) in_place_.landed();
    cudaGetLastError();  // not ready is no error
  }
  in_place_.set_cpu_share(cpu_share() ? share_now() : 0, !split_by_layer_);
  const auto slot_at = [this](int layer, int slot) -> ExpertAddress {
    if (std::size_t(layer) >= by_id_.size()) return {};
    const MoeWeights& w = *by_id_[std::size_t(layer)];
    const ExpertPtrs p = slot < 0 ? zero(w) : this->slot(slot, w);
    return {p.gate, p.up, p.down};
  };
  const std::span<std::uint8_t> from_host(reinterpret_cast<std::uint8_t*>(mirror_ + in_place_.table_size()),
                                          std::size_t(o_.layers) * std::size_t(o_.experts));
  if (in_place_.refresh(cache_, slot_at, {mirror_, in_place_.table_size()}, from_host))
    cudaMemcpyAsync(table_dev_, mirror_, table_bytes_, cudaMemcpyHostToDevice, s);
  if (ahead_slots_dev_) {
    // The copy-ahead slots: the transient slots of each parity (they move when the cache resizes).
    std::vector<std::byte*> starts(2 * kMaxAhead, nullptr);
    for (int p = 0; p < 2; ++p)
      for (int i = 0; i < kMaxAhead && i < transient_half(); ++i)
        starts[std::size_t(p * kMaxAhead + i)] = slot_base(transient_slot(p * transient_half() + i));
    if (starts != ahead_slots_host_) {
      ahead_slots_host_ = starts;
      cudaMemcpy(ahead_slots_dev_, starts.data(), starts.size() * sizeof(std::byte*), cudaMemcpyHostToDevice);
    }
  }
}

void ExpertSlots::after_in_place_pass() {
  const auto first = std::find_if(noted_.begin(), noted_.end(), [](int n) { return n >= 0; });
  if (first == noted_.end()) return;  // no decode-sized MoE call read in place
  if (o_.policy.auto_share) {
    // The pass's wall time, sync included: what the share should make short. Its choices (tokens x
    // top-k) tell passes of one shape from another.
    tuner_.observe(*first, std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_began_).count());
  }
  cache_.begin_step();
  // Replacements a step may start (each a whole expert over PCIe while the next step reads its
  // own misses over the same link); filling free slots is not limited.
  static const int kReplacements = [] {
    const char* v = std::getenv("FT_IN_PLACE_REPLACEMENTS");
    return v ? std::max(0, std::atoi(v)) : 8;
  }();
  int replacements = kReplacements;
  bool copied = false;
  for (int l = 0; l < int(noted_.size()); ++l) {
    const int n = std::exchange(noted_[std::size_t(l)], -1);
    if (n < 0 || std::size_t(l) >= by_id_.size()) continue;
    const MoeWeights& w = *by_id_[std::size_t(l)];
    const InPlaceExperts::StepUse use =
        in_place_.after_step(cache_, l, {in_place_choices(l), std::size_t(n)}, replacements);
    // The misses the GPU read (the CPU's are counted by its task): split on the device, the CPU's
    // are the choices the split published to it.
    const InPlaceIo& io = io_[std::size_t(l)];
    const bool split_here = split_by_layer_ && cpu_share() && io.chosen;
    const auto on_cpu = [&](int e) {
      if (!split_here) return in_place_.on_cpu(l, e);
      return std::find(io.chosen, io.chosen + n, e) != io.chosen + n;
    };
    const auto gpu =
        std::uint64_t(std::count_if(use.missed.begin(), use.missed.end(), [&](int e) { return !on_cpu(e); }));
    stats_.read_in_place += gpu;
    stats_.layer_read_in_place[std::size_t(l)] += gpu;
    stats_.read_in_place_bytes += gpu * expert_bytes(w);
    for (const InPlaceExperts::Admission& a : use.admitted) {
      const SwiGluMatrices& m = w.experts[std::size_t(a.expert)];
      copy_expert_async(m, slot(a.slot, w), copy_);
      ++stats_.fetched;
      ++stats_.layer_fetched[std::size_t(l)];
      stats_.fetched_bytes += m.bytes();
      copied = true;
    }
  }
  if (copied) cudaEventRecord(landed_, copy_);
}

void ExpertSlots::order_after_in_place_copies(cudaStream_t s) {
  if (in_place_.copies_pending()) cudaStreamWaitEvent(s, landed_, 0);
}

void ExpertSlots::calibrate(const MoeWeights& w) {
  calibrated_ = true;
  std::string device;
  if (cudaDeviceProp prop{}; cudaGetDeviceProperties(&prop, 0) == cudaSuccess) device = prop.name;
  // The CPU's rate is per byte of the experts' type (blocks take more work a byte than bf16), so
  // the cache is kept per type too.
  const SwiGluMatrices& f = w.experts.front();
  device += std::string(" / ") + dtype_name(f.gate.dtype) + "+" + dtype_name(f.down.dtype) + " experts";
  const int threads = cpu_.threads();
  Result<SplitCosts> c = not_found("");
  if (!o_.costs_cache.empty() && !o_.recalibrate) c = load_offload_costs(o_.costs_cache, device, threads);
  if (!c) {
    c = measure_offload_bandwidth(for_cpu(layer_of(w)), cpu_, 0.05);
    if (c && !o_.costs_cache.empty()) (void)save_offload_costs(o_.costs_cache, *c, device, threads);
  }
  cudaGetLastError();
  if (!c) return;  // the defaults, learned from serving
  SplitCosts costs = model_.costs();
  costs.pcie_gbps = c->pcie_gbps;
  costs.cpu_gbps = c->cpu_gbps;
  costs.pcie_shared_gbps = c->pcie_shared_gbps;
  costs.cpu_shared_gbps = c->cpu_shared_gbps;
  model_.set_costs(costs);
  stats_.calibrated = costs;
}

}  // namespace ft::engine::cuda

// The op seam. The model files compose shared blocks (engine/src/blocks/); the blocks do all their
// arithmetic through a Backend, so where and how an op runs is a choice made at load time, not a
// fork of the model:
//   kReference  the fp32 definitions (ops_*.h, namespace ref): weights converted row by row as
//               they are read, fp32 KV. Tests compare everything else against it.
//   kCpu        the runtime on the CPU: weights read in their stored dtype by AVX-512-BF16 /
//               AVX-512 / AVX2 kernels picked at run time, bf16 KV pages, oneTBB threads.
//   kCuda       the runtime on a GPU (engine/cuda/): weights copied to VRAM in their stored dtype at
//               load, cuBLAS GEMMs and kernels of our own, bf16 KV pages and state in VRAM.
//
// Activations are fp32 row-major [rows, features] in the backend's memory (memory(): host RAM for
// the first two, VRAM for kCuda); pointers passed to an op are from the backend's Scratch or the
// caller's buffers in that memory. Weights are placed at load (place()); per-pass values the host
// computes (token ids, positions, page tables) are host memory from host_scratch().
//
// Determinism: every kCpu kernel computes each output row from that row's inputs alone, in an
// order that depends on neither the number of rows in the call nor the thread count. With one
// kernel family for every call a sequence therefore gets the same bits whether it runs alone or
// batched, in one prefill or restored from a checkpoint plus a suffix (tests hold it to that). That
// is always so without AMX; with AMX it takes BackendOptions::deterministic, because by default
// decode-sized calls run on AVX-512 (fp32 products, faster there) and prefill-sized ones on AMX
// tiles (activations as bf16x2: ~2^-17 relative, near fp32 products, as the GPU's prefill takes
// them; or as bf16 with BackendOptions::cpu_bf16_activations); deterministic, every call runs on AMX.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/expert_kernels.h"
#include "ft/engine/kv_pool.h"
#include "ft/engine/matrix.h"
#include "ft/engine/memory.h"
#include "ft/engine/moe_split.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_deltanet.h"
#include "ft/engine/ops_dsa.h"
#include "ft/engine/ops_hyper.h"
#include "ft/engine/ops_moe.h"
#include "ft/engine/ops_v4_attention.h"
#include "ft/engine/sampling.h"
#include "ft/engine/scratch.h"

namespace ft::engine {

enum class BackendKind { kReference, kCpu, kCuda };
const char* backend_name(BackendKind kind);  // "reference", "cpu", "cuda"
Result<BackendKind> parse_backend(std::string_view name);

// A MoE feed-forward's weights: router -> top-k routed SwiGLU experts, plus an optional shared
// expert, scaled by sigmoid(shared_gate(x)) where it has a gate (Qwen) and added as it is where it
// has none (DeepSeek-V3, GLM-4.5).
struct MoeWeights {
  ref::RouterSpec router_spec;
  Matrix router;  // [num_experts, hidden]
  std::vector<SwiGluMatrices> experts;
  bool has_shared = false;
  bool shared_gated = true;
  SwiGluMatrices shared;
  Matrix shared_gate;  // [1, hidden] when shared_gated
  int64_t hidden = 0;
  // gpt-oss: the router has a bias, and every routed expert biases on its gate, up and down
  // products and the clamped GLU (ref::ExpertGlu). Null / plain SwiGLU elsewhere. Backend memory.
  const float* router_bias = nullptr;  // [num_experts]
  ref::ExpertGlu glu;
  const float* gate_bias = nullptr;  // [num_experts, inter]
  const float* up_bias = nullptr;    // [num_experts, inter]
  const float* down_bias = nullptr;  // [num_experts, hidden]
  // The same expert biases in host memory (the backend's may be in VRAM): what the CPU's share of
  // offloaded experts reads. Null without biases.
  const float* host_gate_bias = nullptr;
  const float* host_up_bias = nullptr;
  const float* host_down_bias = nullptr;
  // This layer as the CPU reads it: the host copies of the biases in place of the backend's.
  MoeWeights on_host() const {
    MoeWeights h = *this;
    if (host_gate_bias) h.gate_bias = host_gate_bias;
    if (host_up_bias) h.up_bias = host_up_bias;
    if (host_down_bias) h.down_bias = host_down_bias;
    return h;
  }
  // The routed experts are plain SwiGLUs: what every fast expert kernel computes.
  bool plain_experts() const { return !glu.clamped && !glu.gelu_tanh && !gate_bias && !up_bias && !down_bias; }
};

// One sequence's rows in a batched attention call and where its KV lives.
struct AttentionSeq {
  std::size_t row0 = 0;                  // first row of this sequence in q / k / v / out
  std::size_t rows = 0;                  // its new tokens, at positions pos0 ..
  int64_t pos0 = 0;                      // tokens already in its KV
  std::byte* const* pages = nullptr;     // page table covering [0, pos0 + rows) (host array)
};

// One sequence's rows in a batched Gated DeltaNet call and its state (updated in place).
struct DeltaNetSeq {
  std::size_t row0 = 0;
  std::size_t rows = 0;
  float* conv = nullptr;       // [conv_dim, K-1], backend memory
  float* recurrent = nullptr;  // [num_v_heads, head_k_dim, head_v_dim], backend memory
};

// One sequence's rows in a batched DeepSeek-V4 compressor call and its state (ref::compress_rows'
// rings, updated in place; backend memory).
struct CompressorSeq {
  std::size_t row0 = 0;
  std::size_t rows = 0;
  int64_t pos0 = 0;  // tokens the compressor has seen
  float* kv = nullptr;
  float* gate = nullptr;
  std::size_t ld = 0;  // floats between ring rows
};

// A DeepSeek-V4 compressor's parameters, fp32 (placed): position_bias [m, row()], the kv_norm weight
// [width], the compress rope's inv_freq [rope_dims / 2].
struct CompressorParams {
  const float* position_bias = nullptr;
  const float* norm_weight = nullptr;
  const float* inv_freq = nullptr;
};

// The small per-layer parameters of a Gated DeltaNet layer, fp32 (placed: see Backend::place).
struct DeltaNetParams {
  const float* conv1d = nullptr;   // [conv_dim, K]
  const float* dt_bias = nullptr;  // [num_v_heads]
  const float* A_log = nullptr;    // [num_v_heads]
  const float* norm = nullptr;     // [head_v_dim]
};

// The experts every MoE call chose, in call order (one entry per MoE layer per forward pass):
// chosen[t * top_k + i] for the call's T tokens. Fidelity tests compare two backends' routing with
// it; expert-usage statistics read it too.
struct RoutingTrace {
  std::vector<std::vector<int32_t>> calls;
  std::size_t top_k = 0;
  // With forced routing (Backend::set_forced_routing): what each call would have chosen itself on
  // the same input. Where it differs from `calls`, rounding flipped a near-tie there (a root
  // flip); differences further on that only follow from one are not counted twice.
  std::vector<std::vector<int32_t>> unforced;
  // DeepSeek sparse attention's choices alike: the key positions each indexer call selected
  // (Backend::index_select), selections[c][t * selection_k + i]; with forced routing, what each
  // call would have selected itself.
  std::vector<std::vector<int32_t>> selections;
  std::size_t selection_k = 0;
  std::vector<std::vector<int32_t>> unforced_selections;
};

// Where a forward pass spends its time, by kind of op (filled while a profile is set): what
// `bench decode|prefill` prints to show which op to work on next.
struct OpProfile {
  // kMoe is the whole MoE op; kMoeRoute / kMoeExperts / kMoeCombine are its phases (router and
  // top-k; the routed experts' products; adding them up and the shared expert). kMoeGemms is the
  // library GEMMs within kMoeExperts (a GPU backend's batched expert products), the rest of that
  // phase being grouping, gathers and the GLU.
  enum Kind {
    kLinear,
    kMoe,
    kAttention,
    kKvWrite,
    kDeltaNet,
    kNorm,
    kRope,
    kElementwise,
    kEmbedding,
    kMoeRoute,
    kMoeExperts,
    kMoeCombine,
    kMoeGemms,
    kCount
  };
  static const char* name(Kind k);
  double seconds[kCount] = {};
  std::uint64_t calls[kCount] = {};
  // false: whole passes only. A GPU backend times an op by synchronising at its end, which slows
  // the pass; without op times it adds nothing but two clock reads a pass.
  bool time_ops = true;
  // With time_ops, a GPU backend records events on its stream around each op instead of
  // synchronising, and adds up their GPU times when the pass ends: each op's own kernel time in a
  // pass that runs as it would unprofiled (but never as a recorded graph). What the ops' sum
  // leaves of the pass is the GPU waiting for the host.
  bool gpu_events = false;
  double issue_seconds = 0;  // the host issuing the passes' work (on a GPU it runs ahead of it)
  double pass_seconds = 0;   // the passes to their end, device work included
  std::uint64_t passes = 0;
  std::uint64_t replayed_passes = 0;  // of them, replays of a recorded pass (a CUDA graph)
  // A GPU backend's library GEMM calls (cuBLAS): how many, the host time spent inside the calls
  // (planning and enqueueing, not the GPU's work), and how many had a shape the backend had not
  // called before: a call's host cost can depend on whether its shape is new.
  std::uint64_t gemm_calls = 0;
  double gemm_host_seconds = 0;
  std::uint64_t gemm_new_shapes = 0;
  // A GPU backend's waits inside a pass for results the host needs to go on (a MoE layer's expert
  // counts, say): how many and how long (part of issue_seconds; the GPU's queue is empty after each).
  std::uint64_t syncs = 0;
  double sync_seconds = 0;
};

// Routed experts kept in host memory with a cache of `slots` expert-sized slots on the device
// (the placement plan decides; see expert_cache.h and moe_split.h).
struct ExpertOffloadOptions {
  int slots = 0;
  std::size_t slot_bytes = 0;  // one expert: gate, up and down, each 256-byte aligned
  int layers = 0;              // MoE layers
  int experts = 0;             // routed experts per layer
  int floor_per_layer = 0;     // slots a layer keeps against other layers' misses
  int top_k = 0;               // choices a token makes
  MoePolicy policy;
  int cpu_threads = 0;  // the CPU experts' arena; 0: every core
  // The split's starting costs per machine (offload_bandwidth.h): read from this file when it was
  // measured for this GPU and thread count, else (or when `recalibrate`) measured on the first
  // offloaded layer and written there. Empty: measured, not cached.
  std::string costs_cache;
  bool recalibrate = false;
  // The GPU workspace past what decode steps take is lent to the cache between prefills (more
  // slots while only decode runs). Off when the slot count was given (--expert-slots).
  bool lend_workspace = true;
};

// Where CPU MoE calls' time went (an offloaded decode's CPU share): the wall time before the
// experts' two parallel loops (grouping, x quantised), in the gate/up loop, from there to the end of
// the down loop (h quantised, down), and after it (the weighted sum); and the threads' time inside
// the loops' items: busy / ((gate_up + down) x threads) is the part of the loops the threads spent
// computing rather than waiting for work or for each other.
struct CpuMoePhases {
  std::uint64_t calls = 0;
  double prepare = 0, gate_up = 0, down = 0, finish = 0, busy = 0;  // seconds (busy: thread-seconds)
  int threads = 0;
};

// What an offloaded model's experts did since load: the cache, both miss paths and the rates the
// split planner now assumes.
struct ExpertOffloadStats {
  int slots = 0, resident = 0;
  int min_slots = 0;  // the fewest the cache can shrink to (a token's choices and two more)
  std::string policy;
  std::uint64_t hits = 0, misses = 0;           // routed-expert uses found in / missing from the cache
  std::uint64_t fetched = 0, cpu_computed = 0;  // misses fetched over PCIe / computed on the CPU
  std::uint64_t fetched_bytes = 0, cpu_bytes = 0;
  std::uint64_t fetched_in_runs = 0;  // of `fetched`: experts that crossed in strided runs (expert_copy_runs.h)
  std::uint64_t read_in_place = 0, read_in_place_bytes = 0;  // misses the GPU read from host memory (direct)
  // Decode: the next layer's experts copied ahead (its router on this layer's input), and how many
  // of them it then chose; the cache's hits and misses count them as misses.
  std::uint64_t prefetched = 0, prefetched_bytes = 0, prefetch_used = 0;
  // In place (direct), where the copies ahead are the GPU's own: the layers that issued them (a
  // recorded step counts once, when recorded).
  std::uint64_t staged_ahead_layers = 0;
  double fetch_seconds = 0, cpu_seconds = 0;  // time the copies / the CPU share took
  double cpu_share = 0;                       // direct[:Q|:auto]: the share of the uncached experts on the CPU now
  SplitCosts costs;                           // now (learned while serving)
  SplitCosts calibrated;                      // measured at the first offloaded layer
  std::vector<double> layer_hit_rate;         // per MoE layer
  std::vector<std::uint64_t> layer_fetched, layer_cpu_computed;  // per MoE layer: how its misses were served
  std::vector<std::uint64_t> layer_read_in_place;
  // direct:Q: the CPU share's layers by how many experts each computed (index n <= 32) and their
  // compute time, which tells a fixed cost a layer from a rate; and the time the share waited for the
  // GPU's input between layers.
  std::vector<std::uint64_t> cpu_layers_by_experts;
  std::vector<double> cpu_seconds_by_experts;
  double cpu_wait_seconds = 0;
  CpuMoePhases cpu_phases;  // the share's calls, phase by phase
  // GPU memory the passes' temporaries took beyond the reserved workspace (outside the budget;
  // 0 while every pass fits, as passes of the plan's pass_rows should).
  std::uint64_t workspace_overflow_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  // Where it computes, for the placement plan: "cpu (host RAM)", "cuda:0 NVIDIA H200 (sm_90)".
  virtual std::string device_name() const { return "cpu (host RAM)"; }
  virtual KvDType kv_dtype() const = 0;
  virtual int threads() const = 0;
  // Runs `fn` (a forward pass) on this backend's threads; ops are called from inside it. Returns
  // when the pass's work is done (the GPU synchronised): an error the device reported, if any.
  virtual Status execute(const std::function<void()>& fn) = 0;
  // What a pass's work depends on besides the values it uploads (token ids, positions, page tables,
  // state pointers): two passes of one shape issue the same ops with the same sizes, so a backend
  // may record the pass once and replay the recording for the next ones (CUDA graphs), running `fn`
  // for its host side only. kv_tokens: the context the pass's attention is shaped for (at least
  // every sequence's). The decoder gives one for decode steps.
  struct PassShape {
    std::vector<int64_t> key;
    int64_t kv_tokens = 0;
  };
  virtual Status execute(const std::function<void()>& fn, const PassShape& shape) {
    (void)shape;
    return execute(fn);
  }
  // Temporaries in the backend's memory.
  Scratch& scratch() { return scratch_; }
  // Temporaries the host writes and reads (per-pass ids, positions, row lists): host RAM.
  virtual Scratch& host_scratch() { return scratch_; }
  // Where activations, KV pages and linear-attention state live.
  virtual std::shared_ptr<Memory> memory() const { return host_memory(); }

  // ---- Placement (at load) ----
  // Makes a weight readable by this backend's ops: the GPU backend copies its bytes to VRAM and
  // sets m.device; the host backends read it where it is mapped.
  virtual Status place(Matrix& m) {
    (void)m;
    return Status::ok();
  }
  // The same for a small fp32 parameter: a pointer this backend's ops read, valid for the
  // backend's life (the host backends return the vector's own data).
  virtual Result<const float*> place(std::span<const float> v) { return v.data(); }
  // Sets aside `bytes` of the backend's memory for passes' temporaries now, before the KV pool
  // takes what is left (the GPU; host backends grow their scratch as passes need).
  virtual Status reserve_workspace(std::size_t bytes) {
    (void)bytes;
    return Status::ok();
  }
  // Sets the workspace to `bytes` (never during a pass): elastic VRAM shrinks it below what the
  // expert cache and the KV pool can give, and grows it back. Returns the bytes it holds now (at
  // least `bytes`, or what it held before when the device has no room for more);
  // kUnsupported where passes grow their scratch as they need (the host backends).
  virtual Result<std::size_t> resize_workspace(std::size_t bytes) {
    (void)bytes;
    return unsupported("the workspace is fixed on the GPU only");
  }
  // Keeps routed experts in host memory with a device cache (before any is placed): GPU only.
  virtual Status set_expert_offload(const ExpertOffloadOptions& options) {
    (void)options;
    return unsupported("expert offload needs the GPU backend");
  }
  // Host memory experts are read from (a mapped checkpoint file): pinned where the device can, so
  // copies from it run at full PCIe speed. false when it stays pageable (copies still work).
  virtual bool pin_host(std::span<const std::byte> bytes) {
    (void)bytes;
    return false;
  }
  // A routed expert's matrix: placed like any weight, or left where it is mapped when offloaded.
  virtual Status place_expert(Matrix& m) { return place(m); }
  // Host memory for weights made at load rather than mapped (experts transposed from HF's [in, out]
  // layout), owned by the backend for its life: pinned where experts are offloaded, so their copies
  // to the GPU run at PCIe speed as the mapped files' do. Zeroed.
  virtual std::span<std::byte> host_buffer(std::size_t bytes) { return host_buffers_.emplace_back(bytes); }
  virtual std::optional<ExpertOffloadStats> expert_offload_stats() const { return std::nullopt; }
  virtual void set_moe_policy(const MoePolicy& policy) { (void)policy; }
  // Resizes the expert cache to `slots` slots (never during a pass), keeping `floor_per_layer` a
  // layer: shrinking frees memory and the experts in it, growing adds empty slots as far as the
  // device has room. Returns the slots it has now; kUnsupported without expert offload.
  virtual Result<int> resize_expert_cache(int slots, int floor_per_layer) {
    (void)slots;
    (void)floor_per_layer;
    return unsupported("no expert cache: the routed experts are not kept in host RAM");
  }
  // The device's free and total memory as its driver reports them (other processes' use
  // included); nullopt for host memory.
  struct DeviceMemoryInfo {
    std::uint64_t free_bytes = 0, total_bytes = 0;
  };
  virtual std::optional<DeviceMemoryInfo> device_memory() const { return std::nullopt; }
  // Host values one pass needs in backend memory (positions): valid until the pass ends.
  virtual const int64_t* stage(std::span<const int64_t> host) { return host.data(); }

  // Records routing into `trace` (null: stop recording).
  void set_routing_trace(RoutingTrace* trace) { trace_ = trace; }
  // From now on the n-th MoE call takes the experts of forced->calls[n] instead of its own top-k,
  // weighted by its own router, and the n-th indexer call the key positions of
  // forced->selections[n] (null: route freely). Only the reference backend follows it: the
  // fidelity tests run it along a runtime backend's routing, so a near-tie that rounding flipped
  // is compared as the same function, not as a jump. Returns false if this backend cannot.
  virtual bool set_forced_routing(const RoutingTrace* forced) { return forced == nullptr; }
  // Accumulates op times into `profile` (null: stop).
  void set_profile(OpProfile* profile) { profile_ = profile; }

  // ---- Dense ----
  // out[t, :] = table[ids[t], :] (ids: host memory).
  virtual void embedding(const Matrix& table, std::span<const int32_t> ids, float* out) = 0;
  // nn.Linear: y[T, w.rows] = x[T, w.cols] w^T (+ bias). y may not alias x.
  virtual void linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) = 0;
  // Several products of the same input (q, k and v; gate and up): one pass where the backend can
  // (the input prepared once, every matrix's rows in one parallel region), else one linear each.
  struct LinearOut {
    const Matrix* w = nullptr;
    const float* bias = nullptr;
    float* y = nullptr;
  };
  virtual void linears(const float* x, std::size_t T, std::span<const LinearOut> outs) {
    for (const LinearOut& o : outs) linear(x, T, *o.w, o.bias, o.y);
  }
  // RMSNorm over rows of `dim` (ops.h); out may alias x.
  virtual void rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim,
                        float eps, bool zero_centered) = 0;
  // The residual add and the norm after it: hidden += delta, then out = rms_norm(hidden). One pass
  // where the backend can (a decode step has two a layer; each is a few KB: its cost is the launch).
  virtual void add_rms_norm(float* hidden, const float* delta, const float* weight, float* out, std::size_t rows,
                            std::size_t dim, float eps, bool zero_centered) {
    add(hidden, delta, rows * dim);
    rms_norm(hidden, weight, out, rows, dim, eps, zero_centered);
  }
  virtual void silu_mul(const float* gate, const float* up, float* out, std::size_t n) = 0;
  // ref::gelu_tanh_mul, ref::scale and ref::softcap (Gemma's GeGLU, embedding scale and
  // layer_scalar, final logit softcapping).
  virtual void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n) = 0;
  virtual void scale(float* x, std::size_t n, float factor) = 0;
  virtual void softcap(float* x, std::size_t n, float cap) = 0;
  virtual void mul_sigmoid(float* x, const float* gate, std::size_t n) = 0;
  virtual void add(float* y, const float* x, std::size_t n) = 0;
  // dst[i, :] = src[rows[i], :] for rows of `width` floats (rows: host memory).
  virtual void gather_rows(const float* src, std::span<const std::size_t> rows, std::size_t width, float* dst) = 0;
  // ref::copy_columns: dst[r, 0:width] = src[r / repeat, 0:width] with rows dst_ld and src_ld floats
  // apart (src and dst may not overlap).
  virtual void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                            std::size_t rows, std::size_t width) = 0;
  // Copies n floats of backend memory to host memory.
  virtual void to_host(const float* src, std::size_t n, float* dst) = 0;
  // Draws a token for each request from row rows[i] of logits [.., vocab] (Sampler::pick's
  // semantics) into *tokens[i] (host memory; written by the time the pass ends). By default on the
  // host, from the rows copied out; a GPU backend samples on the GPU.
  virtual void sample(const float* logits, std::size_t vocab, std::span<const std::size_t> rows,
                      std::span<const SampleRequest> requests, std::span<int32_t* const> tokens) {
    thread_local std::vector<float> row;
    row.resize(vocab);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      to_host(logits + rows[i] * vocab, vocab, row.data());
      *tokens[i] = Sampler::pick(row, requests[i]);
    }
  }

  // ref::scale_by_top_sigmoid (Llama 4's MoE input) and ref::attention_temperature (its NoPE
  // layers' queries; positions from stage()).
  virtual void scale_by_top_sigmoid(const float* x, const float* logits, std::size_t T, std::size_t width,
                                    std::size_t E, float* out) = 0;
  virtual void attention_temperature(float* x, std::size_t T, std::size_t width, const int64_t* positions,
                                     float floor_scale, float attn_scale) = 0;

  // ---- Attention ----
  // Rotates the first rotary_dim dims of each head of x [T, heads, head_dim]; row t sits at
  // positions[t] (from stage()). inv_freq from ref::rope_inv_freq (placed).
  virtual void rope(float* x, std::size_t T, std::size_t heads, const ref::RopeSpec& spec, const float* inv_freq,
                    const int64_t* positions) = 0;
  // ref::split_gated_query: qg [T, heads, 2*head_dim] -> q [T, heads, head_dim], gate [T, heads*head_dim].
  virtual void split_gated_query(const float* qg, std::size_t T, std::size_t heads, std::size_t head_dim, float* q,
                                 float* gate) = 0;
  // Writes k, v [rows, kv_heads, head_dim] of each sequence into its pages at pos0 ...
  virtual void kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v,
                        std::span<const AttentionSeq> seqs) = 0;
  // What an attention layer does between its projections and attention, for q [T, heads,
  // head_dim], k, v [T, kv_heads, head_dim] (layout's): RMSNorm of q and k when `norm` is given,
  // RoPE on both, then kv_write. q and k are left normed and rotated. One pass where the backend can.
  struct QkNorm {
    const float* q = nullptr;  // [head_dim], or [heads * head_dim] when !per_head (placed)
    const float* k = nullptr;  // [head_dim], or [kv_heads * head_dim] when !per_head
    float eps = 1e-6f;
    bool zero_centered = false;
    // true: each head's head_dim values are one RMSNorm row (Qwen3); false: a token's whole q and
    // whole k are (OLMoE).
    bool per_head = true;
  };
  virtual void attention_inputs(const KvLayout& layout, int64_t layer, float* q, float* k, const float* v,
                                std::size_t T, std::size_t heads, const QkNorm* norm, const ref::RopeSpec& rope,
                                const float* inv_freq, const int64_t* positions, std::span<const AttentionSeq> seqs) {
    const std::size_t D = std::size_t(layout.head_dim_at(layer)), KV = std::size_t(layout.kv_heads_at(layer));
    if (norm && norm->per_head) {
      rms_norm(q, norm->q, q, T * heads, D, norm->eps, norm->zero_centered);
      rms_norm(k, norm->k, k, T * KV, D, norm->eps, norm->zero_centered);
    } else if (norm) {
      rms_norm(q, norm->q, q, T, heads * D, norm->eps, norm->zero_centered);
      rms_norm(k, norm->k, k, T, KV * D, norm->eps, norm->zero_centered);
    }
    this->rope(q, T, heads, rope, inv_freq, positions);
    this->rope(k, T, KV, rope, inv_freq, positions);
    kv_write(layout, layer, k, v, seqs);
  }
  // Causal GQA attention of each sequence's rows of q [T, heads, head_dim] over its KV [0, pos0 +
  // rows) (the new tokens already written), out [T, heads, head_dim]; softmax(q.k * scale), with
  // opt's window and sinks (ops_attention.h).
  virtual void attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                         std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt) = 0;

  // ---- DeepSeek sparse attention (deepseek_v32, glm_moe_dsa) ----
  // Whether this backend has the three ops below (the reference, CPU and CUDA backends do); a model
  // that needs them is refused at load where it has not (their defaults here abort).
  virtual bool has_sparse_attention() const { return false; }
  // nn.LayerNorm over rows of dim with weight and bias (ref::layer_norm); out may alias x.
  virtual void layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows,
                          std::size_t dim, float eps);
  // The lightning indexer of each sequence's rows: q [T, spec.heads, spec.head_dim] (rotated),
  // w [T, spec.heads] (weights_proj's output), against the index keys of every position <= the
  // row's own in K slot spec.kv_slot of layer `layer`; selected [T, spec.top_k] (in this backend's
  // memory, as scratch() gives it) gets each row's chosen positions (ref::top_k_positions, on the
  // host on every backend: its tie rule is torch's CPU one).
  virtual void index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                            const IndexerSpec& spec, std::span<const AttentionSeq> seqs, int32_t* selected);
  // Attention of each sequence's rows of q [T, heads, head_dim] over the positions selected[t *
  // top_k ..] of its KV only (query head h reads kv head h; slots past `heads` hold other things),
  // out [T, heads, head_dim] (ref::sparse_attention_row).
  virtual void sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                                std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k,
                                float* out);

  // ---- Mixture of experts ----
  // out [T, hidden] = moe(x [T, hidden]); out may not alias x. The router reads router_x [T,
  // hidden] (Gemma 4 routes on its own norm of the residual, not the experts' input), or x where
  // it is null.
  virtual void moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) = 0;
  // The routed experts of moe for choices made elsewhere (DeepSeek-V4's hash layers: a table
  // indexed by token id): chosen [T, top_k] (host memory), each weighed by the router's scores as
  // ref::route_weights_for weighs a choice; recorded in the routing trace as moe's own choices are.
  // The shared expert (w.has_shared) is the caller's. out may not alias x.
  virtual void moe_chosen(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen, float* out);
  // ref::expert_glu over n elements (DeepSeek-V4's shared expert clamps as its routed experts do).
  virtual void expert_glu(const ref::ExpertGlu& glu, const float* gate, const float* up, float* out, std::size_t n);

  // ---- DeepSeek-V4 (deepseek_v4) ----
  // Whether this backend has the ops below (the reference, CPU and CUDA backends do); a model that needs
  // them is refused at load where it has not (their defaults here abort).
  virtual bool has_v4_ops() const { return false; }
  // ref::hc_pre, ref::hc_post, ref::hc_head (ops_hyper.h) over T tokens of the streams h [T, N, D];
  // fn, base, scale placed fp32. h_new may be h.
  virtual void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                      const HyperSpec& spec, float* x, float* post, float* comb);
  virtual void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
                       const HyperSpec& spec, float* h_new);
  virtual void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
                       const HyperSpec& spec, float* y);
  // ref::compress_rows for each sequence's rows of kv, gate [T, spec.row()] (raw kv_proj and gate_proj
  // outputs): entries [T, spec.width], a row's entry where its token closes a window, else zeros.
  virtual void v4_compress(const CompressorSpec& spec, const CompressorParams& params, const float* kv,
                           const float* gate, std::span<const CompressorSeq> seqs, float* entries);
  // The CSA indexer's choice (ref::v4_index_select) for each sequence's rows: q [T, spec.heads,
  // spec.head_dim] (roped), w [T, spec.heads]; the index keys are in the K blocks of `layer` from
  // slot spec.kv_slot on, entry e at the position closing it (e * rate + rate - 1), every entry
  // the sequence holds after this pass a candidate. picks [T, spec.top_k] (this backend's memory),
  // recorded as the routing trace's selections.
  virtual void v4_index_select(const KvLayout& layout, int64_t layer, const float* q, const float* w,
                               const IndexerSpec& spec, std::size_t rate, std::span<const AttentionSeq> seqs,
                               int32_t* picks);
  // ref::v4_attention for each sequence's rows of q [T, spec.heads, spec.head_dim]: the window's keys
  // (= values) are the K block of slot 0 of `layer`, the compressed entries its V block at the
  // positions closing them; picks [T, top_k] (CSA) or null. out [T, spec.heads, spec.head_dim].
  virtual void v4_attention(const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                            const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs,
                            const int32_t* picks, std::size_t top_k, float* out);

  // ---- Gated DeltaNet ----
  // ref::deltanet_unfuse: qwen3_next's fused projection outputs into the split layout.
  virtual void deltanet_unfuse(const ref::DeltaNetDims& dims, const float* qkvz, const float* ba, std::size_t T,
                               float* qkv, float* z, float* b, float* a) = 0;
  // The layer between its input projections and out_proj, per sequence: causal conv1d + SiLU of
  // qkv [T, conv_dim] (q | k | v), the gates from a, b [T, num_v_heads], the gated delta rule from
  // each sequence's state (left updated), and the gated RMSNorm with z [T, value_dim]:
  // out [T, value_dim].
  virtual void deltanet(const ref::DeltaNetDims& dims, const DeltaNetParams& params, const float* qkv,
                        const float* z, const float* b, const float* a, std::span<const DeltaNetSeq> seqs,
                        float* out) = 0;

 protected:
  void record_routing(const int32_t* chosen, std::size_t T, std::size_t top_k) {
    if (!trace_) return;
    trace_->top_k = top_k;
    trace_->calls.emplace_back(chosen, chosen + T * top_k);
  }
  void record_selection(const int32_t* selected, std::size_t T, std::size_t top_k) {
    if (!trace_) return;
    trace_->selection_k = top_k;
    trace_->selections.emplace_back(selected, selected + T * top_k);
  }
  // Times one op into the profile, when one is set.
 public:
  class OpTimer {
   public:
    OpTimer(OpProfile* p, OpProfile::Kind k) : p_(p), k_(k) {
      if (p_) t0_ = std::chrono::steady_clock::now();
    }
    ~OpTimer() {
      if (!p_) return;
      p_->seconds[k_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      ++p_->calls[k_];
    }
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

   private:
    OpProfile* p_;
    OpProfile::Kind k_;
    std::chrono::steady_clock::time_point t0_;
  };

 protected:
  Scratch scratch_;
  RoutingTrace* trace_ = nullptr;
  OpProfile* profile_ = nullptr;

 private:
  std::deque<std::vector<std::byte>> host_buffers_;  // host_buffer's, by default
};

struct BackendOptions {
  BackendKind kind = BackendKind::kCpu;
  int threads = 0;  // 0: every core
  std::optional<CpuIsa> cpu_isa;  // kCpu: the kernel path (default: the best this CPU runs)
  bool deterministic = false;     // kCpu: one kernel family for every call size (see CpuBackend)
  // kCpu with AMX, not deterministic: prefill-sized products and attention take their activations
  // as bf16 (one rounding, as llama.cpp's CPU path takes them) instead of bf16x2: faster, about
  // twice as far from an fp32 reference (docs/perf-notes.md).
  bool cpu_bf16_activations = false;
  int device = 0;                 // kCuda: which GPU
};

Result<std::unique_ptr<Backend>> make_backend(const BackendOptions& options);

}  // namespace ft::engine

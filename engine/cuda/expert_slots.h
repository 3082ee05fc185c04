// The GPU side of expert offload: the expert cache's slots in VRAM (with an all-zero expert for
// choices another device computes), the copy stream experts cross PCIe on, the host memory they
// are copied from (pinned where the driver allows), and the state that decides what goes where
// (the cache's bookkeeping, the split planner's model, the CPU experts' arena). The CUDA backend
// drives it from its MoE op. Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ft/engine/backend.h"
#include "ft/engine/cpu_experts.h"
#include "ft/engine/expert_cache.h"
#include "ft/engine/in_place_experts.h"
#include "ft/engine/moe_split.h"
#include "ft/engine/share_tuner.h"
#include "kernels.h"

namespace ft::engine::cuda {

// Where one expert's three matrices are (device pointers).
struct ExpertPtrs {
  const std::byte* gate = nullptr;
  const std::byte* up = nullptr;
  const std::byte* down = nullptr;
};

// Queues the copies of one expert's three matrices from host memory to `to` on `s`.
void copy_expert_async(const SwiGluMatrices& m, const ExpertPtrs& to, cudaStream_t s);

class ExpertSlots {
 public:
  // Allocates the slots and the zero expert; kUnavailable when VRAM cannot hold them.
  static Result<std::unique_ptr<ExpertSlots>> create(const ExpertOffloadOptions& options);
  ~ExpertSlots();
  ExpertSlots(const ExpertSlots&) = delete;
  ExpertSlots& operator=(const ExpertSlots&) = delete;

  const ExpertOffloadOptions& options() const { return o_; }
  // Resizes to `slots` slots in all (transient ones included) between passes, the cache keeping
  // `floor_per_layer` per layer. Memory goes and comes a chunk of slots at a time: shrinking keeps
  // the chunks whose slots all lie below `slots` (at least min_slots) and frees the rest with the experts they held;
  // growing allocates chunks until `slots` or until the GPU has no more. Returns the slots it has now.
  Result<int> resize(int slots, int floor_per_layer);
  int slots() const { return o_.slots; }
  // Slots in memory the cache does not own (the backend's workspace, lent between decode steps):
  // lend adds as many as `memory` holds after the slots there are; recall gives them up with the
  // experts they held (between passes; a resize recalls them first). lend returns the slots added.
  int lend(std::span<std::byte> memory);
  void recall();
  int lent_slots() const { return lent_slots_; }
  // How a size divides: the transient slots out of `slots`, the fewest slots offload works with,
  // and the per-layer floor (`floor` at most) that leaves a prefill round room.
  static int transient_for(int slots, int top_k);
  static int min_slots(int top_k);
  static int floor_for(int slots, int top_k, int layers, int floor);
  void set_policy(const MoePolicy& p) {
    o_.policy = p;
    stats_.policy = p.name();
    tuner_ = ShareTuner();  // direct:auto starts its climb again
  }
  ExpertCache& cache() { return cache_; }
  SplitModel& model() { return model_; }
  CpuExperts& cpu() { return cpu_; }
  ExpertOffloadStats& stats() { return stats_; }
  // The stats as of the last publish() (end of a pass): safe to read from any thread meanwhile.
  void publish();
  ExpertOffloadStats snapshot() const;

  // Page-locks host memory the copies read (cudaHostRegister, read-only where the GPU takes it).
  bool pin(std::span<const std::byte> bytes);
  // Zeroed pinned host memory for experts made at load (transposed copies), freed with the slots;
  // empty when the driver refuses it.
  std::span<std::byte> pinned_buffer(std::size_t bytes);
  // The MoE layer `w` is, numbered in the order layers are first seen (a pass runs them in order).
  int layer_of(const MoeWeights& w);
  // Layer `layer` as the CPU's share reads it: its expert biases in host memory (gpt-oss's).
  const MoeWeights& for_cpu(int layer) const {
    const auto i = std::size_t(layer);
    return on_host_[i] ? *on_host_[i] : *by_id_[i];
  }
  // Whether `w`'s experts fit the slots (bf16 with 16-byte rows or GGUF blocks, one shape and type,
  // within a slot); a message if not.
  std::string check(const MoeWeights& w) const;
  // One expert's bytes (what a fetch moves).
  static std::size_t expert_bytes(const MoeWeights& w) { return w.experts.front().bytes(); }

  ExpertPtrs slot(int s, const MoeWeights& w) const;
  ExpertPtrs zero(const MoeWeights& w) const;
  // Slots outside the cache for experts a decode step fetches but the cache does not admit: valid
  // for the MoE layer they are fetched for (the next layer's routing waits for its kernels).
  int transient_slots() const { return o_.slots - cache_.slots(); }
  int transient_slot(int i) const { return cache_.slots() + i; }  // for slot()/fetch()
  // The experts a layer's last prefill-sized call used (empty before one): what a prefetch of
  // that layer fetches.
  std::vector<int32_t>& last_active(int layer) { return last_active_[std::size_t(layer)]; }
  // The split's starting costs: from the options' cache file, else measured on `w`'s experts (copy
  // and CPU rates, alone and at once; ~0.3 s) and cached. Runs once, on the first offloaded layer.
  void calibrate(const MoeWeights& w);
  bool calibrated() const { return calibrated_; }
  // The MoE layer after `layer` in pass order, once a pass has shown it (null before).
  const MoeWeights* next_layer(int layer) const {
    return std::size_t(layer + 1) < by_id_.size() ? by_id_[std::size_t(layer + 1)] : nullptr;
  }

  // Prefill streams experts in rounds (a group of a layer's experts, or the next layer's
  // prefetch): a round's copies wait only for the compute of the round two before it, whose
  // experts it may evict (the cache protects the last two rounds'), so they overlap the compute
  // of the round before. begin_round starts the cache step; end_round marks the round's compute.
  void begin_round();
  void end_round(cudaStream_t compute);
  // When a round finds no slot: the copy stream waits for all the compute queued so far, and the
  // earlier rounds' experts lose their protection.
  void copy_after_all(cudaStream_t compute);
  // Copies expert e of w into slot s on the copy stream.
  void fetch(const MoeWeights& w, int e, int s);
  // fetch() of each (expert, slot) pair, in one group; with copy runs on (unless FT_CUDA_COPY_RUNS=0),
  // experts that follow each other in host memory going into slots one pitch apart cross as one
  // strided copy a matrix (expert_copy_runs.h).
  void fetch_many(const MoeWeights& w, std::span<const std::pair<int, int>> expert_slots);
  // Ends a group of fetches: `compute` waits for them; their time is read later (settle()).
  void fetched_into(cudaStream_t compute, bool concurrent_cpu);
  // Learns the copy rate from fetch groups that have finished.
  void settle();

  // ---- The next layer's experts, copied ahead (decode through the host: fetch, ratio, adaptive) ----
  // A decode layer's MoE input also goes through the next layer's router (the residual stream moves
  // little from one layer to the next: its choices name most of the next layer's), and the experts
  // it picks that the cache lacks cross PCIe into transient slots while this layer computes; the
  // next layer reads them there if it picks them. The transient slots then split in two halves, a
  // layer's own fetches and its prefetched experts in the half of its parity, so a copy ahead never
  // lands in a slot the layer before still reads. On unless FT_CUDA_PREFETCH=0; only where each half
  // holds a layer's choices twice (`choices`: tokens x top_k).
  bool prefetch_on(int choices) const;
  // Queues the copies of `next`'s experts among `predicted` (a pass's choices for layer
  // `next_layer`, any order, repeats allowed) that are not cached, after the copies queued so far.
  void prefetch(const MoeWeights& next, int next_layer, std::span<const int32_t> predicted, std::uint64_t pass,
                int choices);
  // The transient slot a prefetch of this pass put (layer, expert) in, or -1; used_prefetch marks it
  // chosen (for wait_prefetched and the stats).
  int prefetched(int layer, int expert, std::uint64_t pass) const;
  void used_prefetch(int layer, int expert);
  // `compute` waits for the copies of the prefetched experts marked used (none: no wait); then the
  // layer's prefetch is spent.
  void wait_prefetched(int layer, cudaStream_t compute);
  // Misses read in place (direct): the next layer's predicted misses are copied ahead by the SMs on
  // a side stream (stage_ahead) into the transient slots of the next layer's parity (otherwise
  // unused by these policies), and the next layer's table names them there. Device-side only, so
  // a recorded step replays it. Off unless FT_CUDA_PREFETCH=direct. `predicted_dev`: n choices in
  // memory that outlives the op (ahead_choices).
  void stage_ahead_in_place(const MoeWeights& next, int next_layer, const int32_t* predicted_dev, int n,
                            std::uint64_t pass, cudaStream_t main);
  // When layer's experts were copied ahead this pass: `main` waits for them, and table / from_host
  // become the ones naming the copies.
  void take_staged_ahead(int layer, std::uint64_t pass, cudaStream_t main, const std::byte* const*& table,
                         const std::uint8_t*& from_host);
  // Device memory for the next layer's predicted choices (kMaxInPlaceChoices), one per parity.
  int32_t* ahead_choices(int next_layer) const { return ahead_choices_dev_ + (next_layer % 2) * kMaxInPlaceChoices; }
  // Transient slot i of a decode layer's own fetches in pass `pass`, and how many it may take.
  int decode_transient_slot(int layer, int i, int choices, std::uint64_t pass) const;
  int decode_transient_room(int layer, int choices, std::uint64_t pass) const;

  // ---- Misses read in place (policy direct; in_place_experts.h) ----
  bool in_place() const { return o_.policy.kind == MoePolicy::Kind::kDirect; }
  // Learns where `w`'s experts are in host memory as the GPU addresses them (once a layer); a
  // message when some expert is not in pinned memory or its rows do not suit the kernels.
  std::string know_in_place(const MoeWeights& w, int layer);
  bool knows_in_place(int layer) const { return in_place_.knows(layer); }
  // The layer's device table of expert pointers (gate, up, down: E each), as of the last prepare.
  const std::byte* const* in_place_table(int layer) const {
    return table_dev_ + std::size_t(layer) * 3 * std::size_t(o_.experts);
  }
  // Per expert of the layer, 1 where that table names host memory (as of the last prepare).
  const std::uint8_t* in_place_from_host(int layer) const {
    return reinterpret_cast<const std::uint8_t*>(table_dev_ + in_place_.table_size()) +
           std::size_t(layer) * std::size_t(o_.experts);
  }
  // Whether a step's misses read in place are copied into staging slots first, by a kernel reading
  // wide over PCIe, and the expert kernels read the copies (FT_CUDA_STAGE_MISSES=1; the first
  // kMaxStagedChoices choices of a layer).
  bool stage_misses() const { return stage_misses_; }
  static constexpr int kMaxStagedChoices = 32;
  // A staging slot's layout for w's experts: a cache slot's (stage_missed_experts).
  StagedExpert staged_shape(const MoeWeights& w) const;
  // Slots start on 256 bytes (as cudaMalloc's chunks do): p, moved up to the next such boundary.
  static constexpr std::size_t kSlotAlign = 256;
  static std::byte* slot_start(std::byte* p);
  // Pinned host memory the step copies a layer's choices into (kMaxInPlaceChoices at most), and the
  // note that this pass did (n choices); after_in_place_pass reads them.
  int32_t* in_place_choices(int layer) { return routes_ + std::size_t(layer) * std::size_t(kMaxInPlaceChoices); }
  void note_in_place(int layer, int n) { noted_[std::size_t(layer)] = n; }
  static constexpr int kMaxInPlaceChoices = 16 * 32;  // decode's tokens times the router's most choices
  // Before a pass (outside any graph capture): the step number goes up (and to the GPU), and
  // prepare_in_place.
  void begin_in_place_pass(cudaStream_t s);
  // Copies that have landed flip their experts to slots, and the table goes to the GPU on `s` if
  // it changed.
  void prepare_in_place(cudaStream_t s);
  // After a pass (synchronised): its noted choices counted in the cache, admissions copied on the
  // copy stream.
  void after_in_place_pass();
  // A pass that reads slots through the cache itself (prefill, the other policies) waits on `s`
  // for the in-place admissions' copies still under way.
  void order_after_in_place_copies(cudaStream_t s);
  // The CPU's share (policy direct:Q). Per layer, host memory both sides address: the GPU writes
  // the layer's input and choices there and raises `in` (publish_to_host); a CPU task computes the
  // layer's CPU experts into y and raises `out`; the GPU waits for `out` and adds y. Flags count
  // passes (the step number: step_device() on the GPU, step() here).
  struct InPlaceIo {
    float* x = nullptr;
    int32_t* chosen = nullptr;
    float* weights = nullptr;
    float* y = nullptr;
    unsigned* in = nullptr;
    unsigned* out = nullptr;
  };
  // A step with a CPU share runs its kernels (publish, wait, add) even when direct:auto's share is
  // at 0 for the moment, so the recorded graph stays the same while the share moves.
  bool cpu_share() const { return in_place() && (o_.policy.ratio > 0 || o_.policy.auto_share); }
  double share_now() const { return o_.policy.auto_share ? tuner_.share() : o_.policy.ratio; }
  const InPlaceIo& in_place_io(int layer) const { return io_[std::size_t(layer)]; }
  const unsigned* step_device() const { return step_dev_; }
  // The share as this pass began (a float on the device, beside the step number).
  const float* share_device() const { return reinterpret_cast<const float*>(step_dev_ + 1); }
  // Whether each layer's misses are split by the share on the device (split_misses_to_host, the
  // default), or by a fixed hash of (layer, expert) in the table (FT_CUDA_SPLIT=hash).
  bool split_by_layer() const { return split_by_layer_; }
  // Queues layer's CPU share for this pass (T tokens, K choices each): a task on the CPU experts'
  // threads takes the pass's layers in order as the GPU publishes them.
  void queue_cpu_share(int layer, int T, int K);
  // After the pass's GPU work is synchronised: the task is told the pass is over and waited for
  // (it gives up on layers the GPU never published, when the pass failed).
  void end_cpu_share();

  // The GPU waits for the CPU's share of a layer on a counter in mapped host memory: a CPU task
  // signals the sequence number it was given when its output is written.
  unsigned next_cpu_seq() { return ++cpu_seq_; }
  const unsigned* cpu_flag() const { return flag_; }
  void signal(unsigned seq) { std::atomic_ref<unsigned>(*flag_).store(seq, std::memory_order_release); }
  // A CPU task that could not compute its share says so here (it still signals: the GPU must not
  // wait forever); the pass that ran it fails with the message.
  void cpu_failed(std::string why) {
    std::lock_guard lock(published_mu_);
    cpu_failure_ = std::move(why);
  }
  std::string take_cpu_failure() {
    std::lock_guard lock(published_mu_);
    return std::exchange(cpu_failure_, std::string());
  }

 private:
  ExpertSlots(const ExpertOffloadOptions& options, int transient);
  std::byte* slot_base(int s) const { return slot_base_[std::size_t(s)]; }
  // A fetch group's start (its begin event), unless one is open; and one expert's fetch counted.
  void open_group();
  void count_fetch(const MoeWeights& w, int e);

  ExpertOffloadOptions o_;
  ExpertCache cache_;
  SplitModel model_;
  CpuExperts cpu_;
  ExpertOffloadStats stats_;
  mutable std::mutex published_mu_;  // also guards cpu_failure_
  ExpertOffloadStats published_;
  std::string cpu_failure_;
  // Allocates chunks for slots [o_.slots, want); false when the GPU had no room for the next one.
  bool grow_to(int want);
  struct Chunk {
    std::byte* base = nullptr;
    int slots = 0;
    bool owned = true;  // false: lent memory (lend), never freed here
  };
  // Frees (or, lent, gives up) whole chunks from the end while what stays holds `slots`.
  void drop_chunks_above(int slots);
  // After the slot count changed: the transient share, the cache's size and floor, the stats.
  void resized(int floor_per_layer);
  std::vector<Chunk> chunks_;          // slot memory, a few slots a chunk
  std::vector<std::byte*> slot_base_;  // per slot: where it starts (inside its chunk)
  int slots_per_chunk_ = 1;
  int lent_slots_ = 0;         // in the last chunk, when it is lent memory
  int floor_asked_ = 0;        // the per-layer floor last asked for (floor_for caps it by size)
  std::byte* zero_ = nullptr;  // one slot of zeros
  unsigned* flag_ = nullptr;   // pinned, mapped: the last CPU task done
  unsigned cpu_seq_ = 0;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t round_done_[3] = {};
  cudaEvent_t all_done_ = nullptr;
  std::uint64_t rounds_ = 0;
  std::vector<void*> pinned_;
  std::vector<void*> pinned_buffers_;  // pinned_buffer's (cudaHostAlloc)
  std::unordered_map<const MoeWeights*, int> layers_;
  std::vector<const MoeWeights*> by_id_;
  std::vector<std::unique_ptr<const MoeWeights>> on_host_;  // per layer: for_cpu's copy where it differs
  std::vector<std::vector<int32_t>> last_active_;
  bool calibrated_ = false;
  InPlaceExperts in_place_;
  const std::byte** mirror_ = nullptr;     // pinned: the table as the host builds it
  const std::byte** table_dev_ = nullptr;  // the table the kernels read
  std::size_t table_bytes_ = 0;            // the table's pointers and its from-host flags after them
  bool stage_misses_ = false;
  bool split_by_layer_ = false;
  bool prefetch_ = false;
  // The one layer with experts copied ahead: which (expert, transient slot) pairs, each with the
  // event after its copy, and which of them the layer chose.
  struct Ahead {
    int layer = -1;
    std::uint64_t pass = 0;
    std::vector<std::pair<int, int>> experts;
    std::vector<bool> used;
  };
  Ahead ahead_;
  bool ahead_in_flight_ = false;         // copies ahead queued since the copy stream was last synchronised
  std::vector<cudaEvent_t> ahead_done_;  // per entry of ahead_.experts (made as needed)
  bool prefetch_in_place_ = false;       // FT_CUDA_PREFETCH=direct
  static constexpr int kMaxAhead = 16;   // experts a layer copied ahead, in place
  cudaStream_t ahead_stream_ = nullptr;
  cudaEvent_t ahead_fork_ = nullptr, ahead_join_[2] = {};
  std::byte** ahead_slots_dev_ = nullptr;  // [2][kMaxAhead] transient slot starts (prepare_in_place)
  std::vector<std::byte*> ahead_slots_host_;
  const std::byte** ahead_table_dev_ = nullptr;  // [2][3 E]
  std::uint8_t* ahead_from_host_dev_ = nullptr;  // [2][E]
  int32_t* ahead_choices_dev_ = nullptr;         // [2][kMaxInPlaceChoices]
  struct {
    int layer = -1;
    std::uint64_t pass = 0;
  } staged_ahead_;
  int transient_half() const { return transient_slots() / 2; }
  // The experts copied ahead for `layer` in `pass` (0 for any other layer or pass).
  int ahead_of(int layer, std::uint64_t pass) const;
  int32_t* routes_ = nullptr;              // pinned, mapped: per layer, a step's choices
  std::vector<int> noted_;                 // per layer: choices this pass left in routes_ (-1 none)
  cudaEvent_t landed_ = nullptr;           // after the last admissions' copies
  std::vector<InPlaceIo> io_;              // per layer (allocated by know_in_place)
  std::vector<void*> io_blocks_;           // their pinned memory
  unsigned step_ = 0;
  ShareTuner tuner_;  // direct:auto
  std::chrono::steady_clock::time_point pass_began_;
  unsigned* step_host_ = nullptr;  // pinned: what prepare_in_place uploads
  unsigned* step_dev_ = nullptr;
  // The pass's CPU share: layers queued by the host thread, taken by one task.
  struct CpuShare {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::array<int, 3>> layers;  // layer, T, K
    bool running = false, ended = false;
    std::atomic<bool> abort{false};
  };
  CpuShare share_;
  void run_cpu_share(unsigned step);
  // A group of fetches in flight: events around it on the copy stream, its size.
  struct Group {
    cudaEvent_t begin = nullptr, end = nullptr;
    std::size_t bytes = 0;
    int experts = 0;
    bool concurrent = false;
    bool open = false, pending = false;
  };
  Group group_;
};

}  // namespace ft::engine::cuda

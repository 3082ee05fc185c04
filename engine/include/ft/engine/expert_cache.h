// Which routed experts sit in the GPU's expert slots: bookkeeping for the expert cache of an
// offloaded model (the slots' memory and the copies into them are the backend's). One global LRU
// over a fixed number of equal slots, each holding one (layer, expert); a per-layer floor keeps a
// layer's last `floor` slots from being taken by other layers, so one busy layer cannot empty the
// cache of all the others. Experts used in the last `protected_steps` steps (the current one
// since begin_step, and those before it) are never evicted: their kernels may still read them
// (with 2, a step's copies overlap the previous step's compute).
//
// Admission: every use (hit or miss) counts towards an expert's frequency, halved now and then so
// it follows the traffic. Decode admits a missed expert only if it is used more often than the
// slot's current one (kIfHotter, TinyLFU-style): with a cache much smaller than the experts a
// layer cycles through, plain LRU would evict every expert just before its next use; the
// experts not admitted are fetched into transient slots of the backend's for the one step.
//
// Prefill streams every expert a chunk uses, layer after layer: more experts in one pass than the
// cache holds. Through plain LRU that cyclic scan would evict each expert before the next pass
// reached it again, and flush what decode had cached on the way. Its admissions (kStream) cycle
// through a pool of their own instead (streamed slots, about three layers' experts: the round being
// computed, the round before it and the next layer's prefetch), so the rest of the cache keeps
// what it held and every pass finds it as hits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace ft::engine {

class ExpertCache {
 public:
  struct Key {
    int layer = -1, expert = -1;
    bool operator==(const Key&) const = default;
  };
  struct Admitted {
    int slot = -1;
    std::optional<Key> evicted;  // the expert whose slot this was
  };
  struct LayerStats {
    std::uint64_t hits = 0, misses = 0;
    int resident = 0;  // slots the layer holds now
  };

  // `slots` slots for `layers` MoE layers of `experts` experts each.
  ExpertCache(int slots, int layers, int experts, int floor_per_layer = 0, int protected_steps = 1);

  int slots() const { return int(slot_key_.size()); }
  int layers() const { return layers_; }
  int experts() const { return experts_; }
  int floor_per_layer() const { return floor_; }
  // A new floor (a resized cache keeps the floor its size calls for).
  void set_floor_per_layer(int floor) { floor_ = floor; }

  // A new step: the experts of steps before the protected ones may be evicted again.
  void begin_step() { ++step_; }
  // Only this step's experts stay protected from now on (the caller has made sure the earlier
  // steps' kernels are done).
  void unprotect_earlier_steps() { protect_from_ = step_; }
  // The slot holding (layer, expert), marked used by this step; nullopt on a miss. Counts a hit
  // or a miss for the layer.
  std::optional<int> lookup(int layer, int expert);
  // The slot holding (layer, expert) or nullopt, without counting or marking anything.
  std::optional<int> find(int layer, int expert) const;
  enum class Admission {
    kAlways,    // take the least recently used slot
    kIfHotter,  // only a free slot, or one whose expert is used less often than this one
    kStream,    // prefill: a free slot while more than the stream pool are free (the expert stays),
                // else the least recently used streamed slot, else (all streamed slots still
                // protected) the least recently used one, which becomes streamed
  };
  // A slot for (layer, expert), which must not be resident: a free slot, else the least recently
  // used one that neither this step uses nor would take a layer below its floor (its own layer's
  // slots always qualify; `floor` false ignores floors). Marked used by this step. nullopt when
  // every slot is protected, or (kIfHotter) the candidate is not used more often than its victim.
  std::optional<Admitted> admit(int layer, int expert, Admission admission = Admission::kAlways, bool floor = true);
  // Slots kStream admissions cycle through once the cache is full: about three layers' experts,
  // at most half the cache.
  int stream_pool() const { return std::min(3 * experts_, slots() / 2); }
  bool streamed(int slot) const { return streamed_[std::size_t(slot)]; }
  // Decayed use count of (layer, expert): what kIfHotter compares.
  float frequency(int layer, int expert) const { return freq_[index(layer, expert)]; }
  // Shrinks to `slots` slots or grows with free ones. A slot number is a place in the backend's
  // memory, so shrinking gives up the highest-numbered slots and returns the experts they held;
  // the slots below the new count keep their contents.
  std::vector<Key> resize(int slots);
  // Forgets every resident expert (the slots' contents are no longer valid).
  void clear();

  const LayerStats& layer_stats(int layer) const { return stats_[std::size_t(layer)]; }
  std::uint64_t hits() const;
  std::uint64_t misses() const;
  int resident() const;  // slots in use
  // Changes whenever an expert enters or leaves a slot: who maps (layer, expert) to memory rebuilds
  // its view when this moved.
  std::uint64_t version() const { return version_; }

 private:
  static constexpr std::uint64_t kNever = 0;
  std::size_t index(int layer, int expert) const {
    return std::size_t(layer) * std::size_t(experts_) + std::size_t(expert);
  }
  void touch(int slot);
  void drop(int slot);
  void count_use(int layer, int expert);
  bool evictable(int slot, int for_layer, bool floor) const;
  // The free or least recently used evictable slot (among the streamed ones when `streamed_only`);
  // -1 when there is none.
  int victim(int for_layer, bool floor, bool streamed_only) const;

  int layers_, experts_, floor_, protected_;
  std::uint64_t step_ = 1;
  std::uint64_t protect_from_ = 0;  // steps before this one are never protected
  std::uint64_t clock_ = 0;
  std::vector<Key> slot_key_;             // per slot; layer -1: free
  std::vector<std::uint64_t> last_used_;  // per slot: clock of its last use
  std::vector<std::uint64_t> step_used_;  // per slot: the step that last used it
  std::vector<bool> streamed_;            // per slot: its expert came in through kStream
  std::vector<int> slot_of_;              // per (layer, expert): slot or -1
  std::vector<LayerStats> stats_;
  std::vector<float> freq_;  // per (layer, expert)
  std::uint64_t uses_ = 0;   // since the last halving
  std::uint64_t version_ = 0;
};

}  // namespace ft::engine

// Which routed experts sit in the GPU's expert slots: bookkeeping for the expert cache of an
// offloaded model (the slots' memory and the copies into them are the backend's). One global LRU
// over a fixed number of equal slots, each holding one (layer, expert); a per-layer floor keeps a
// layer's last `floor` slots from being taken by other layers, so one busy layer cannot empty the
// cache of all the others. Experts used in the current step (since begin_step) are never evicted:
// the step's kernels read them.
#pragma once

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
  ExpertCache(int slots, int layers, int experts, int floor_per_layer = 0);

  int slots() const { return int(slot_key_.size()); }
  int layers() const { return layers_; }
  int experts() const { return experts_; }
  int floor_per_layer() const { return floor_; }

  // A new step: the experts the previous step used may be evicted again.
  void begin_step() { ++step_; }
  // The slot holding (layer, expert), marked used by this step; nullopt on a miss. Counts a hit
  // or a miss for the layer.
  std::optional<int> lookup(int layer, int expert);
  // The slot holding (layer, expert) or nullopt, without counting or marking anything.
  std::optional<int> find(int layer, int expert) const;
  // A slot for (layer, expert), which must not be resident: a free slot, else the least recently
  // used one that neither this step uses nor would take a layer below its floor (its own layer's
  // slots always qualify). Marked used by this step. nullopt when every slot is protected.
  std::optional<Admitted> admit(int layer, int expert);
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

 private:
  static constexpr std::uint64_t kNever = 0;
  void touch(int slot);
  void drop(int slot);
  bool evictable(int slot, int for_layer) const;

  int layers_, experts_, floor_;
  std::uint64_t step_ = 1;
  std::uint64_t clock_ = 0;
  std::vector<Key> slot_key_;                // per slot; layer -1: free
  std::vector<std::uint64_t> last_used_;     // per slot: clock of its last use
  std::vector<std::uint64_t> step_used_;     // per slot: the step that last used it
  std::vector<int> slot_of_;                 // per (layer, expert): slot or -1
  std::vector<LayerStats> stats_;
};

}  // namespace ft::engine

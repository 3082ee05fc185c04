// Expert offload with misses read in place: during a decode step the GPU's expert kernels reach
// each chosen expert through a per-layer table of pointers that names the expert's cache slot
// when it has one, else the expert's own pinned host memory, which the kernels then read over
// PCIe themselves (zero-copy). Nothing in the step waits for the host, so the step records as a
// CUDA graph like a resident one. The host keeps the cache between steps: it counts the step's
// choices, admits misses used more often than their victims (their copies run on the copy stream
// while the next step runs; the table names a slot only once its copies have landed) and points an
// evicted expert back at host memory before the next step starts. This class is that bookkeeping;
// the CUDA backend owns the memory, the copies and the upload of the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ft/engine/expert_cache.h"

namespace ft::engine {

// One expert's three matrices as the GPU addresses them.
struct ExpertAddress {
  const std::byte* gate = nullptr;
  const std::byte* up = nullptr;
  const std::byte* down = nullptr;
};

class InPlaceExperts {
 public:
  InPlaceExperts(int layers, int experts);

  int layers() const { return layers_; }
  int experts() const { return experts_; }
  // Where (layer, expert) lives in host memory, as the GPU addresses it.
  void set_host(int layer, int expert, ExpertAddress a);
  // Whether set_host has been called for every expert of `layer`.
  bool knows(int layer) const { return known_[std::size_t(layer)] == experts_; }

  // A finished step's choices of one layer (any order, repeats for several tokens): each chosen
  // expert counted once in the cache (a hit or a miss, its use frequency), then the misses the
  // cache admits (kIfHotter), busiest first. An admission that evicts another expert spends one of
  // `replacements` (free slots cost none): copies compete with the next step's reads for PCIe.
  // The caller copies each admitted expert into its slot; until landed() the table keeps reading it
  // from host memory.
  struct Admission {
    int expert = 0, slot = 0;
  };
  struct StepUse {
    int hits = 0, misses = 0;
    std::vector<int> missed;  // the missed experts, ascending
    std::vector<Admission> admitted;
  };
  StepUse after_step(ExpertCache& cache, int layer, std::span<const int32_t> chosen, int& replacements);
  // The share of the experts without a slot that the CPU computes instead (0: none). by_hash: which
  // ones is fixed per (layer, expert) by a hash, so a routing that is random over experts sends
  // about this share of the misses to the CPU; the table names the zero expert for them (the GPU
  // adds nothing for them; the CPU's output is added after). Otherwise the table names host memory
  // for every uncached expert and the GPU splits each layer's misses itself (split_misses_to_host).
  void set_cpu_share(double q, bool by_hash = true);
  double cpu_share() const { return cpu_share_; }
  // Whether the table of the last refresh sends (layer, expert) to the CPU.
  bool on_cpu(int layer, int expert) const { return cpu_[index(layer, expert)] != 0; }

  // Every copy issued so far has landed.
  void landed();
  bool copies_pending() const { return pending_count_ > 0; }

  // The table: per layer gate[experts], up[experts], down[experts] (3 * experts pointers a layer),
  // rebuilt into `out` when the cache, the host addresses or the landed copies changed since the
  // last call; returns whether it wrote. Layers not yet known hold nulls. slot_at(layer, -1) is
  // the zero expert (read for the CPU's experts). `from_host` (layers * experts, when given): 1
  // where the table names the expert's host memory (the GPU reads it over PCIe), else 0.
  using SlotAddress = std::function<ExpertAddress(int layer, int slot)>;
  bool refresh(const ExpertCache& cache, const SlotAddress& slot_at, std::span<const std::byte*> out,
               std::span<std::uint8_t> from_host = {});
  std::size_t table_size() const { return std::size_t(layers_) * 3 * std::size_t(experts_); }

 private:
  std::size_t index(int layer, int expert) const {
    return std::size_t(layer) * std::size_t(experts_) + std::size_t(expert);
  }

  int layers_, experts_;
  std::vector<ExpertAddress> host_;  // per (layer, expert)
  std::vector<int> known_;           // per layer: experts set_host has seen
  std::vector<char> pending_;        // per (layer, expert): copies issued, not landed
  std::vector<char> cpu_;            // per (layer, expert): the CPU computes it (as of the last refresh)
  double cpu_share_ = 0;
  bool by_hash_ = true;
  int pending_count_ = 0;
  bool changed_ = true;
  std::uint64_t built_version_ = ~std::uint64_t(0);
};

}  // namespace ft::engine

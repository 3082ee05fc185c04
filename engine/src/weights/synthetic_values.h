// The values of synthetic (full-size, random) checkpoints, made fast enough to fill tens of GB in
// seconds: a splitmix64 stream per (seed, tensor, block) and a 65,536-entry table of the tensor's
// bf16 values at the standard normal's quantiles, so each 16 random bits become one N(offset,
// scale^2) sample with no arithmetic. The stream depends only on the seed, the tensor's name and
// the block index, so the bytes do not depend on which thread fills which block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ft/engine/bf16.h"
#include "ft/engine/random_checkpoint.h"

namespace ft::engine::synthetic {

// The unit of determinism and of parallel work: 4 Mi elements (8 MiB of bf16).
inline constexpr uint64_t kBlockElements = uint64_t(1) << 22;

// The 65,536 quantiles Phi^-1((i + 0.5) / 65536) of the standard normal, rescaled to exactly unit
// variance (the table's tails stop at about 4.3 sigma). Computed once.
const std::vector<double>& normal_quantiles();

// bf16(offset + scale * q) for every quantile q: the lookup table of a kNormal tensor.
std::vector<bf16_t> normal_table(double scale, double offset);

// The generator's start for block `block` of the tensor `name`.
uint64_t block_seed(uint64_t seed, std::string_view name, uint64_t block);

// Draws one block's values in pieces: each fill() continues where the previous one stopped. Every
// piece but a block's last must hold a multiple of 4 elements (one 64-bit draw makes 4 values).
class BlockGenerator {
 public:
  // `table`: normal_table() of the tensor for kNormal (outlives the generator); unused otherwise.
  BlockGenerator(const TensorInit& init, const bf16_t* table, uint64_t block_seed)
      : init_(init), table_(table), state_(block_seed) {}

  void fill(bf16_t* out, std::size_t count);

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  TensorInit init_;
  const bf16_t* table_;
  uint64_t state_;
};

}  // namespace ft::engine::synthetic

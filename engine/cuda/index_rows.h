// The host side of the CUDA backend's index_select (DeepSeek sparse attention's indexer): where
// each query row's scores go, chunks of rows whose scores fit a buffer, and the top-k of a chunk's
// rows once its scores are on the host. The top-k is ref::top_k_positions itself: it breaks exact
// ties as torch does on the CPU (by the pass's row length), which the goldens hold the engine to
// and which a selection on the GPU would have to reproduce exactly. Internal to engine/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ft/engine/backend.h"
#include "kernels.h"

namespace ft::engine::cuda {

// The rows 0 .. T - 1 of a call (T: one past the last sequence's last row), whose keys are one
// every `rate` positions (indexer_scores' key j at position j * rate + rate - 1; 1: every
// position, DSA; DeepSeek-V4's CSA: its compressed entries).
struct IndexRows {
  std::vector<IndexRowDev> dev;     // for the scores kernel: offsets packed in row order
  std::vector<int64_t> row_length;  // the keys the row's sequence holds after the pass ((pos0 + rows) / rate)
  std::size_t size() const { return dev.size(); }
};
// A row at position p has the (p + 1) / rate keys that closed at or before it (its causal ones).
IndexRows index_rows(std::span<const AttentionSeq> seqs, std::size_t rate = 1);

// Rows row0 .. row1 - 1, whose scores are `floats` floats from dev[row0].offset on.
struct ScoreChunk {
  std::size_t row0 = 0, row1 = 0;
  int64_t offset = 0;
  int64_t floats = 0;
  int max_keys = 0;  // the most keys of one of its rows
};
// Consecutive rows in chunks of at most `budget` floats of scores (a row with more has one of its own).
std::vector<ScoreChunk> score_chunks(const IndexRows& rows, std::size_t budget);

// ref::top_k_positions of each row of chunk c from its scores (scores[0] is the chunk's first
// row's first score) into selected [T, top_k] (host); rows of no sequence get -1s.
void select_rows(const IndexRows& rows, const ScoreChunk& c, const float* scores, std::size_t top_k, int32_t* selected);

}  // namespace ft::engine::cuda

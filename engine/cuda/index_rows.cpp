#include "index_rows.h"

#include <tbb/parallel_for.h>

#include <algorithm>

#include "ft/engine/ops_dsa.h"

namespace ft::engine::cuda {
namespace {

// Rows of a chunk below this are selected on the calling thread (a decode step's few rows).
constexpr std::size_t kParallelRows = 16;

}  // namespace

IndexRows index_rows(std::span<const AttentionSeq> seqs, std::size_t rate) {
  const int64_t m = int64_t(std::max<std::size_t>(rate, 1));
  std::size_t T = 0;
  for (const AttentionSeq& s : seqs) T = std::max(T, s.row0 + s.rows);
  IndexRows out;
  out.dev.assign(T, IndexRowDev{});
  out.row_length.assign(T, 0);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    for (std::size_t r = 0; r < s.rows; ++r) {
      out.dev[s.row0 + r].keys = int32_t((s.pos0 + int64_t(r) + 1) / m);  // causal: closed by its position
      out.dev[s.row0 + r].seq = int32_t(i);
      out.row_length[s.row0 + r] = (s.pos0 + int64_t(s.rows)) / m;
    }
  }
  int64_t offset = 0;
  for (IndexRowDev& r : out.dev) {
    r.offset = offset;
    offset += r.keys;
  }
  return out;
}

std::vector<ScoreChunk> score_chunks(const IndexRows& rows, std::size_t budget) {
  std::vector<ScoreChunk> out;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const int32_t keys = rows.dev[r].keys;
    if (out.empty() || (out.back().floats > 0 && std::size_t(out.back().floats + keys) > budget))
      out.push_back({r, r, rows.dev[r].offset, 0, 0});
    ScoreChunk& c = out.back();
    c.row1 = r + 1;
    c.floats += keys;
    c.max_keys = std::max(c.max_keys, int(keys));
  }
  return out;
}

void select_rows(const IndexRows& rows, const ScoreChunk& c, const float* scores, std::size_t top_k,
                 int32_t* selected) {
  const auto one = [&](std::size_t r) {
    const IndexRowDev& row = rows.dev[r];
    int32_t* out = selected + r * top_k;
    if (row.keys == 0) {
      std::fill(out, out + top_k, -1);
      return;
    }
    ref::top_k_positions(scores + (row.offset - c.offset), std::size_t(row.keys), std::size_t(rows.row_length[r]),
                         top_k, out);
  };
  if (c.row1 - c.row0 < kParallelRows) {
    for (std::size_t r = c.row0; r < c.row1; ++r) one(r);
    return;
  }
  // Each row on its own (top_k_positions keeps its work buffer per thread): any split gives the same.
  tbb::parallel_for(c.row0, c.row1, one);
}

}  // namespace ft::engine::cuda

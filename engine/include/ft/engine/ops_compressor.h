// CPU reference ops of DeepSeek-V4's KV compressors (HF DeepseekV4 CSA/HCA compressor and the CSA
// indexer's own compressor, docs/deepseek-v4.md §2.7-§2.8, §4): every window of m tokens pools its
// tokens' kv_proj rows into one entry, weighted per channel by a softmax of their gate_proj rows plus
// a learnt per-slot bias; the entry is RMSNorm'd and roped at the window's start. Also the rope V4
// uses everywhere: interleaved pairs on the LAST r dims of a head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ft::engine {

// One compressor's dims. A token gives a kv and a gate row of series() * width values each:
//   HCA (overlap false): one series; window w pools its own m tokens' rows.
//   CSA (overlap true): two, Ca = [0, width) and Cb = [width, 2 width); window w pools 2m slots,
//       the Ca of window w-1's tokens then the Cb of its own (window 0's Ca slots weigh 0).
// The position bias [m, series() * width] is added to the gate rows by slot within the window,
// over the full row (CSA: before the Ca/Cb split, so the carried Ca gate holds its bias).
struct CompressorSpec {
  std::size_t width = 0;      // an entry's size: head_dim (attention) or index_head_dim (indexer)
  std::size_t rate = 0;       // m: tokens per window (compress_rates of the layer's kind)
  bool overlap = false;       // CSA's two series, see above
  std::size_t rope_dims = 0;  // r: the entry's last r dims are roped (r <= width, even)
  float norm_eps = 1e-6f;     // rms_norm_eps of kv_norm

  std::size_t series() const { return overlap ? 2 : 1; }
  std::size_t row() const { return series() * width; }
  // Tokens a fixed-size state keeps (compress_rows): the open window's, and CSA's previous window
  // too, whose Ca the next entry pools.
  std::size_t ring_tokens() const { return overlap ? 2 * rate : rate; }
};

// A sequence's compressor state between passes (§4): what the next window needs of the tokens
// already seen. Fixed size: at most m - 1 raw rows plus (CSA) m carried rows.
struct CompressorState {
  std::vector<float> kv, gate;            // the open window's raw rows [open, row()]; gate without bias
  std::vector<float> prev_kv, prev_gate;  // CSA: the last closed window's Ca [m, width], gate WITH its
                                          // bias; empty while no window has closed
  int64_t entries = 0;                    // closed windows: the next window starts at entries * m

  std::size_t open_tokens(const CompressorSpec& spec) const { return kv.size() / spec.row(); }
  // The absolute position of the next token fed.
  int64_t position(const CompressorSpec& spec) const {
    return entries * int64_t(spec.rate) + int64_t(open_tokens(spec));
  }
};

}  // namespace ft::engine

namespace ft::engine::ref {

// V4's rope on each head of x [heads, dim] at position pos: within the last r dims (offset dim - r)
// pair (2i, 2i+1) turns by pos * inv_freq[i], i < r / 2 (angles and cos/sin in fp32 as HF, no
// attention factor); the first dim - r dims pass through. inverse: the opposite turn (HF's
// apply_rotary_pos_emb with -sin), which V4 applies to the attention output at the query position.
void rope_tail(float* x, std::size_t heads, std::size_t dim, std::size_t rope_dims, const float* inv_freq, int64_t pos,
               bool inverse = false);

// Feeds one pass's T tokens, at positions state.position(spec) onwards, to the compressor: kv and
// gate [T, row()] are their raw kv_proj / gate_proj rows. Each window that closes appends its entry
// [width] to `entries`, in window order; the return value is how many did. Entry w is
//   kv_norm(sum_j softmax_j(gate_j + bias_j)[c] * kv_j[c]) over its slots j, per channel c, in fp32,
// then rope_tail at position w * m (the window's START, not the position it closes at) with the
// compress rope's inv_freq [rope_dims / 2]. position_bias [m, row()], norm_weight [width].
// A sequence fed in any split gives the same entries, bit for bit.
std::size_t compress(const float* kv, const float* gate, std::size_t T, const float* position_bias,
                     const float* norm_weight, const float* inv_freq, const CompressorSpec& spec,
                     CompressorState& state, std::vector<float>& entries);

// compress over the state as a sequence keeps it, in fixed-size memory: rings kv and gate of
// ring_tokens() rows, `ld` floats apart, holding the raw rows of the tokens before pos0 (token p
// at row p % ring_tokens(); the rows of positions before 0 are never read). Feeds the T tokens at
// pos0 onwards and writes entries [T, width]: row t the entry token pos0 + t closes (it closes
// window w when pos0 + t = w * m + m - 1), zeros where it closes none; the rings are left holding
// the rows up to pos0 + T. The entries are compress()'s for the same tokens, bit for bit.
void compress_rows(const float* kv, const float* gate, std::size_t T, int64_t pos0, const float* position_bias,
                   const float* norm_weight, const float* inv_freq, const CompressorSpec& spec, float* ring_kv,
                   float* ring_gate, std::size_t ld, float* entries);

}  // namespace ft::engine::ref

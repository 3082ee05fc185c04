#include "ops/cpu/linear.h"

#include <tbb/blocked_range2d.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <vector>

#include "ops/cpu/amx.h"
#include "ops/cpu/dequant_rows.h"
#include "ops/cpu/dots.h"
#include "ops/cpu/int8_dots.h"
#include "ops/cpu/int8_tiles.h"
#include "ops/reference/dot.h"

namespace ft::engine::cpu {
namespace {

// Tokens per work item when it is large (prefill): a 64-row x 64-token block keeps both operands
// in L2 while every product of the block is formed.
constexpr std::size_t kTokenBlock = 64;

// Rows [r0, r1) x tokens [t0, t1) of a bf16 matrix through the dots kernel.
void bf16_block(DotsFn dots, const PreparedX& x, const Matrix& w, std::size_t r0, std::size_t r1, std::size_t t0,
                std::size_t t1, float* y, std::size_t ldy) {
  const std::size_t cols = std::size_t(w.cols);
  float buf[kRowTile * kTokenChunk];
  for (std::size_t r = r0; r < r1; r += kRowTile) {
    const std::size_t nr = std::min(kRowTile, r1 - r);
    const auto* wr = reinterpret_cast<const bf16_t*>(w.row(int64_t(r)));
    for (std::size_t t = t0; t < t1; t += kTokenChunk) {
      const std::size_t nt = std::min(kTokenChunk, t1 - t);
      dots(wr, nr, x.row(t), x.ld(), nt, cols, buf);
      for (std::size_t i = 0; i < nr; ++i)
        for (std::size_t j = 0; j < nt; ++j) y[(t + j) * ldy + r + i] = buf[i * nt + j];
    }
  }
}

// The generic path: widen (or, for a block dtype, decode) a weight row, then fp32 dots against
// fp32 activations.
void widened_block(CpuIsa isa, const float* x, const X8Rows* x8, const Matrix& w, std::size_t r0, std::size_t r1,
                   std::size_t t0, std::size_t t1, float* y, std::size_t ldy) {
  const std::size_t cols = std::size_t(w.cols);
  // Q4_K / Q6_K with integer products: every token count the same kernel, a few tokens a call.
  if (x8) {
    const Int8DotsFn dots = int8_dots_for(isa, w);
    float out[kTokenBlock];
    for (std::size_t r = r0; r < r1; ++r) {
      const auto* row = reinterpret_cast<const std::uint8_t*>(w.row(int64_t(r)));
      for (std::size_t t = t0; t < t1; t += kTokenBlock) {
        const std::size_t n = std::min(kTokenBlock, t1 - t);
        int8_row_dots(dots, row, cols, *x8, t, n, out);
        for (std::size_t j = 0; j < n; ++j) y[(t + j) * ldy + r] = out[j];
      }
    }
    return;
  }
  // A few tokens on a block dtype: the fused kernel decodes each row in registers per group of
  // tokens (more tokens: one decoded row serves them all).
  if (const BlockDotsFn fused = block_dots_for(isa, w.dtype); fused && t1 - t0 <= 2 * kBlockDotTokens) {
    float out[kBlockDotTokens];
    for (std::size_t r = r0; r < r1; ++r) {
      const auto* row = reinterpret_cast<const std::uint8_t*>(w.row(int64_t(r)));
      for (std::size_t t = t0; t < t1; t += kBlockDotTokens) {
        const std::size_t n = std::min(kBlockDotTokens, t1 - t);
        fused(row, cols, x + t * cols, cols, n, out);
        for (std::size_t j = 0; j < n; ++j) y[(t + j) * ldy + r] = out[j];
      }
    }
    return;
  }
  static tbb::enumerable_thread_specific<std::vector<float>> rows;
  std::vector<float>& row = rows.local();
  row.resize(cols);
  const bool fused = block_dots_for(isa, w.dtype) != nullptr;
  for (std::size_t r = r0; r < r1; ++r) {
    decode_row(isa, w, int64_t(r), row.data());
    for (std::size_t t = t0; t < t1; ++t)
      y[t * ldy + r] = fused ? dot_decoded(row.data(), x + t * cols, cols) : ref::dot8(x + t * cols, row.data(), cols);
  }
}

// y[t, r] += bias[r] over T rows of R.
void add_bias(float* y, std::size_t T, std::size_t R, const float* bias) {
  if (!bias) return;
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t r = 0; r < R; ++r) y[t * R + r] += bias[r];
}

// Splits rows [r0, r1) into contiguous, equal, `align`-multiple pieces, a few per thread, handed out
// statically: a decode-sized product is a weight stream, and long contiguous runs per thread keep
// the hardware prefetchers streaming with the least scheduling between them.
template <typename Fn>
void for_row_pieces(std::size_t r0, std::size_t r1, std::size_t align, const Fn& fn) {
  const std::size_t units = (r1 - r0 + align - 1) / align;
  const std::size_t threads = std::size_t(tbb::this_task_arena::max_concurrency());
  const std::size_t pieces = std::max<std::size_t>(1, std::min(units, 2 * threads));
  tbb::parallel_for(
      std::size_t(0), pieces,
      [&](std::size_t i) {
        const std::size_t a = r0 + units * i / pieces * align, b = std::min(r1, r0 + units * (i + 1) / pieces * align);
        if (a < b) fn(a, b);
      },
      tbb::static_partitioner());
}

template <typename Block>
void for_blocks(std::size_t T, std::size_t r0, std::size_t r1, const Block& block) {
  if (T <= kTokenBlock) {
    for_row_pieces(r0, r1, kRowTile, [&](std::size_t a, std::size_t b) { block(a, b, 0, T); });
    return;
  }
  tbb::parallel_for(tbb::blocked_range2d<std::size_t>(r0, r1, 64, 0, T, kTokenBlock),
                    [&](const tbb::blocked_range2d<std::size_t>& b) {
                      block(b.rows().begin(), b.rows().end(), b.cols().begin(), b.cols().end());
                    });
}

}  // namespace

PreparedX prepare_x(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, std::size_t cols) {
  if (!wants_bf16_x(isa)) return {x, cols * sizeof(float), sizeof(float)};
  const std::size_t row_bytes = cols * x_bytes_per_col(isa);
  std::byte* xb = scratch.take<std::byte>(T * row_bytes);
  const auto rows = [&](std::size_t a, std::size_t b) {
    for (std::size_t t = a; t < b; ++t) prepare_row(isa, x + t * cols, cols, xb + t * row_bytes);
  };
  if (T * cols <= (std::size_t(1) << 16)) {
    rows(0, T);
  } else {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, T, 16),
                      [&](const tbb::blocked_range<std::size_t>& rg) { rows(rg.begin(), rg.end()); });
  }
  return {xb, row_bytes, sizeof(bf16_t)};
}

void linear_rows(Scratch& scratch, CpuIsa isa, const PreparedX& x, std::size_t T, const Matrix& w, std::size_t r0,
                 std::size_t r1, float* y, std::size_t ldy) {
  const DotsFn dots = w.dtype == DType::kBF16 ? dots_for(isa) : nullptr;
  if (dots) {
    for_blocks(T, r0, r1, [&](std::size_t a, std::size_t b, std::size_t t0, std::size_t t1) {
      bf16_block(dots, x, w, a, b, t0, t1, y, ldy);
    });
    return;
  }
  // Other dtypes (and the scalar path) read fp32 activations: prepare_x left them as they were
  // unless the path is kAvx512Bf16, in which case the caller prepared bf16x2; add the halves back.
  const float* xf = static_cast<const float*>(x.data);
  if (x.elem == sizeof(bf16_t)) {
    const std::size_t cols = std::size_t(w.cols);
    float* widened = scratch.floats(T * cols);
    for (std::size_t t = 0; t < T; ++t) {
      const auto* hi = reinterpret_cast<const bf16_t*>(x.row(t));
      for (std::size_t c = 0; c < cols; ++c) widened[t * cols + c] = bf16_to_f32(hi[c]) + bf16_to_f32(hi[cols + c]);
    }
    xf = widened;
  }
  X8Rows x8;
  const bool int8 = int8_dots_for(isa, w) != nullptr;
  if (int8) x8.quantize(scratch, xf, T, std::size_t(w.cols), std::size_t(w.cols), isa);
  for_blocks(T, r0, r1, [&](std::size_t a, std::size_t b, std::size_t t0, std::size_t t1) {
    widened_block(isa, xf, int8 ? &x8 : nullptr, w, a, b, t0, t1, y, ldy);
  });
}

bool amx_fits(CpuIsa isa, const Matrix& w) {
  return isa == CpuIsa::kAmxBf16 && w.dtype == DType::kBF16 && w.cols % kAmxK == 0 && w.rows >= int64_t(kAmxRows) &&
         w.row_bytes == std::size_t(w.cols) * sizeof(bf16_t) && amx_usable();
}

// Decoded weights on AMX (amx_rows: three products a k-step) for prefill-sized calls only: at a
// few tokens the weights are a stream the integer and fused kernels read faster than they decode.
bool amx_decoded_fits(CpuIsa isa, const Matrix& w, std::size_t T, bool by_size) {
  return by_size && isa == CpuIsa::kAmxBf16 && T >= kAmxDecodedTokens && w.dtype != DType::kBF16 && amx_takes(w) &&
         w.rows >= int64_t(kAmxRows) && amx_usable();
}

AmxPacked amx_pack(Scratch& scratch, const float* x, std::size_t T, std::size_t K, bool bf16_x) {
  const AmxPacked p = amx_alloc(scratch, T, K, amx_halves(bf16_x));
  const auto pack = [&](std::size_t b0, std::size_t b1) {
    const std::size_t t0 = b0 * kAmxTokens;
    amx_pack_tokens(
        p, b0, std::min(T, b1 * kAmxTokens) - t0, [&](std::size_t j) { return x + (t0 + j) * K; }, 0, K);
  };
  if (T * K <= (std::size_t(1) << 16))
    pack(0, p.blocks());
  else
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, p.blocks()),
                      [&](const auto& rg) { pack(rg.begin(), rg.end()); });
  return p;
}

void amx_linear(const AmxPacked& px, const Matrix& w, std::size_t rows, float* y, std::size_t ldy) {
  const std::size_t blocks = px.blocks();
  if (blocks == 1) {  // decode-sized: a weight stream, split like the dots path
    for_row_pieces(0, rows, 2 * kAmxRows,
                   [&](std::size_t r0, std::size_t r1) { amx_rows(w, r0, r1, px, 0, 1, px.tokens, y + r0, ldy); });
    return;
  }
  // Work items: 128 weight rows (a group of eight panels, 512 KB at 2,048 columns) x 8 token
  // blocks (1 MB of activations): both stay in L2 while every product of the item is formed.
  constexpr std::size_t kRows = 128, kBlocks = 8;
  tbb::parallel_for(tbb::blocked_range2d<std::size_t>(0, (rows + kRows - 1) / kRows, 1, 0, blocks, kBlocks),
                    [&](const tbb::blocked_range2d<std::size_t>& r) {
                      for (std::size_t i = r.rows().begin(); i < r.rows().end(); ++i) {
                        const std::size_t r0 = i * kRows, r1 = std::min(rows, r0 + kRows);
                        const std::size_t b0 = r.cols().begin();
                        amx_rows(w, r0, r1, px, b0, r.cols().end(), px.tokens - b0 * kAmxTokens,
                                 y + b0 * kAmxTokens * ldy + r0, ldy);
                      }
                    });
}

// Prefill-sized products on Q4_K / Q6_K without AMX (int8_tiles.h): the activations quantised and
// packed once, then items of 64 rows x 32 token blocks (a row's codes unpacked once an item).
void int8_tiles_linear(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, const Matrix& w, float* y,
                       std::size_t ldy) {
  const std::size_t cols = std::size_t(w.cols), R = std::size_t(w.rows);
  X8Rows x8;
  x8.quantize(scratch, x, T, cols, cols, isa);
  const X8Tiles tiles = x8_tiles(scratch, isa, x8, 0, T);
  const std::size_t blocks = tiles.blocks();
  constexpr std::size_t kItemRows = 64, kItemBlocks = 32;
  tbb::parallel_for(tbb::blocked_range2d<std::size_t>(0, (R + kItemRows - 1) / kItemRows, 1, 0, blocks, kItemBlocks),
                    [&](const tbb::blocked_range2d<std::size_t>& r) {
                      for (std::size_t i = r.rows().begin(); i < r.rows().end(); ++i) {
                        const std::size_t r0 = i * kItemRows, r1 = std::min(R, r0 + kItemRows);
                        const std::size_t b0 = r.cols().begin(), t0 = b0 * kTileTokens;
                        int8_tile_rows(isa, w, r0, r1, tiles, b0, r.cols().end(), T - t0, y + t0 * ldy + r0, ldy);
                      }
                    });
}

void linears(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, std::span<const Backend::LinearOut> outs,
             bool by_size, bool bf16_x) {
  // Products of one input with the same number of columns in one parallel region over their
  // concatenated rows, each output computed exactly as linear() computes it (the same kernel on the
  // same rows): all on AMX (whole 32-row pieces, decode-sized), all on the bf16 dots kernel (up to
  // kTokenBlock tokens), or, below the integer tiles' size (kInt8TileTokens, where linear() takes
  // no whole-matrix path), any mix of the bf16 dots, the integer block kernels (x quantised once)
  // and the other row kernels: a GGUF attention's q, k (Q4_K) and v (Q6_K), a DeltaNet's qkv, z, b
  // and a. One region instead of one per product: at decode each is a short weight stream.
  if (outs.empty()) return;
  const std::size_t K = std::size_t(outs[0].w->cols);
  const DotsFn kernel = dots_for(isa);
  const auto on_dots = [&](const Matrix& w) { return w.dtype == DType::kBF16 && kernel != nullptr; };
  bool amx = T <= kAmxTokens, dots = T <= kTokenBlock && kernel != nullptr, rows = T < kInt8TileTokens;
  bool any_int8 = false, any_bf16 = false, whole_tiles = true;
  std::size_t total = 0;
  for (const Backend::LinearOut& o : outs) {
    const bool on_amx = amx_fits(isa, *o.w), tile_rows = o.w->rows % int64_t(kRowTile) == 0;
    amx = amx && on_amx && o.w->rows % int64_t(2 * kAmxRows) == 0;
    dots = dots && !on_amx && on_dots(*o.w) && tile_rows;
    rows = rows && !on_amx;
    any_int8 = any_int8 || int8_dots_for(isa, *o.w) != nullptr;
    any_bf16 = any_bf16 || on_dots(*o.w);
    whole_tiles = whole_tiles && tile_rows;
    if (std::size_t(o.w->cols) != K) amx = dots = rows = false;
    total += std::size_t(o.w->rows);
  }
  rows = rows && (whole_tiles || !any_bf16);  // the dots kernel's row tiles as linear() forms them
  if (outs.size() < 2 || !(amx || dots || rows)) {
    for (const Backend::LinearOut& o : outs) linear(scratch, isa, x, T, *o.w, o.bias, o.y, by_size, bf16_x);
    return;
  }
  Scratch::Frame frame(scratch);
  const AmxPacked packed = amx ? amx_pack(scratch, x, T, K, bf16_x) : AmxPacked{};
  const PreparedX prepared = !amx && any_bf16 ? prepare_x(scratch, isa, x, T, K) : PreparedX{};
  X8Rows x8;
  if (!amx && any_int8) x8.quantize(scratch, x, T, K, K, isa);
  // Global row g of the concatenation -> (output, local row); a piece may span outputs.
  const std::size_t align = amx ? 2 * kAmxRows : any_bf16 ? kRowTile : 1;
  for_row_pieces(0, total, align, [&](std::size_t a, std::size_t b) {
    std::size_t base = 0;
    for (const Backend::LinearOut& o : outs) {
      const std::size_t R = std::size_t(o.w->rows), lo = std::max(a, base), hi = std::min(b, base + R);
      if (lo < hi) {
        if (amx) {
          amx_rows(*o.w, lo - base, hi - base, packed, 0, 1, T, o.y + (lo - base), R);
        } else if (on_dots(*o.w)) {
          bf16_block(kernel, prepared, *o.w, lo - base, hi - base, 0, T, o.y, R);
        } else {
          const X8Rows* q = int8_dots_for(isa, *o.w) ? &x8 : nullptr;
          widened_block(isa, x, q, *o.w, lo - base, hi - base, 0, T, o.y, R);
        }
      }
      base += R;
    }
  });
  for (const Backend::LinearOut& o : outs) add_bias(o.y, T, std::size_t(o.w->rows), o.bias);
}

void linear(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, const Matrix& w, const float* bias, float* y,
            bool by_size, bool bf16_x) {
  Scratch::Frame frame(scratch);
  if (amx_fits(isa, w) || amx_decoded_fits(isa, w, T, by_size)) {
    // Whole 16-row tiles on AMX; a remainder of rows (rare) on the AVX512-BF16 kernel, which is
    // chosen by row, never by T, so every output is still computed the same way at any T.
    const std::size_t R = std::size_t(w.rows), full = R / kAmxRows * kAmxRows;
    amx_linear(amx_pack(scratch, x, T, std::size_t(w.cols), bf16_x), w, full, y, R);
    if (full < R) linear_rows(scratch, isa, prepare_x(scratch, isa, x, T, std::size_t(w.cols)), T, w, full, R, y, R);
    add_bias(y, T, R, bias);
    return;
  }
  if (by_size && T >= kInt8TileTokens && int8_tiles_fit(isa, w)) {
    int8_tiles_linear(scratch, isa, x, T, w, y, std::size_t(w.rows));
    add_bias(y, T, std::size_t(w.rows), bias);
    return;
  }
  const bool bf16_kernel = w.dtype == DType::kBF16 && dots_for(isa);
  const PreparedX px = bf16_kernel ? prepare_x(scratch, isa, x, T, std::size_t(w.cols))
                                   : PreparedX{x, std::size_t(w.cols) * sizeof(float), sizeof(float)};
  const std::size_t R = std::size_t(w.rows);
  linear_rows(scratch, isa, px, T, w, 0, R, y, R);
  add_bias(y, T, R, bias);
}

}  // namespace ft::engine::cpu

#include "ops/cpu/linear.h"

#include <tbb/blocked_range2d.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

#include "ops/cpu/amx.h"
#include "ops/cpu/dots.h"

namespace ft::engine::cpu {
namespace {

// Rows per work item when the token count is small (decode): enough weight bytes per task that
// scheduling costs little, small enough that 16 threads all get work on a 512-row projection.
constexpr std::size_t kRowBlock = 32;
// Tokens per work item when it is large (prefill): a 64-row x 64-token block keeps both operands
// in L2 while every product of the block is formed.
constexpr std::size_t kTokenBlock = 64;

// fp32 dot product in a fixed order (eight lanes, then a fixed tree): the F16/F32 weight path.
float dot_f32(const float* a, const float* b, std::size_t n) {
  float acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float tail = 0.f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

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

// The generic path: widen a weight row, then fp32 dots against fp32 activations.
void widened_block(const float* x, const Matrix& w, std::size_t r0, std::size_t r1, std::size_t t0, std::size_t t1,
                   float* y, std::size_t ldy) {
  static tbb::enumerable_thread_specific<std::vector<float>> rows;
  std::vector<float>& row = rows.local();
  const std::size_t cols = std::size_t(w.cols);
  row.resize(cols);
  for (std::size_t r = r0; r < r1; ++r) {
    matrix_row_f32(w, int64_t(r), row.data());
    for (std::size_t t = t0; t < t1; ++t) y[t * ldy + r] = dot_f32(x + t * cols, row.data(), cols);
  }
}

template <typename Block>
void for_blocks(std::size_t T, std::size_t r0, std::size_t r1, const Block& block) {
  if (T <= kTokenBlock) {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(r0, r1, kRowBlock),
                      [&](const tbb::blocked_range<std::size_t>& rg) { block(rg.begin(), rg.end(), 0, T); });
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

void linear_rows(CpuIsa isa, const PreparedX& x, std::size_t T, const Matrix& w, std::size_t r0, std::size_t r1,
                 float* y, std::size_t ldy) {
  const DotsFn dots = w.dtype == DType::kBF16 ? dots_for(isa) : nullptr;
  if (dots) {
    for_blocks(T, r0, r1, [&](std::size_t a, std::size_t b, std::size_t t0, std::size_t t1) {
      bf16_block(dots, x, w, a, b, t0, t1, y, ldy);
    });
    return;
  }
  // Other dtypes (and the scalar path) read fp32 activations: prepare_x left them as they were
  // unless the path is kAvx512Bf16, in which case the caller prepared bf16x2; add the halves back.
  std::vector<float> widened;
  const float* xf = static_cast<const float*>(x.data);
  if (x.elem == sizeof(bf16_t)) {
    const std::size_t cols = std::size_t(w.cols);
    widened.resize(T * cols);
    for (std::size_t t = 0; t < T; ++t) {
      const auto* hi = reinterpret_cast<const bf16_t*>(x.row(t));
      for (std::size_t c = 0; c < cols; ++c) widened[t * cols + c] = bf16_to_f32(hi[c]) + bf16_to_f32(hi[cols + c]);
    }
    xf = widened.data();
  }
  for_blocks(T, r0, r1, [&](std::size_t a, std::size_t b, std::size_t t0, std::size_t t1) {
    widened_block(xf, w, a, b, t0, t1, y, ldy);
  });
}

bool amx_fits(CpuIsa isa, const Matrix& w) {
  return isa == CpuIsa::kAmxBf16 && w.dtype == DType::kBF16 && w.cols % kAmxK == 0 && w.rows >= int64_t(kAmxRows) &&
         w.row_bytes == std::size_t(w.cols) * sizeof(bf16_t) && amx_usable();
}

AmxPacked amx_pack(Scratch& scratch, const float* x, std::size_t T, std::size_t K) {
  const AmxPacked p = amx_alloc(scratch, T, K);
  const auto pack = [&](std::size_t a, std::size_t b) {
    for (std::size_t t = a; t < b; ++t) amx_pack_token(p, t, x + t * K);
  };
  if (T * K <= (std::size_t(1) << 16)) pack(0, T);
  else tbb::parallel_for(tbb::blocked_range<std::size_t>(0, T, 16), [&](const auto& rg) { pack(rg.begin(), rg.end()); });
  return p;
}

void amx_linear(const AmxPacked& px, const Matrix& w, std::size_t rows, float* y, std::size_t ldy) {
  const auto* base = reinterpret_cast<const bf16_t*>(w.data);
  const std::size_t K = std::size_t(w.cols), blocks = px.blocks();
  // Work items: 64 weight rows x 4 token blocks (both operands of an item stay in L2).
  constexpr std::size_t kRows = 64, kBlocks = 4;
  tbb::parallel_for(tbb::blocked_range2d<std::size_t>(0, (rows + kRows - 1) / kRows, 1, 0, blocks, kBlocks),
                    [&](const tbb::blocked_range2d<std::size_t>& r) {
                      for (std::size_t i = r.rows().begin(); i < r.rows().end(); ++i) {
                        const std::size_t r0 = i * kRows, r1 = std::min(rows, r0 + kRows);
                        const std::size_t b0 = r.cols().begin();
                        amx_rows(base, K, r0, r1, px, b0, r.cols().end(), px.tokens - b0 * kAmxTokens,
                                 y + b0 * kAmxTokens * ldy + r0, ldy);
                      }
                    });
}

void linear(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, const Matrix& w, const float* bias,
            float* y) {
  Scratch::Frame frame(scratch);
  if (amx_fits(isa, w)) {
    // Whole 16-row tiles on AMX; a remainder of rows (rare) on the AVX512-BF16 kernel, which is
    // chosen by row, never by T, so every output is still computed the same way at any T.
    const std::size_t R = std::size_t(w.rows), full = R / kAmxRows * kAmxRows;
    amx_linear(amx_pack(scratch, x, T, std::size_t(w.cols)), w, full, y, R);
    if (full < R) linear_rows(isa, prepare_x(scratch, isa, x, T, std::size_t(w.cols)), T, w, full, R, y, R);
    if (bias) {
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t r = 0; r < R; ++r) y[t * R + r] += bias[r];
    }
    return;
  }
  const bool bf16_kernel = w.dtype == DType::kBF16 && dots_for(isa);
  const PreparedX px = bf16_kernel ? prepare_x(scratch, isa, x, T, std::size_t(w.cols))
                                   : PreparedX{x, std::size_t(w.cols) * sizeof(float), sizeof(float)};
  const std::size_t R = std::size_t(w.rows);
  linear_rows(isa, px, T, w, 0, R, y, R);
  if (bias) {
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t r = 0; r < R; ++r) y[t * R + r] += bias[r];
  }
}

}  // namespace ft::engine::cpu

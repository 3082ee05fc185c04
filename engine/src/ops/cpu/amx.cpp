#include "ops/cpu/amx.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

#include "ops/cpu/dequant_rows.h"
#include "ops/cpu/simd.h"

namespace ft::engine::cpu {
namespace {

#if FT_X86
// The palette-1 configuration every AMX caller loads: all eight tiles 16 rows x 64 bytes (which
// tile holds what is each kernel's choice).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

TileConfig make_config() {
  TileConfig c;
  for (int i = 0; i < 8; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  return c;
}

FT_SIMD_BEGIN
// Weight tiles are read from "panels": a 16-row weight tile's rows copied so that the 16 x 32
// slice of each k-step is one contiguous 1 KB block. Loaded straight from the matrix, a tile's
// rows lie a whole row (often exactly 4 KB) apart, all in the same L1 set, and every tile load
// misses; from a panel it is 16 consecutive lines. The copy reads each row front to back once.
//
// A 2,048-column row is one 4 KiB page, and the hardware's streams stop at page edges, so each row
// began cold: the copy asks for the row two ahead line by line as it goes (the rows after the
// panel's last are the next panel's first; a prefetch past the matrix is harmless). The prefill's
// experts, read from memory, took 10% less time (docs/perf-notes.md).
FT_TARGET_AMX void pack_panel(const bf16_t* w, std::size_t row_elems, std::size_t K, bf16_t* panel) {
  constexpr std::size_t kAhead = 2;  // rows
  for (std::size_t r = 0; r < kAmxRows; ++r) {
    const bf16_t* src = w + r * row_elems;
    // (an address, not a pointer into the matrix: it may lie past the end)
    const std::uintptr_t next = reinterpret_cast<std::uintptr_t>(src) + kAhead * row_elems * sizeof(bf16_t);
    for (std::size_t k = 0; k < K; k += kAmxK) {
      _mm_prefetch(reinterpret_cast<const char*>(next + k * sizeof(bf16_t)), _MM_HINT_T0);
      _mm512_store_si512(panel + k * kAmxRows + r * kAmxK, _mm512_loadu_si512(src + k));
    }
  }
}

// 1 or 2 weight tiles (panels a0, a1) against one token block. Lo: the block has low halves (bf16x2),
// a second product a k-step. Split: the weights are hi + lo panels (w0, w1 the lo ones), one
// product more a k-step (against the block's high halves).
template <int Tiles, bool Split, bool Lo>
FT_TARGET_AMX void tile_pass(const bf16_t* a0, const bf16_t* a1, const bf16_t* w0, const bf16_t* w1, std::size_t K,
                             const bf16_t* hi, const bf16_t* lo, float* c_out /* [Tiles][16][16] */) {
  _tile_zero(0);
  if constexpr (Tiles == 2) _tile_zero(1);
  for (std::size_t k = 0; k < K; k += kAmxK) {
    _tile_loadd(2, a0 + k * kAmxRows, 64);
    if constexpr (Tiles == 2) _tile_loadd(3, a1 + k * kAmxRows, 64);
    _tile_loadd(4, hi + (k / 2) * 32, 64);
    if constexpr (Lo) _tile_loadd(5, lo + (k / 2) * 32, 64);
    _tile_dpbf16ps(0, 2, 4);
    if constexpr (Lo) _tile_dpbf16ps(0, 2, 5);
    if constexpr (Tiles == 2) {
      _tile_dpbf16ps(1, 3, 4);
      if constexpr (Lo) _tile_dpbf16ps(1, 3, 5);
    }
    if constexpr (Split) {
      _tile_loadd(2, w0 + k * kAmxRows, 64);
      if constexpr (Tiles == 2) _tile_loadd(3, w1 + k * kAmxRows, 64);
      _tile_dpbf16ps(0, 2, 4);
      if constexpr (Tiles == 2) _tile_dpbf16ps(1, 3, 4);
    }
  }
  _tile_stored(0, c_out, 64);
  if constexpr (Tiles == 2) _tile_stored(1, c_out + 256, 64);
}

// quad_pass's steps on its tile registers: weight tiles into 4 and 5; then a block pair's B tiles
// into 6 and 7 and the four products C[2r + b] += A[r] B[b].
FT_TARGET_AMX inline void load_weights(const bf16_t* a0, const bf16_t* a1) {
  _tile_loadd(4, a0, 64);
  _tile_loadd(5, a1, 64);
}
FT_TARGET_AMX inline void meet_blocks(const bf16_t* b0, const bf16_t* b1) {
  _tile_loadd(6, b0, 64);
  _tile_loadd(7, b1, 64);
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// Two weight tiles x two token blocks: four independent accumulators (C0..3 = row tile r x block b
// at 2r + b), so the products run at the units' throughput rather than one chain's latency.
// Lo: the blocks' low halves meet the weights too (8 products a k-step). Split: the weights' lo
// panels w0, w1 meet the blocks' high halves as well (4 more).
template <bool Split, bool Lo>
FT_TARGET_AMX void quad_pass(const bf16_t* a0, const bf16_t* a1, const bf16_t* w0, const bf16_t* w1, std::size_t K,
                             const bf16_t* hi0, const bf16_t* lo0, const bf16_t* hi1, const bf16_t* lo1,
                             float* c_out /* [4][256] */) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (std::size_t k = 0; k < K; k += kAmxK) {
    const std::size_t at = k * kAmxRows, bt = (k / 2) * 32;
    load_weights(a0 + at, a1 + at);
    meet_blocks(hi0 + bt, hi1 + bt);
    if constexpr (Lo) meet_blocks(lo0 + bt, lo1 + bt);
    if constexpr (Split) {
      load_weights(w0 + at, w1 + at);
      meet_blocks(hi0 + bt, hi1 + bt);
    }
  }
  _tile_stored(0, c_out, 64);
  _tile_stored(1, c_out + 256, 64);
  _tile_stored(2, c_out + 512, 64);
  _tile_stored(3, c_out + 768, 64);
}

// 16 rows of W from row r0, decoded to the reference's fp32 values (decode_row) and split into bf16
// hi and lo panels laid out as pack_panel lays out a bf16 one. `row` holds K floats.
FT_TARGET_AMX void decode_panel(const Matrix& w, std::size_t r0, std::size_t K, float* row, bf16_t* hi, bf16_t* lo) {
  for (std::size_t r = 0; r < kAmxRows; ++r) {
    decode_row(CpuIsa::kAmxBf16, w, int64_t(r0 + r), row);
    for (std::size_t k = 0; k < K; k += kAmxK) {
      __m512i h, l;
      bf16x2_split32(_mm512_loadu_ps(row + k), _mm512_loadu_ps(row + k + 16), h, l);
      _mm512_store_si512(hi + k * kAmxRows + r * kAmxK, h);
      _mm512_store_si512(lo + k * kAmxRows + r * kAmxK, l);
    }
  }
}

// y[j * ldy + i] = tile[i * 16 + j] for tokens j < nt: the C tile ([weight row][token]) transposed
// in registers, then a row of 16 floats a token. Written element by element it cost as much as a
// quarter of a 768-column product's tile work (measured on the Xeon host: `bench gemm` 2.9 -> 4.1
// TFLOP/s at 16 threads, docs/perf-notes.md).
FT_TARGET_AMX void put_transposed(const float* tile, std::size_t nt, float* y, std::size_t ldy) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(tile + 16 * i);
  transpose16x16(r);
  for (std::size_t j = 0; j < nt; ++j) _mm512_storeu_si512(y + j * ldy, r[j]);
}

// Every AMX user here shares one configuration, so a thread loads it once (LDTILECFG is slow and
// zeroes the tiles; the kernel keeps tile state across context switches).
FT_TARGET_AMX void load_config() {
  static const TileConfig config = make_config();
  thread_local bool loaded = false;
  if (loaded) return;
  _tile_loadconfig(&config);
  loaded = true;
}
FT_SIMD_END
#endif

}  // namespace

void amx_load_tile_config() {
#if FT_X86
  load_config();
#endif
}

bool amx_usable() {
#if FT_X86
  static const bool usable = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
        !__builtin_cpu_supports("avx512bf16"))
      return false;
    // Linux hands out the tile state (8 KB per thread) only on request: ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA. Without it the first tile instruction faults.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

AmxPacked amx_alloc(Scratch& scratch, std::size_t tokens, std::size_t K, std::size_t halves) {
  AmxPacked p;
  p.tokens = tokens;
  p.K = K;
  p.halves = halves;
  // Not zeroed: a token column of C depends on its own B column only, so the unused token slots of
  // the last block produce outputs that are dropped and touch nothing else.
  p.data = scratch.take<bf16_t>(p.blocks() * p.block_elems());
  return p;
}

namespace {

void pack_scalar(const AmxPacked& p, std::size_t t, std::size_t c0, const float* x, std::size_t n) {
  bf16_t* block = p.block(t / kAmxTokens);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = c0 + i, at = (c / 2) * 32 + 2 * (t % kAmxTokens) + (c % 2);
    const bf16_t hi = f32_to_bf16(x[i]);
    block[at] = hi;
    if (p.halves == 2) block[p.K * kAmxTokens + at] = f32_to_bf16(x[i] - bf16_to_f32(hi));
  }
}

#if FT_X86
FT_SIMD_BEGIN

// 32 columns of 16 tokens: each token's 16 (even, odd) pairs, rounded to high and low halves, then
// transposed so that a pair's 16 tokens are one 64-byte row of the block.
FT_TARGET_AMX void pack_block_avx512(const AmxPacked& p, std::size_t b, const float* const* rows, std::size_t count,
                                     std::size_t c0, std::size_t n) {
  auto* block = reinterpret_cast<__m512i*>(p.block(b));
  __m512i* lo_block = block + p.K / 2;  // K * 16 bf16 = K / 2 rows of 64 bytes
  std::size_t i = 0;
  for (; i + 32 <= n && p.halves == 1; i += 32) {  // bf16: the high halves alone
    __m512i hi[16];
    for (std::size_t j = 0; j < 16; ++j) {
      const float* x = rows[j < count ? j : 0] + i;
      hi[j] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
    }
    transpose16x16(hi);
    const std::size_t row0 = (c0 + i) / 2;
    for (std::size_t k = 0; k < 16; ++k) _mm512_storeu_si512(block + row0 + k, hi[k]);
  }
  for (; i + 32 <= n; i += 32) {
    __m512i hi[16], lo[16];
    for (std::size_t j = 0; j < 16; ++j) {
      const float* x = rows[j < count ? j : 0] + i;
      bf16x2_split32(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16), hi[j], lo[j]);
    }
    transpose16x16(hi);
    transpose16x16(lo);
    const std::size_t row0 = (c0 + i) / 2;
    for (std::size_t k = 0; k < 16; ++k) {
      _mm512_storeu_si512(block + row0 + k, hi[k]);
      _mm512_storeu_si512(lo_block + row0 + k, lo[k]);
    }
  }
  // A last 16 columns (n is even, and a multiple of 32 for every caller today) element by element.
  if (i < n) {
    for (std::size_t j = 0; j < kAmxTokens; ++j)
      pack_scalar(p, kAmxTokens * b + j, c0 + i, rows[j < count ? j : 0] + i, n - i);
  }
}
FT_SIMD_END
#endif

}  // namespace

void amx_pack_block(const AmxPacked& p, std::size_t b, const float* const* rows, std::size_t count, std::size_t c0,
                    std::size_t n) {
#if FT_X86
  if (amx_usable()) return pack_block_avx512(p, b, rows, count, c0, n);
#endif
  for (std::size_t j = 0; j < kAmxTokens; ++j) pack_scalar(p, kAmxTokens * b + j, c0, rows[j < count ? j : 0], n);
}

bool amx_takes(const Matrix& w) {
  if (w.cols % int64_t(kAmxK) != 0) return false;
  if (w.dtype == DType::kBF16) return w.row_bytes % sizeof(bf16_t) == 0;
  return w.dtype == DType::kF16 || dtype_is_block(w.dtype);
}

void amx_rows(const Matrix& w, std::size_t r0, std::size_t r1, const AmxPacked& x, std::size_t b0, std::size_t b1,
              std::size_t valid, float* y, std::size_t ldy) {
#if FT_X86
  amx_load_tile_config();
  alignas(64) float c[4 * 256];
  // C tile `tile` (16 weight rows from row r, the 16 tokens of block b) into y.
  const auto put = [&](const float* tile, std::size_t r, std::size_t b) {
    const std::size_t j0 = (b - b0) * kAmxTokens;
    if (j0 >= valid) return;
    put_transposed(tile, std::min(kAmxTokens, valid - j0), y + j0 * ldy + (r - r0), ldy);
  };
  const auto block_hi = [&](std::size_t b) { return x.block(b); };
  const auto block_lo = [&](std::size_t b) { return x.block_lo(b); };
  // Up to kGroup weight-tile panels (16 x K each), per thread, 64-byte aligned; decoded weights
  // take a second set for their low halves. A group of weight tiles is packed once; then every
  // token block pair meets every tile pair of the group, so a B tile (activations, the bigger
  // stream at prefill sizes) is reused by kGroup tiles from L2. One token block (decode): the
  // weight stream, a tile packed and used at once.
  constexpr std::size_t kGroup = 8;
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<bf16_t[], Free> panels;
  thread_local std::unique_ptr<float[], Free> row;  // a decoded row
  thread_local std::size_t panel_k = 0;
  if (panel_k < x.K) {
    panels.reset(static_cast<bf16_t*>(std::aligned_alloc(64, 2 * kGroup * kAmxRows * x.K * sizeof(bf16_t))));
    row.reset(static_cast<float*>(std::aligned_alloc(64, x.K * sizeof(float))));
    panel_k = x.K;
  }
  const std::size_t K = x.K, row_elems = w.row_bytes / sizeof(bf16_t);
  const auto panel = [&](std::size_t i) { return panels.get() + i * kAmxRows * K; };
  const auto lo_panel = [&](std::size_t i) { return panels.get() + (kGroup + i) * kAmxRows * K; };
  const auto* bf16 = reinterpret_cast<const bf16_t*>(w.data);
  const std::size_t group = b1 - b0 > 1 ? kGroup : 1;
  // The passes over a group's panels, with (Split) or without the weights' low halves, with (Lo) or
  // without the activations'.
  const auto passes = [&](auto split_tag, auto lo_tag) {
    constexpr bool Split = decltype(split_tag)::value, Lo = decltype(lo_tag)::value;
    const auto lo = [&](std::size_t i) { return Split ? lo_panel(i) : nullptr; };
    for (std::size_t g0 = r0; g0 < r1; g0 += group * kAmxRows) {
      const std::size_t tiles = std::min(group, (r1 - g0) / kAmxRows);
      for (std::size_t i = 0; i < tiles; ++i) {
        if constexpr (Split) {
          decode_panel(w, g0 + i * kAmxRows, K, row.get(), panel(i), lo_panel(i));
        } else {
          pack_panel(bf16 + (g0 + i * kAmxRows) * row_elems, row_elems, K, panel(i));
        }
      }
      for (std::size_t b = b0; b < b1; b += 2) {
        const bool two_blocks = b + 1 < b1;
        for (std::size_t i = 0; i < tiles; i += 2) {
          const std::size_t r = g0 + i * kAmxRows;
          if (i + 1 < tiles && two_blocks) {
            quad_pass<Split, Lo>(panel(i), panel(i + 1), lo(i), lo(i + 1), K, block_hi(b), block_lo(b), block_hi(b + 1),
                                 block_lo(b + 1), c);
            put(c, r, b);
            put(c + 256, r, b + 1);
            put(c + 512, r + kAmxRows, b);
            put(c + 768, r + kAmxRows, b + 1);
          } else if (i + 1 < tiles) {
            tile_pass<2, Split, Lo>(panel(i), panel(i + 1), lo(i), lo(i + 1), K, block_hi(b), block_lo(b), c);
            put(c, r, b);
            put(c + 256, r + kAmxRows, b);
          } else {
            for (std::size_t bb = b; bb < std::min(b + 2, b1); ++bb) {
              tile_pass<1, Split, Lo>(panel(i), nullptr, lo(i), nullptr, K, block_hi(bb), block_lo(bb), c);
              put(c, r, bb);
            }
          }
        }
      }
    }
  };
  const bool split = w.dtype != DType::kBF16;
  if (x.halves == 2) {
    split ? passes(std::true_type{}, std::true_type{}) : passes(std::false_type{}, std::true_type{});
  } else {
    split ? passes(std::true_type{}, std::false_type{}) : passes(std::false_type{}, std::false_type{});
  }
#else
  (void)w, (void)r0, (void)r1, (void)x, (void)b0, (void)b1, (void)valid, (void)y, (void)ldy;
#endif
}

}  // namespace ft::engine::cpu

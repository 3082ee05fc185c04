#include "ops/cpu/int8_tiles.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>

#include "ft/engine/bf16.h"
#include "ops/block_fields.h"
#include "ops/cpu/simd.h"

namespace ft::engine::cpu {

namespace {

constexpr std::size_t kSuper = 256;  // values per K-quant super-block
constexpr std::size_t kRows = 4;     // weight rows per kernel call (their accumulators: 12 vectors)

// The packed planes of block b: quad k (values 4k .. 4k + 3) of its 16 tokens at row k.
std::int8_t* plane_block(std::int8_t* plane, std::size_t b, std::size_t cols) { return plane + b * cols * kTileTokens; }

// Up to kRows weight rows unpacked for the kernel: codes as unsigned bytes in value order, and per
// sub-block of S values the scale and the offset of value = scale * code - offset.
struct RowGroup {
  std::size_t rows = 0;
  std::uint8_t* codes[kRows] = {};
  float* scale[kRows] = {};
  float* offset[kRows] = {};
};

#if FT_X86
FT_SIMD_BEGIN
// A Q4_K super-block's 128 nibble bytes as 256 codes in value order: piece p's 32 bytes hold values
// 64p .. 64p + 31 (low nibbles) and 64p + 32 .. 64p + 63 (high).
FT_TARGET_AVX2 void unpack_nibbles(const std::uint8_t* q, std::uint8_t* c) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int p = 0; p < 4; ++p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * p));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 64 * p), _mm256_and_si256(v, low));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 64 * p + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
  }
}

// A Q6_K super-block's low bits (ql, 128 bytes) and top bits (qh, 64) as 256 codes in value order.
// Per half (128 values: 64 ql bytes, 32 qh bytes), for l < 32: value l is ql[l]'s low nibble under
// qh[l]'s bits 0-1; 32 + l, ql[32 + l]'s low nibble, bits 2-3; 64 + l, ql[l]'s high nibble, bits
// 4-5; 96 + l, ql[32 + l]'s high nibble, bits 6-7.
FT_TARGET_AVX2 void unpack_q6_codes(const std::uint8_t* ql, const std::uint8_t* qh, std::uint8_t* c) {
  const __m256i low = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32, c += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
    __m256i* out = reinterpret_cast<__m256i*>(c);  // (a lambda would not inherit this function's target)
    _mm256_storeu_si256(out, _mm256_or_si256(_mm256_and_si256(a, low), _mm256_and_si256(_mm256_slli_epi16(q, 4), top)));
    _mm256_storeu_si256(out + 1,
                        _mm256_or_si256(_mm256_and_si256(b, low), _mm256_and_si256(_mm256_slli_epi16(q, 2), top)));
    _mm256_storeu_si256(out + 2,
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low), _mm256_and_si256(q, top)));
    _mm256_storeu_si256(out + 3, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low),
                                                 _mm256_and_si256(_mm256_srli_epi16(q, 2), top)));
  }
}
FT_SIMD_END

// A Q4_K / Q5_K super-block's 8 sub-blocks: scale d sc_j and offset dmin m_j (as the reference
// rounds them).
void k_scales(const std::uint8_t* block, float* scale, float* offset) {
  const float d = f16_at(block), dmin = f16_at(block + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, block + 4, sc, m);
    scale[j] = d * float(sc);
    offset[j] = dmin * float(m);
  }
}

// Q4_K (ggml's layout, dequantize_q4_k): value = (d sc_j) q - (dmin m_j) over sub-blocks of 32.
void unpack_q4_k(const std::uint8_t* row, std::size_t cols, std::uint8_t* codes, float* scale, float* offset) {
  for (std::size_t i = 0; i < cols / kSuper; ++i, row += 144) {
    k_scales(row, scale + 8 * i, offset + 8 * i);
    unpack_nibbles(row + 16, codes + i * kSuper);
  }
}

// Q6_K (dequantize_q6_k): value = (d sc_k) (q - 32) over sub-blocks of 16.
void unpack_q6_k(const std::uint8_t* row, std::size_t cols, std::uint8_t* codes, float* scale, float* offset) {
  for (std::size_t i = 0; i < cols / kSuper; ++i, row += 210) {
    const std::uint8_t* ql = row;
    const std::uint8_t* qh = row + 128;
    const auto* sc = reinterpret_cast<const std::int8_t*>(row + 192);
    const float d = f16_at(row + 208);
    for (int k = 0; k < 16; ++k) {
      scale[16 * i + std::size_t(k)] = d * float(sc[k]);
      offset[16 * i + std::size_t(k)] = 32.f * scale[16 * i + std::size_t(k)];
    }
    unpack_q6_codes(ql, qh, codes + i * kSuper);
  }
}

// A 32-value block's 16 nibble bytes (Q4_0, Q4_1) as codes: the low nibbles, then the high.
void block_nibbles(const std::uint8_t* q, std::uint8_t* c) {
  for (int l = 0; l < 16; ++l) {
    c[l] = q[l] & 0xF;
    c[16 + l] = q[l] >> 4;
  }
}

// Q4_0 (dequantize: (q - 8) d): 32 values a block, its 16 bytes' low nibbles then high.
void unpack_q4_0(const std::uint8_t* row, std::size_t cols, std::uint8_t* codes, float* scale, float* offset) {
  for (std::size_t i = 0; i < cols / 32; ++i, row += 18) {
    scale[i] = f16_at(row);
    offset[i] = 8.f * scale[i];
    block_nibbles(row + 2, codes + 32 * i);
  }
}

// Q8_0 (q d, q signed): the codes as unsigned bytes q + 128, the 128 d taken off through the sums.
void unpack_q8_0(const std::uint8_t* row, std::size_t cols, std::uint8_t* codes, float* scale, float* offset) {
  for (std::size_t i = 0; i < cols / 32; ++i, row += 34) {
    scale[i] = f16_at(row);
    offset[i] = 128.f * scale[i];
    for (int l = 0; l < 32; ++l) codes[32 * i + std::size_t(l)] = std::uint8_t(row[2 + l] ^ 0x80);
  }
}

// Q4_1 (q d + m): codes 0..15, the offset -m.
void unpack_q4_1(const std::uint8_t* row, std::size_t cols, std::uint8_t* codes, float* scale, float* offset) {
  for (std::size_t i = 0; i < cols / 32; ++i, row += 20) {
    scale[i] = f16_at(row);
    offset[i] = -f16_at(row + 2);
    block_nibbles(row + 4, codes + 32 * i);
  }
}

// Q5_K (dequantize_q5_k): Q4_K's codes with a fifth bit (bit j of qh byte l for sub-block j).
void unpack_q5_k(const std::uint8_t* row, std::size_t cols, std::uint8_t* codes, float* scale, float* offset) {
  for (std::size_t i = 0; i < cols / kSuper; ++i, row += 176) {
    k_scales(row, scale + 8 * i, offset + 8 * i);
    for (int j = 0; j < 8; ++j) {
      const std::uint8_t* q = row + 48 + 32 * (j / 2);
      for (int l = 0; l < 32; ++l)
        codes[i * kSuper + 32 * std::size_t(j) + std::size_t(l)] =
            std::uint8_t(((j % 2 ? q[l] >> 4 : q[l]) & 0xF) | (((row[16 + l] >> j) & 1) << 4));
    }
  }
}

// A row's unpacker by dtype (int8_tiles_fit's types).
using Unpack = void (*)(const std::uint8_t* row, std::size_t cols, std::uint8_t* codes, float* scale, float* offset);
Unpack unpacker(DType dtype) {
  switch (dtype) {
    case DType::kQ4_K:
      return unpack_q4_k;
    case DType::kQ5_K:
      return unpack_q5_k;
    case DType::kQ6_K:
      return unpack_q6_k;
    case DType::kQ4_0:
      return unpack_q4_0;
    case DType::kQ4_1:
      return unpack_q4_1;
    default:
      return unpack_q8_0;
  }
}

// Where token block b's packed activations and a row group's codes and scales are, for the kernels
// below; rows past g.rows repeat the last one (their sums are dropped).
template <std::size_t S>
struct BlockInputs {
  const std::int8_t *xh, *xl;
  const float *sums, *d1, *d2;
  const std::uint8_t* codes[kRows];
  const float* scale[kRows];
  const float* offset[kRows];
  BlockInputs(const RowGroup& g, const X8Tiles& x, std::size_t b)
      : xh(plane_block(x.hi, b, x.cols)),
        xl(plane_block(x.lo, b, x.cols)),
        sums((S == 16 ? x.s16 : x.s32) + b * (x.cols / S) * kTileTokens),
        d1(x.d1 + b * (x.cols / kSuper) * kTileTokens),
        d2(x.d2 + b * (x.cols / kSuper) * kTileTokens) {
    for (std::size_t r = 0; r < kRows; ++r) {
      const std::size_t rr = std::min(r, g.rows - 1);
      codes[r] = g.codes[rr];
      scale[r] = g.scale[rr];
      offset[r] = g.offset[rr];
    }
  }
};

#define FT_TARGET_VNNI_TILES __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
FT_SIMD_BEGIN

// Rows g.rows (<= kRows) against token block b: the accumulators hold the 16 tokens in their lanes.
template <std::size_t S>
FT_TARGET_VNNI_TILES void tile_block(const RowGroup& g, const X8Tiles& x, std::size_t b, float* out /* [kRows][16] */) {
  constexpr std::size_t kQuads = S / 4, kSubs = kSuper / S;
  const std::size_t cols = x.cols;
  const BlockInputs<S> in(g, x, b);
  __m512 acc[kRows];
  for (std::size_t r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (std::size_t s = 0; s < cols / kSuper; ++s) {
    const __m512 v1 = _mm512_loadu_ps(in.d1 + s * kTileTokens), v2 = _mm512_loadu_ps(in.d2 + s * kTileTokens);
    for (std::size_t u = 0; u < kSubs; ++u) {
      const std::size_t sub = s * kSubs + u, k0 = sub * kQuads;
      __m512i ih[kRows], il[kRows];
      for (std::size_t r = 0; r < kRows; ++r) ih[r] = il[r] = _mm512_setzero_si512();
      for (std::size_t q = 0; q < kQuads; ++q) {
        const std::size_t k = k0 + q;
        const __m512i h = _mm512_loadu_si512(in.xh + k * 64), l = _mm512_loadu_si512(in.xl + k * 64);
        for (std::size_t r = 0; r < kRows; ++r) {
          std::int32_t word;
          std::memcpy(&word, in.codes[r] + 4 * k, 4);
          const __m512i c = _mm512_set1_epi32(word);
          ih[r] = _mm512_dpbusd_epi32(ih[r], c, h);
          il[r] = _mm512_dpbusd_epi32(il[r], c, l);
        }
      }
      const __m512 sv = _mm512_loadu_ps(in.sums + sub * kTileTokens);
      for (std::size_t r = 0; r < kRows; ++r) {
        const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ih[r]), v1, _mm512_mul_ps(_mm512_cvtepi32_ps(il[r]), v2));
        acc[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(in.scale[r][sub]), acc[r]);
        acc[r] = _mm512_fnmadd_ps(_mm512_set1_ps(in.offset[r][sub]), sv, acc[r]);
      }
    }
  }
  for (std::size_t r = 0; r < kRows; ++r) _mm512_storeu_ps(out + r * kTileTokens, acc[r]);
}

#define FT_TARGET_VNNI256_TILES __attribute__((target("avx2,fma,f16c,avxvnni")))

// The same on 256-bit vectors (AVX-VNNI, CPUs without AVX-512): a block's 16 tokens in two passes
// of 8 (16 registers hold 4 rows' accumulators for 8 tokens, not for 16).
template <std::size_t S>
FT_TARGET_VNNI256_TILES void tile_block256(const RowGroup& g, const X8Tiles& x, std::size_t b,
                                           float* out /* [kRows][16] */) {
  constexpr std::size_t kQuads = S / 4, kSubs = kSuper / S;
  const std::size_t cols = x.cols;
  const BlockInputs<S> in(g, x, b);
  for (std::size_t half = 0; half < 2; ++half) {
    const std::size_t lane0 = 8 * half;
    __m256 acc[kRows];
    for (std::size_t r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
    for (std::size_t s = 0; s < cols / kSuper; ++s) {
      const __m256 v1 = _mm256_loadu_ps(in.d1 + s * kTileTokens + lane0),
                   v2 = _mm256_loadu_ps(in.d2 + s * kTileTokens + lane0);
      for (std::size_t u = 0; u < kSubs; ++u) {
        const std::size_t sub = s * kSubs + u, k0 = sub * kQuads;
        __m256i ih[kRows], il[kRows];
        for (std::size_t r = 0; r < kRows; ++r) ih[r] = il[r] = _mm256_setzero_si256();
        for (std::size_t q = 0; q < kQuads; ++q) {
          const std::size_t k = k0 + q;
          const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.xh + k * 64 + 4 * lane0));
          const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.xl + k * 64 + 4 * lane0));
          for (std::size_t r = 0; r < kRows; ++r) {
            std::int32_t word;
            std::memcpy(&word, in.codes[r] + 4 * k, 4);
            const __m256i c = _mm256_set1_epi32(word);
            ih[r] = _mm256_dpbusd_avx_epi32(ih[r], c, h);
            il[r] = _mm256_dpbusd_avx_epi32(il[r], c, l);
          }
        }
        const __m256 sv = _mm256_loadu_ps(in.sums + sub * kTileTokens + lane0);
        for (std::size_t r = 0; r < kRows; ++r) {
          const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih[r]), v1, _mm256_mul_ps(_mm256_cvtepi32_ps(il[r]), v2));
          acc[r] = _mm256_fmadd_ps(t, _mm256_set1_ps(in.scale[r][sub]), acc[r]);
          acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(in.offset[r][sub]), sv, acc[r]);
        }
      }
    }
    for (std::size_t r = 0; r < kRows; ++r) _mm256_storeu_ps(out + r * kTileTokens + lane0, acc[r]);
  }
}

// A block's planes packed dword by dword (no AVX-512 to transpose with).
void pack_plane_scalar(const std::int8_t* const* rows, std::size_t cols, std::int8_t* dst) {
  for (std::size_t k = 0; k < cols / 4; ++k)
    for (std::size_t j = 0; j < kTileTokens; ++j) std::memcpy(dst + k * 64 + 4 * j, rows[j] + 4 * k, 4);
}

// 16 tokens' 64 bytes of one plane from value c0 on, turned so that row i holds quad c0 / 4 + i of
// every token (a 16 x 16 transpose of dwords).
FT_TARGET_VNNI_TILES void pack_plane(const std::int8_t* const* rows, std::size_t c0, std::int8_t* dst) {
  __m512i r[16];
  for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_si512(rows[j] + c0);
  transpose16x16(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + (c0 / 4 + std::size_t(i)) * 64, r[i]);
}
FT_SIMD_END
#endif

template <std::size_t S>
void rows_with(bool wide, const Matrix& w, std::size_t r0, std::size_t r1, const X8Tiles& x, std::size_t b0,
               std::size_t b1, std::size_t valid, float* y, std::size_t ldy) {
#if FT_X86
  const std::size_t cols = std::size_t(w.cols), subs = cols / S;
  const Unpack unpack = unpacker(w.dtype);
  thread_local std::vector<std::uint8_t> code_buf;
  thread_local std::vector<float> scale_buf;
  code_buf.resize(kRows * cols);
  scale_buf.resize(2 * kRows * subs);
  alignas(64) float out[kRows * kTileTokens];
  for (std::size_t r = r0; r < r1; r += kRows) {
    RowGroup g;
    g.rows = std::min(kRows, r1 - r);
    for (std::size_t i = 0; i < g.rows; ++i) {
      g.codes[i] = code_buf.data() + i * cols;
      g.scale[i] = scale_buf.data() + 2 * i * subs;
      g.offset[i] = g.scale[i] + subs;
      const auto* row = reinterpret_cast<const std::uint8_t*>(w.row(int64_t(r + i)));
      unpack(row, cols, g.codes[i], g.scale[i], g.offset[i]);
    }
    for (std::size_t b = b0; b < b1; ++b) {
      const std::size_t j0 = (b - b0) * kTileTokens;
      if (j0 >= valid) break;
      if (wide) {
        tile_block<S>(g, x, b, out);
      } else {
        tile_block256<S>(g, x, b, out);
      }
      const std::size_t nt = std::min(kTileTokens, valid - j0);
      for (std::size_t i = 0; i < g.rows; ++i)
        for (std::size_t j = 0; j < nt; ++j) y[(j0 + j) * ldy + (r + i - r0)] = out[i * kTileTokens + j];
    }
  }
#else
  (void)w, (void)r0, (void)r1, (void)x, (void)b0, (void)b1, (void)valid, (void)y, (void)ldy;
#endif
}

}  // namespace

X8Tiles x8_tiles_alloc(Scratch& scratch, std::size_t blocks, std::size_t cols) {
  X8Tiles t;
  t.tokens = blocks * kTileTokens;
  t.cols = cols;
  t.hi = scratch.take<std::int8_t>(blocks * cols * kTileTokens);
  t.lo = scratch.take<std::int8_t>(blocks * cols * kTileTokens);
  t.d1 = scratch.floats(blocks * (cols / kSuper) * kTileTokens);
  t.d2 = scratch.floats(blocks * (cols / kSuper) * kTileTokens);
  t.s16 = scratch.floats(blocks * (cols / 16) * kTileTokens);
  t.s32 = scratch.floats(blocks * (cols / 32) * kTileTokens);
  return t;
}

void x8_tiles_pack(CpuIsa isa, const X8Rows& x, std::size_t t0, std::size_t n, const X8Tiles& tiles, std::size_t b0,
                   const std::size_t* rows) {
  const bool wide = int8_vnni512(isa);
#if FT_X86
  const std::size_t cols = x.cols();
  for (std::size_t j0 = 0; j0 < n; j0 += kTileTokens) {
    const std::size_t b = b0 + j0 / kTileTokens, count = std::min(kTileTokens, n - j0);
    const std::int8_t* hi[kTileTokens];
    const std::int8_t* lo[kTileTokens];
    for (std::size_t j = 0; j < kTileTokens; ++j) {
      const std::size_t at = t0 + j0 + (j < count ? j : 0), t = rows ? rows[at] : at;
      hi[j] = x.hi(t);
      lo[j] = x.lo(t);
      for (std::size_t s = 0; s < cols / kSuper; ++s) {
        tiles.d1[(b * (cols / kSuper) + s) * kTileTokens + j] = x.scales(t)[2 * s];
        tiles.d2[(b * (cols / kSuper) + s) * kTileTokens + j] = x.scales(t)[2 * s + 1];
      }
      for (std::size_t g = 0; g < cols / 16; ++g) tiles.s16[(b * (cols / 16) + g) * kTileTokens + j] = x.sums16(t)[g];
      for (std::size_t g = 0; g < cols / 32; ++g) tiles.s32[(b * (cols / 32) + g) * kTileTokens + j] = x.sums32(t)[g];
    }
    if (!wide) {
      pack_plane_scalar(hi, cols, plane_block(tiles.hi, b, cols));
      pack_plane_scalar(lo, cols, plane_block(tiles.lo, b, cols));
      continue;
    }
    for (std::size_t c0 = 0; c0 < cols; c0 += 64) {
      pack_plane(hi, c0, plane_block(tiles.hi, b, cols));
      pack_plane(lo, c0, plane_block(tiles.lo, b, cols));
    }
  }
#else
  (void)isa, (void)x, (void)t0, (void)n, (void)tiles, (void)b0, (void)rows;
#endif
}

X8Tiles x8_tiles(Scratch& scratch, CpuIsa isa, const X8Rows& x, std::size_t t0, std::size_t n) {
  const std::size_t blocks = (n + kTileTokens - 1) / kTileTokens;
  X8Tiles t = x8_tiles_alloc(scratch, blocks, x.cols());
  t.tokens = n;
  tbb::parallel_for(std::size_t(0), blocks, [&](std::size_t b) {
    x8_tiles_pack(isa, x, t0 + b * kTileTokens, std::min(kTileTokens, n - b * kTileTokens), t, b);
  });
  return t;
}

bool int8_tiles_fit(CpuIsa isa, const Matrix& w) {
  const bool dtype = w.dtype == DType::kQ4_K || w.dtype == DType::kQ5_K || w.dtype == DType::kQ6_K ||
                     w.dtype == DType::kQ4_0 || w.dtype == DType::kQ4_1 || w.dtype == DType::kQ8_0;
  return dtype && w.cols % int64_t(kX8Block) == 0 && (int8_vnni512(isa) || int8_vnni256(isa));
}

void int8_tile_rows(CpuIsa isa, const Matrix& w, std::size_t r0, std::size_t r1, const X8Tiles& x, std::size_t b0,
                    std::size_t b1, std::size_t valid, float* y, std::size_t ldy) {
  const bool wide = int8_vnni512(isa);
  if (w.dtype == DType::kQ6_K) return rows_with<16>(wide, w, r0, r1, x, b0, b1, valid, y, ldy);
  rows_with<32>(wide, w, r0, r1, x, b0, b1, valid, y, ldy);
}

}  // namespace ft::engine::cpu

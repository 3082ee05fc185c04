// CPU expert kernels: scalar reference, AVX2+FMA, AVX-512F and AVX512-BF16 paths, picked at run
// time. Only the functions marked FT_TARGET_* use the wider ISAs; everything else (the drivers, the
// reference, the dispatch) is baseline x86-64, so the binary runs on any x86-64 CPU.
//
// Shape of the fast paths: a "dots" kernel computes, for a tile of kRowTile weight rows and up to
// kTokenChunk tokens, every row-token dot product. Inside it, token tiles are the inner loop, so the
// tile's rows (kRowTile * cols * 2 bytes: 16 KiB at hidden 2048) stay in L1 while all tokens use
// them; each weight row is read from memory once per call. tbb::parallel_for splits the row tiles.
#include "ft/engine/expert_kernels.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#define FT_X86 1
#include <immintrin.h>
#endif

namespace ft::engine {

// ---- Names and CPU detection ---------------------------------------------------------------------

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Bf16: return "avx512bf16";
  }
  return "unknown";
}

bool parse_cpu_isa(const char* name, CpuIsa* out) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16}) {
    if (std::strcmp(name, cpu_isa_name(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

bool cpu_isa_supported(CpuIsa isa) {
#if FT_X86
  // libgcc's feature bits also check that the OS saves the YMM/ZMM state (XCR0).
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  switch (isa) {
    case CpuIsa::kScalar: return true;
    case CpuIsa::kAvx2: return avx2;
    case CpuIsa::kAvx512: return avx512;
    case CpuIsa::kAvx512Bf16: return avx512 && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == CpuIsa::kScalar;
#endif
}

CpuIsa best_cpu_isa() {
  static const CpuIsa kBest = [] {
    // FT_CPU_ISA=<name> caps the choice (e.g. to compare paths inside the server).
    if (const char* env = std::getenv("FT_CPU_ISA")) {
      CpuIsa want;
      if (parse_cpu_isa(env, &want) && cpu_isa_supported(want)) return want;
    }
    for (CpuIsa isa : {CpuIsa::kAvx512Bf16, CpuIsa::kAvx512, CpuIsa::kAvx2}) {
      if (cpu_isa_supported(isa)) return isa;
    }
    return CpuIsa::kScalar;
  }();
  return kBest;
}

// ---- Reference ---------------------------------------------------------------------------------

namespace {

float silu(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace

namespace ref {

void matmul_bf16(const float* x, const bf16_t* w, float* y, std::size_t tokens, std::size_t rows,
                 std::size_t cols) {
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (std::size_t c = 0; c < cols; ++c) acc += x[t * cols + c] * bf16_to_f32(w[r * cols + c]);
      y[t * rows + r] = acc;
    }
  }
}

void expert_swiglu(const ExpertWeights& w, const float* x, const float* routing_weight, float* out,
                   std::size_t tokens) {
  const std::size_t H = w.hidden, I = w.inter;
  std::vector<float> gate(tokens * I), up(tokens * I), down(tokens * H);
  matmul_bf16(x, w.gate, gate.data(), tokens, I, H);
  matmul_bf16(x, w.up, up.data(), tokens, I, H);
  for (std::size_t i = 0; i < tokens * I; ++i) gate[i] = silu(gate[i]) * up[i];
  matmul_bf16(gate.data(), w.down, down.data(), tokens, H, I);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t r = 0; r < H; ++r) out[t * H + r] += routing_weight[t] * down[t * H + r];
  }
}

}  // namespace ref

// ---- ISA kernels ------------------------------------------------------------------------------

namespace {

constexpr std::size_t kRowTile = 4;       // weight rows per tile (and per TBB work item unit)
constexpr std::size_t kTokenChunk = 64;   // tokens per dots() call; bounds the stack buffers

// out[r * nt + t] = sum_c W[r, c] * X[t, c] for r < kRowTile, t < nt (<= kTokenChunk).
// w points at the tile's first row (row stride cols); rows >= nr repeat the last valid row and
// their outputs are to be ignored. x is fp32 (or bf16 for the BF16 path) with row stride ldx.
using DotsFn = void (*)(const bf16_t* w, std::size_t nr, const void* x, std::size_t ldx,
                        std::size_t nt, std::size_t cols, float* out);

[[maybe_unused]] inline void row_pointers(const bf16_t* w, std::size_t nr, std::size_t cols,
                                          const bf16_t** rows) {
  for (std::size_t r = 0; r < kRowTile; ++r) rows[r] = w + std::min(r, nr - 1) * cols;
}

#if FT_X86
#define FT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define FT_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl")))
#define FT_TARGET_AVX512BF16 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")))

// GCC 12's AVX-512 intrinsics initialise their "undefined" pass-through operands from themselves
// (`__m512 __Y = __Y;`), which -Wuninitialized reports once inlined (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// -- AVX2 + FMA: 8 columns a step, weights widened bf16 -> f32 by a 16-bit left shift.

FT_TARGET_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

FT_TARGET_AVX2 inline __m256 load8_bf16(const bf16_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

// 4 rows x TT tokens = 4*TT accumulators; TT <= 2 keeps them, the x vectors and a weight vector
// within the 16 YMM registers.
template <int TT>
FT_TARGET_AVX2 void tile_avx2(const bf16_t* const* w, const float* const* x, std::size_t cols,
                              float* out, std::size_t ldo) {
  __m256 acc[kRowTile][TT];
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  std::size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm256_loadu_ps(x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m256 wv = load8_bf16(w[r] + c);
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (std::size_t r = 0; r < kRowTile; ++r) {
    for (int t = 0; t < TT; ++t) {
      float s = hsum256(acc[r][t]);
      for (std::size_t k = c; k < cols; ++k) s += bf16_to_f32(w[r][k]) * x[t][k];
      out[r * ldo + t] = s;
    }
  }
}

FT_TARGET_AVX2 void dots_avx2(const bf16_t* w, std::size_t nr, const void* xv, std::size_t ldx,
                              std::size_t nt, std::size_t cols, float* out) {
  const float* x = static_cast<const float*>(xv);
  const bf16_t* wr[kRowTile];
  row_pointers(w, nr, cols, wr);
  std::size_t t0 = 0;
  for (; t0 + 2 <= nt; t0 += 2) {
    const float* xr[2] = {x + t0 * ldx, x + (t0 + 1) * ldx};
    tile_avx2<2>(wr, xr, cols, out + t0, nt);
  }
  if (t0 < nt) {
    const float* xr[1] = {x + t0 * ldx};
    tile_avx2<1>(wr, xr, cols, out + t0, nt);
  }
}

// -- AVX-512F: 16 columns a step, same widening; masked loads for the tail.

FT_TARGET_AVX512 inline float hsum512(__m512 v) {
  // (_mm512_reduce_add_ps trips a -Wuninitialized false positive in GCC 12's headers.)
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

FT_TARGET_AVX512 inline __m512 widen16_bf16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// 4 rows x TT (<= 4) tokens: 16 accumulators + 4 x vectors + weights fit the 32 ZMM registers.
template <int TT>
FT_TARGET_AVX512 void tile_avx512(const bf16_t* const* w, const float* const* x, std::size_t cols,
                                  float* out, std::size_t ldo) {
  __m512 acc[kRowTile][TT];
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  std::size_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm512_loadu_ps(x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512 wv = widen16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + c)));
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (c < cols) {
    const __mmask16 m = __mmask16((1u << (cols - c)) - 1u);
    __m512 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512 wv = widen16_bf16(_mm256_maskz_loadu_epi16(m, w[r] + c));
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) out[r * ldo + t] = hsum512(acc[r][t]);
}

// -- AVX512-BF16: 32 columns a step; VDPBF16PS multiplies bf16 pairs exactly and adds them into
// fp32 lanes. x must already be bf16 (see expert_swiglu / matmul_bf16).

template <int TT>
FT_TARGET_AVX512BF16 void tile_avx512bf16(const bf16_t* const* w, const bf16_t* const* x,
                                          std::size_t cols, float* out, std::size_t ldo) {
  __m512 acc[kRowTile][TT];
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  std::size_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    __m512bh xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = (__m512bh)_mm512_loadu_si512(x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(w[r] + c);
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  if (c < cols) {  // zeroed lanes pair 0 with 0, so an odd tail is fine
    const __mmask32 m = __mmask32((1u << (cols - c)) - 1u);
    __m512bh xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w[r] + c);
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) out[r * ldo + t] = hsum512(acc[r][t]);
}

// Shared token-tiling loop for the two AVX-512 paths (4 tokens a tile, then the remainder).
template <typename X, void (*T4)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t),
          void (*T3)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t),
          void (*T2)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t),
          void (*T1)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t)>
void dots_by4(const bf16_t* w, std::size_t nr, const void* xv, std::size_t ldx, std::size_t nt,
              std::size_t cols, float* out) {
  const X* x = static_cast<const X*>(xv);
  const bf16_t* wr[kRowTile];
  row_pointers(w, nr, cols, wr);
  for (std::size_t t0 = 0; t0 < nt; t0 += 4) {
    const X* xr[4];
    const std::size_t n = std::min<std::size_t>(4, nt - t0);
    for (std::size_t i = 0; i < n; ++i) xr[i] = x + (t0 + i) * ldx;
    switch (n) {
      case 4: T4(wr, xr, cols, out + t0, nt); break;
      case 3: T3(wr, xr, cols, out + t0, nt); break;
      case 2: T2(wr, xr, cols, out + t0, nt); break;
      default: T1(wr, xr, cols, out + t0, nt); break;
    }
  }
}

constexpr DotsFn kDotsAvx512 = dots_by4<float, tile_avx512<4>, tile_avx512<3>, tile_avx512<2>, tile_avx512<1>>;
constexpr DotsFn kDotsAvx512Bf16 =
    dots_by4<bf16_t, tile_avx512bf16<4>, tile_avx512bf16<3>, tile_avx512bf16<2>, tile_avx512bf16<1>>;
#pragma GCC diagnostic pop
#endif  // FT_X86

// The dots kernel of a path and whether it wants bf16 activations. Null for kScalar.
DotsFn dots_for(CpuIsa isa) {
#if FT_X86
  switch (isa) {
    case CpuIsa::kAvx2: return dots_avx2;
    case CpuIsa::kAvx512: return kDotsAvx512;
    case CpuIsa::kAvx512Bf16: return kDotsAvx512Bf16;
    case CpuIsa::kScalar: break;
  }
#else
  (void)isa;
#endif
  return nullptr;
}

void to_bf16(const float* src, bf16_t* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

// Runs body(row0, nrows) over the row tiles of [0, rows), split across the current TBB arena.
template <typename Body>
void for_row_tiles(std::size_t rows, const Body& body) {
  const std::size_t tiles = (rows + kRowTile - 1) / kRowTile;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, tiles, 2), [&](const tbb::blocked_range<std::size_t>& rg) {
    for (std::size_t i = rg.begin(); i != rg.end(); ++i) {
      const std::size_t r0 = i * kRowTile;
      body(r0, std::min(kRowTile, rows - r0));
    }
  });
}

// A path the caller asked for but this CPU cannot run falls back to the best one it can.
CpuIsa usable(CpuIsa isa) { return cpu_isa_supported(isa) ? isa : best_cpu_isa(); }

}  // namespace

// ---- Public entry points -----------------------------------------------------------------------

void matmul_bf16(const float* x, const bf16_t* w, float* y, std::size_t tokens, std::size_t rows,
                 std::size_t cols, CpuIsa isa) {
  isa = usable(isa);
  const DotsFn dots = dots_for(isa);
  if (!dots || tokens == 0 || rows == 0) {
    ref::matmul_bf16(x, w, y, tokens, rows, cols);
    return;
  }
  const void* xin = x;
  std::vector<bf16_t> xb;
  if (isa == CpuIsa::kAvx512Bf16) {
    xb.resize(tokens * cols);
    to_bf16(x, xb.data(), xb.size());
    xin = xb.data();
  }
  const std::size_t esize = isa == CpuIsa::kAvx512Bf16 ? sizeof(bf16_t) : sizeof(float);
  for_row_tiles(rows, [&](std::size_t r0, std::size_t nr) {
    float buf[kRowTile * kTokenChunk];
    for (std::size_t t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const std::size_t nt = std::min(kTokenChunk, tokens - t0);
      dots(w + r0 * cols, nr, static_cast<const char*>(xin) + t0 * cols * esize, cols, nt, cols, buf);
      for (std::size_t r = 0; r < nr; ++r)
        for (std::size_t t = 0; t < nt; ++t) y[(t0 + t) * rows + r0 + r] = buf[r * nt + t];
    }
  });
}

void expert_swiglu(const ExpertWeights& w, const float* x, const float* routing_weight, float* out,
                   std::size_t tokens, CpuIsa isa, ExpertScratch* scratch) {
  isa = usable(isa);
  const DotsFn dots = dots_for(isa);
  if (!dots || tokens == 0) {
    ref::expert_swiglu(w, x, routing_weight, out, tokens);
    return;
  }
  const std::size_t H = w.hidden, I = w.inter;
  const bool bf16_x = isa == CpuIsa::kAvx512Bf16;
  const std::size_t esize = bf16_x ? sizeof(bf16_t) : sizeof(float);
  ExpertScratch local;
  ExpertScratch& s = scratch ? *scratch : local;
  const void* xin = x;
  if (bf16_x) {
    s.x_bf16.resize(tokens * H);
    s.h_bf16.resize(tokens * I);
    to_bf16(x, s.x_bf16.data(), tokens * H);
    xin = s.x_bf16.data();
  } else {
    s.h.resize(tokens * I);
  }

  // Pass 1: gate and up rows of the same tile together, then h = silu(gate) * up.
  for_row_tiles(I, [&](std::size_t r0, std::size_t nr) {
    float g[kRowTile * kTokenChunk], u[kRowTile * kTokenChunk];
    for (std::size_t t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const std::size_t nt = std::min(kTokenChunk, tokens - t0);
      const void* xt = static_cast<const char*>(xin) + t0 * H * esize;
      dots(w.gate + r0 * H, nr, xt, H, nt, H, g);
      dots(w.up + r0 * H, nr, xt, H, nt, H, u);
      for (std::size_t r = 0; r < nr; ++r) {
        for (std::size_t t = 0; t < nt; ++t) {
          const float h = silu(g[r * nt + t]) * u[r * nt + t];
          const std::size_t i = (t0 + t) * I + r0 + r;
          if (bf16_x) {
            s.h_bf16[i] = f32_to_bf16(h);
          } else {
            s.h[i] = h;
          }
        }
      }
    }
  });

  // Pass 2: out[t] += routing_weight[t] * down(h[t]).
  const void* hin = bf16_x ? static_cast<const void*>(s.h_bf16.data()) : s.h.data();
  for_row_tiles(H, [&](std::size_t r0, std::size_t nr) {
    float d[kRowTile * kTokenChunk];
    for (std::size_t t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const std::size_t nt = std::min(kTokenChunk, tokens - t0);
      dots(w.down + r0 * I, nr, static_cast<const char*>(hin) + t0 * I * esize, I, nt, I, d);
      for (std::size_t r = 0; r < nr; ++r)
        for (std::size_t t = 0; t < nt; ++t)
          out[(t0 + t) * H + r0 + r] += routing_weight[t0 + t] * d[r * nt + t];
    }
  });
}

}  // namespace ft::engine

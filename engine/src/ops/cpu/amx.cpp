#include "ops/cpu/amx.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/simd.h"

namespace ft::engine::cpu {
namespace {

#if FT_X86
// The palette-1 configuration every AMX caller loads: tiles 0-1 accumulate C (two 16-row weight
// blocks), 2-3 hold A (those weight rows), 4-5 hold B (the tokens' high and low halves).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

TileConfig make_config() {
  TileConfig c;
  for (int i = 0; i < 6; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  return c;
}

#define FT_TARGET_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

FT_SIMD_BEGIN
// One or two 16-row weight blocks against one token block.
template <int Blocks>
FT_TARGET_AMX void tile_pass(const bf16_t* w, std::size_t row_elems, std::size_t K, const bf16_t* hi,
                             const bf16_t* lo, float* c_out /* [Blocks][16][16] */) {
  const std::size_t stride = row_elems * sizeof(bf16_t);
  _tile_zero(0);
  if constexpr (Blocks == 2) _tile_zero(1);
  for (std::size_t k = 0; k < K; k += kAmxK) {
    _tile_loadd(2, w + k, stride);
    if constexpr (Blocks == 2) _tile_loadd(3, w + kAmxRows * row_elems + k, stride);
    _tile_loadd(4, hi + (k / 2) * 32, 64);
    _tile_loadd(5, lo + (k / 2) * 32, 64);
    _tile_dpbf16ps(0, 2, 4);
    _tile_dpbf16ps(0, 2, 5);
    if constexpr (Blocks == 2) {
      _tile_dpbf16ps(1, 3, 4);
      _tile_dpbf16ps(1, 3, 5);
    }
  }
  _tile_stored(0, c_out, 64);
  if constexpr (Blocks == 2) _tile_stored(1, c_out + 256, 64);
}

FT_TARGET_AMX void load_config() {
  static const TileConfig config = make_config();
  _tile_loadconfig(&config);
}
FT_SIMD_END
#endif

}  // namespace

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

AmxPacked amx_alloc(Scratch& scratch, std::size_t tokens, std::size_t K) {
  AmxPacked p;
  p.tokens = tokens;
  p.K = K;
  p.data = scratch.take<bf16_t>(p.blocks() * p.block_elems());
  std::memset(p.data, 0, p.blocks() * p.block_elems() * sizeof(bf16_t));
  return p;
}

void amx_pack_value(const AmxPacked& p, std::size_t t, std::size_t c, float v) {
  bf16_t* block = p.block(t / kAmxTokens);
  const std::size_t at = (c / 2) * 32 + 2 * (t % kAmxTokens) + (c % 2);
  const bf16_t hi = f32_to_bf16(v);
  block[at] = hi;
  block[p.K * kAmxTokens + at] = f32_to_bf16(v - bf16_to_f32(hi));
}

void amx_pack_token(const AmxPacked& p, std::size_t t, const float* x) {
  for (std::size_t c = 0; c < p.K; ++c) amx_pack_value(p, t, c, x[c]);
}

void amx_rows(const bf16_t* w, std::size_t row_elems, std::size_t r0, std::size_t r1, const AmxPacked& x,
              std::size_t b0, std::size_t b1, std::size_t valid, float* y, std::size_t ldy) {
#if FT_X86
  load_config();
  alignas(64) float c[2 * 256];
  for (std::size_t r = r0; r < r1;) {
    const int blocks = r + 2 * kAmxRows <= r1 ? 2 : 1;
    const bf16_t* wr = w + r * row_elems;
    for (std::size_t b = b0; b < b1; ++b) {
      const bf16_t* hi = x.block(b);
      const bf16_t* lo = hi + x.K * kAmxTokens;
      if (blocks == 2) tile_pass<2>(wr, row_elems, x.K, hi, lo, c);
      else tile_pass<1>(wr, row_elems, x.K, hi, lo, c);
      const std::size_t j0 = (b - b0) * kAmxTokens;
      if (j0 >= valid) break;
      const std::size_t nt = std::min(kAmxTokens, valid - j0);
      for (int blk = 0; blk < blocks; ++blk)
        for (std::size_t i = 0; i < kAmxRows; ++i)
          for (std::size_t j = 0; j < nt; ++j) y[(j0 + j) * ldy + (r - r0) + blk * kAmxRows + i] = c[blk * 256 + i * 16 + j];
    }
    r += std::size_t(blocks) * kAmxRows;
  }
#else
  (void)w, (void)row_elems, (void)r0, (void)r1, (void)x, (void)b0, (void)b1, (void)valid, (void)y, (void)ldy;
#endif
}

}  // namespace ft::engine::cpu

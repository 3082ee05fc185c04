// CPU expert kernels (`bench expert`) and the ISA detection every CPU kernel dispatches on.
//
// Shape of the fast paths: a "dots" kernel (dots.h) computes, for a tile of kRowTile weight rows and up to
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

#include "ops/cpu/amx.h"
#include "ops/cpu/dots.h"
#include "ops/cpu/simd.h"

namespace ft::engine {

// ---- Names and CPU detection ---------------------------------------------------------------------

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Bf16: return "avx512bf16";
    case CpuIsa::kAmxBf16: return "amx";
  }
  return "unknown";
}

bool parse_cpu_isa(const char* name, CpuIsa* out) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmxBf16}) {
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
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  switch (isa) {
    case CpuIsa::kScalar: return true;
    case CpuIsa::kAvx2: return avx2;
    case CpuIsa::kAvx512: return avx512;
    case CpuIsa::kAvx512Bf16: return avx512 && __builtin_cpu_supports("avx512bf16");
    case CpuIsa::kAmxBf16: return cpu::amx_usable();
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
    // AVX-512 (bf16 weights widened, fp32 products) before AVX512-BF16: measured faster on the
    // same host for decode and for prefill (docs/perf-notes.md "CPU runtime").
    for (CpuIsa isa : {CpuIsa::kAmxBf16, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAvx2}) {
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

namespace {

using cpu::DotsFn;
using cpu::dots_for;
using cpu::kRowTile;
using cpu::kTokenChunk;
using cpu::usable;

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
  // Activations in the path's format (dots.h): fp32, or bf16x2 [hi | lo] per token.
  const std::size_t row_bytes = cols * cpu::x_bytes_per_col(isa), elem = cpu::wants_bf16_x(isa) ? 2 : 4;
  std::vector<std::byte> xb(tokens * row_bytes);
  for (std::size_t t = 0; t < tokens; ++t) cpu::prepare_row(isa, x + t * cols, cols, xb.data() + t * row_bytes);
  for_row_tiles(rows, [&](std::size_t r0, std::size_t nr) {
    float buf[kRowTile * kTokenChunk];
    for (std::size_t t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const std::size_t nt = std::min(kTokenChunk, tokens - t0);
      dots(w + r0 * cols, nr, xb.data() + t0 * row_bytes, row_bytes / elem, nt, cols, buf);
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
  const bool bf16_x = cpu::wants_bf16_x(isa);
  const std::size_t per_col = cpu::x_bytes_per_col(isa), elem = bf16_x ? sizeof(bf16_t) : sizeof(float);
  ExpertScratch local;
  ExpertScratch& s = scratch ? *scratch : local;
  // Activations and h in the path's format (dots.h): fp32, or bf16x2 [hi | lo] per token.
  s.x.resize(tokens * H * per_col);
  s.h.resize(tokens * I * per_col);
  for (std::size_t t = 0; t < tokens; ++t) cpu::prepare_row(isa, x + t * H, H, s.x.data() + t * H * per_col);

  // Pass 1: gate and up rows of the same tile together, then h = silu(gate) * up.
  for_row_tiles(I, [&](std::size_t r0, std::size_t nr) {
    float g[kRowTile * kTokenChunk], u[kRowTile * kTokenChunk];
    for (std::size_t t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const std::size_t nt = std::min(kTokenChunk, tokens - t0);
      const void* xt = s.x.data() + t0 * H * per_col;
      dots(w.gate + r0 * H, nr, xt, H * per_col / elem, nt, H, g);
      dots(w.up + r0 * H, nr, xt, H * per_col / elem, nt, H, u);
      for (std::size_t r = 0; r < nr; ++r) {
        for (std::size_t t = 0; t < nt; ++t) {
          cpu::put_activation(isa, s.h.data() + (t0 + t) * I * per_col, I, r0 + r, silu(g[r * nt + t]) * u[r * nt + t]);
        }
      }
    }
  });

  // Pass 2: out[t] += routing_weight[t] * down(h[t]).
  for_row_tiles(H, [&](std::size_t r0, std::size_t nr) {
    float d[kRowTile * kTokenChunk];
    for (std::size_t t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const std::size_t nt = std::min(kTokenChunk, tokens - t0);
      dots(w.down + r0 * I, nr, s.h.data() + t0 * I * per_col, I * per_col / elem, nt, I, d);
      for (std::size_t r = 0; r < nr; ++r)
        for (std::size_t t = 0; t < nt; ++t)
          out[(t0 + t) * H + r0 + r] += routing_weight[t0 + t] * d[r * nt + t];
    }
  });
}

}  // namespace ft::engine

// CPU kernels for the MoE expert path: bf16 weights (HF row-major layout), fp32 activations, fp32
// accumulation. This is the CPU half of hybrid decode: experts that live in host memory are run
// here, so the kernels are built to stream weights at DRAM bandwidth.
//
// Layout (as in HF checkpoints, nn.Linear stores [out_features, in_features]):
//   gate_proj [inter, hidden], up_proj [inter, hidden], down_proj [hidden, inter]
//   out[t] += routing_weight[t] * down( silu(gate(x[t])) * up(x[t]) )
//
// Batching: the T tokens routed to one expert share one pass over its weights. Every weight row is
// brought from memory once per call and used for all T tokens while it is in L1 (row tiles x token
// tiles, token tiles innermost), so the DRAM traffic of a call is the expert's size whatever T is.
//
// ISA paths, chosen at run time (the rest of the build stays baseline x86-64):
//   kAvx512Bf16  AVX512-BF16 VDPBF16PS. Each activation is split into two bf16s, hi = bf16(x) and
//                lo = bf16(x - hi) ("bf16x2"), both multiplied exactly and summed in fp32, so a dot
//                product carries x to about 2^-16 relative instead of the 2^-9 of rounding x to one
//                bf16 (what llama.cpp and KTransformers do). The bound: |error| <= 2^-17 *
//                sum_i |w_i x_i| from the split plus fp32 summation.
//   kAvx512      AVX-512F(+BW/VL): bf16 weights widened to fp32 by a 16-bit shift, fp32 FMA. Same
//                numerics as the scalar reference up to summation order (<= cols * 2^-24 relative
//                to sum_i |w_i x_i|).
//   kAvx2        AVX2+FMA, same widening and numerics as kAvx512 with 8-wide vectors.
//   kScalar      the reference below.
// Threads: rows are split with tbb::parallel_for, so the caller's TBB arena (task_arena or
// global_control) decides the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ft/engine/bf16.h"

namespace ft::engine {

// kAmxBf16: the AVX512-BF16 path, plus AMX tiles for the matrix products whose shape fits them
// (the CPU backend's linear and MoE; see ops/cpu/amx.h).
enum class CpuIsa { kScalar, kAvx2, kAvx512, kAvx512Bf16, kAmxBf16 };

const char* cpu_isa_name(CpuIsa isa);           // "scalar", "avx2", "avx512", "avx512bf16", "amx"
bool parse_cpu_isa(const char* name, CpuIsa* out);  // the names above; false when unknown
bool cpu_isa_supported(CpuIsa isa);             // this CPU (and OS) can run the path
CpuIsa best_cpu_isa();                          // the fastest supported path (cached)

// One expert's weights, not owned. Rows are contiguous: row r of gate starts at gate + r * hidden.
struct ExpertWeights {
  const bf16_t* gate = nullptr;  // [inter, hidden]
  const bf16_t* up = nullptr;    // [inter, hidden]
  const bf16_t* down = nullptr;  // [hidden, inter]
  std::size_t hidden = 0;
  std::size_t inter = 0;
  std::size_t bytes() const { return 3 * hidden * inter * sizeof(bf16_t); }
};

// Reusable buffers for expert_swiglu, so the decode loop does not allocate. Grows as needed.
struct ExpertScratch {
  std::vector<std::byte> x;  // [T, hidden] activations in the path's format (fp32 or bf16x2)
  std::vector<std::byte> h;  // [T, inter] silu(gate) * up, same format
};

// y[t, r] = sum_c x[t, c] * W[r, c] for t < tokens, r < rows: y[T, rows] = x[T, cols] * W^T.
// x and y are dense row-major fp32; W is bf16 [rows, cols], row-major. Any pointer alignment.
void matmul_bf16(const float* x, const bf16_t* w, float* y, std::size_t tokens, std::size_t rows,
                 std::size_t cols, CpuIsa isa = best_cpu_isa());

// out[t, :] += routing_weight[t] * down(silu(gate(x[t])) * up(x[t])) for t < tokens.
// x: [tokens, hidden] fp32; out: [tokens, hidden] fp32, accumulated into (several experts add into
// the same rows); routing_weight: [tokens]. scratch may be null (then buffers are allocated).
void expert_swiglu(const ExpertWeights& w, const float* x, const float* routing_weight, float* out,
                   std::size_t tokens, CpuIsa isa = best_cpu_isa(), ExpertScratch* scratch = nullptr);

namespace ref {

// Plain loops, fp32 accumulation in column order; the definition the fast paths are tested against.
void matmul_bf16(const float* x, const bf16_t* w, float* y, std::size_t tokens, std::size_t rows,
                 std::size_t cols);

void expert_swiglu(const ExpertWeights& w, const float* x, const float* routing_weight, float* out,
                   std::size_t tokens);

}  // namespace ref

}  // namespace ft::engine

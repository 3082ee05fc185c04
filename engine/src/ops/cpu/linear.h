// The CPU backend's matrix products over weights in their stored dtype.
#pragma once

#include <cstddef>
#include <span>

#include "ft/engine/backend.h"
#include "ft/engine/expert_kernels.h"
#include "ft/engine/matrix.h"
#include "ft/engine/scratch.h"

namespace ft::engine::cpu {

// Activations as the dots kernels of `isa` read them (dots.h: bf16x2 for kAvx512Bf16, fp32
// otherwise). Lives in `scratch` (or is `x` itself).
struct PreparedX {
  const void* data = nullptr;
  std::size_t row_bytes = 0;  // bytes per token
  std::size_t elem = 0;       // bytes per stored element (the dots kernels' stride unit)
  const std::byte* row(std::size_t t) const { return static_cast<const std::byte*>(data) + t * row_bytes; }
  std::size_t ld() const { return row_bytes / elem; }
};
PreparedX prepare_x(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, std::size_t cols);

// `by_size` (the backend's default; off under BackendOptions::deterministic): a prefill-sized
// product on weights of another dtype than bf16 may take a kernel of its own (decoded AMX tiles),
// so that the bits of an output depend on the call's size. Without it every call on such weights
// takes the decode-sized kernels (integer planes, fused decoders), whatever its size.
// `bf16_x`: AMX products take their activations as bf16, not bf16x2 (amx.h).

// y[T, w.rows] = x[T, w.cols] w^T (+ bias). Weights BF16 (the fast kernels), block dtypes (GGUF,
// FP8, MXFP4, NVFP4: decoded as read), F16 or F32 (widened as read). With a given `isa` and
// `by_size` off, each output element is computed the same way whatever T is.
void linear(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, const Matrix& w, const float* bias, float* y,
            bool by_size = false, bool bf16_x = false);

// Backend::linears: every output's rows in one parallel region when T is decode-sized and the
// matrices share a path; otherwise linear() for each.
void linears(Scratch& scratch, CpuIsa isa, const float* x, std::size_t T, std::span<const Backend::LinearOut> outs,
             bool by_size = false, bool bf16_x = false);

// Whether `w` goes through the AMX tiles on this path (BF16, columns a multiple of 32, AMX usable).
bool amx_fits(CpuIsa isa, const Matrix& w);

// The same over prepared activations, into y with row stride ldy, for rows [r0, r1) of w.
// Its temporaries come from `scratch` (taken in the caller's frame).
void linear_rows(Scratch& scratch, CpuIsa isa, const PreparedX& x, std::size_t T, const Matrix& w, std::size_t r0,
                 std::size_t r1, float* y, std::size_t ldy);

}  // namespace ft::engine::cpu

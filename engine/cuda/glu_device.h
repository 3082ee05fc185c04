// The gated activations of the expert and MLP kernels, as device functions: silu(g) * u (SwiGLU),
// gelu_tanh(g) * u (GeGLU: Gemma) and the clamped GLU (gpt-oss, DeepSeek-V4), fp32 as the reference
// computes them (ref::silu, ref::gelu_tanh, ref::expert_glu), and an expert's biases around them
// (ExpertEpilogue). Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include "kernels.h"

namespace ft::engine::cuda {

__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// The GLU of an expert's gate and up products: GeGLU where `gelu`, else SwiGLU.
__device__ __forceinline__ float glu(float g, float u, bool gelu) {
  return (gelu ? gelu_tanh(g) : g / (1.f + expf(-g))) * u;
}

// ref::expert_glu: the epilogue's GLU of biased gate and up products.
__device__ __forceinline__ float expert_glu(const ExpertEpilogue& a, float g, float u) {
  if (a.gelu || !a.clamped) return glu(g, u, a.gelu);
  g = fminf(g, a.limit);
  u = fminf(fmaxf(u, -a.limit), a.limit);
  return (u + a.up_offset) * (g / (1.f + expf(-a.alpha * g)));
}

// Row `row` of h for `expert` from its gate and up products: their biases (none where `gate` is
// the zero expert's) and the GLU.
__device__ __forceinline__ float expert_h(const ExpertEpilogue& a, const std::byte* gate, int expert, int inter,
                                          int row, float g, float u) {
  if (a.gate_bias || a.up_bias) {
    if (gate != a.zero_gate) {
      const std::size_t at = std::size_t(expert) * std::size_t(inter) + std::size_t(row);
      if (a.gate_bias) g += a.gate_bias[at];
      if (a.up_bias) u += a.up_bias[at];
    }
  }
  return expert_glu(a, g, u);
}

// Row `row` of `expert`'s down bias (0 without one, or where `down` is the zero expert's).
__device__ __forceinline__ float expert_down_bias(const ExpertEpilogue& a, const std::byte* down, int expert,
                                                  int hidden, int row) {
  if (!a.down_bias || down == a.zero_down) return 0.f;
  return a.down_bias[std::size_t(expert) * std::size_t(hidden) + std::size_t(row)];
}

}  // namespace ft::engine::cuda

// The gated activations of the expert and MLP kernels, as device functions: silu(g) * u (SwiGLU)
// and gelu_tanh(g) * u (GeGLU: Gemma), fp32 as the reference computes them (ref::silu,
// ref::gelu_tanh). Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

namespace ft::engine::cuda {

__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// The GLU of an expert's gate and up products: GeGLU where `gelu`, else SwiGLU.
__device__ __forceinline__ float glu(float g, float u, bool gelu) {
  return (gelu ? gelu_tanh(g) : g / (1.f + expf(-g))) * u;
}

}  // namespace ft::engine::cuda

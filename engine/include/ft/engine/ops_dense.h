// CPU reference ops for the dense parts of a transformer: embedding lookup, the matmul every
// projection goes through, and the element-wise activations. fp32 in, fp32 out, fp32 accumulation.
// Like ops.h these are the readable definitions later CUDA/AVX kernels are checked against; the
// matmul is parallel over output rows (oneTBB) so a small model still runs in well under a second.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::engine::ref {

// out[t, :] = table[tokens[t], :] for t < T. Ids must be in [0, rows) (callers validate first).
void embedding(const float* table, std::size_t hidden, const int32_t* tokens, std::size_t T, float* out);

// nn.Linear: y[t, o] = sum_i x[t, i] * w[o, i] (+ bias[o]) for t < T, o < out.
// x [T, in], w [out, in] row-major (HF layout), bias [out] or null, y [T, out]; y may not alias x.
void linear(const float* x, const float* w, const float* bias, float* y, std::size_t T,
            std::size_t out, std::size_t in);

// torch semantics, fp32: sigmoid(x) = 1 / (1 + exp(-x)); silu(x) = x * sigmoid(x);
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (gelu(approximate="tanh"),
// HF's gelu_pytorch_tanh).
float sigmoid(float x);
float silu(float x);
float gelu_tanh(float x);

// out[i] = silu(gate[i]) * up[i] (the SwiGLU inner product). out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, std::size_t n);

// out[i] = gelu_tanh(gate[i]) * up[i] (the GeGLU inner product: Gemma). out may alias gate or up.
void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n);

// x[i] *= factor: Gemma's embedding scale (sqrt(hidden_size)) and its layers' layer_scalar.
void scale(float* x, std::size_t n, float factor);

// x[i] = cap * tanh(x[i] / cap): Gemma's final logit softcapping.
void softcap(float* x, std::size_t n, float cap);

// x[i] *= sigmoid(gate[i]): the output gate of gated attention and of the shared expert.
void mul_sigmoid(float* x, const float* gate, std::size_t n);

// Llama 4's MoE input: out[t, :] = x[t, :] * sigmoid(max_e logits[t, e]), the top-1 expert's
// router score (HF Llama4Router: sigmoid of the top logit, multiplied into the expert's input).
// logits [T, E]; out [T, width] may alias x.
void scale_by_top_sigmoid(const float* x, const float* logits, std::size_t T, std::size_t width, std::size_t E,
                          float* out);

// Llama 4's attention temperature on its layers without RoPE: row t of x [T, width] times
// log1p(floor((positions[t] + 1) / floor_scale)) * attn_scale + 1, in fp32 as HF computes it.
float attention_temperature_at(int64_t position, float floor_scale, float attn_scale);
void attention_temperature(float* x, std::size_t T, std::size_t width, const int64_t* positions, float floor_scale,
                           float attn_scale);

// y[i] += x[i]: residual connections.
void add_inplace(float* y, const float* x, std::size_t n);

// dst[r * dst_ld + c] = src[(r / repeat) * src_ld + c] for r < rows, c < width: moves a block of
// columns between row-major activations of other widths. MLA splits its projections with it and
// builds each head's key from a piece every head shares (repeat = heads); with src_ld 0 and
// repeat = rows it fills every row with one source row (zeros for padding).
void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                  std::size_t rows, std::size_t width);

}  // namespace ft::engine::ref

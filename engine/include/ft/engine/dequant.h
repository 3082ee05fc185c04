// The reference dequantisation of GGUF's block dtypes: plain scalar code, one function per type, the
// definition every faster kernel is tested against. Each equals ggml's dequantize_row_* (ggml-quants.c)
// and gguf-py's quants.dequantize bit for bit: scales converted exactly (f16 -> f32, E8M0 -> f32 as
// ggml_e8m0_to_fp32_half), then the same float operations in the same order. The products of these
// formats are exact (a few bits of code times an 11-bit scale), so an FMA would round `d * q - m`
// the same; dequant.cpp is compiled with -ffp-contract=off anyway, so equality never rests on that.
#pragma once

#include <cstddef>

#include "ft/engine/dtype.h"

namespace ft::engine {

// Each reads n / block_elems blocks at `blocks` (any alignment) and writes n floats; n must be a
// multiple of the type's block (32 or 256 values).
void dequantize_q8_0(const std::byte* blocks, float* out, std::size_t n);
void dequantize_q4_0(const std::byte* blocks, float* out, std::size_t n);
void dequantize_q4_1(const std::byte* blocks, float* out, std::size_t n);
void dequantize_q4_k(const std::byte* blocks, float* out, std::size_t n);
void dequantize_q5_k(const std::byte* blocks, float* out, std::size_t n);
void dequantize_q6_k(const std::byte* blocks, float* out, std::size_t n);
void dequantize_mxfp4(const std::byte* blocks, float* out, std::size_t n);
// Safetensors' FP8 and NVFP4 weights as repacked into row blocks (dtype.h), by the formats' own
// definitions (OCP FP8 E4M3; NVIDIA's NVFP4: E2M1 values, E4M3 scales per 16, an fp32 tensor scale).
void dequantize_f8_b128(const std::byte* blocks, float* out, std::size_t n);
void dequantize_nvfp4(const std::byte* blocks, float* out, std::size_t n);

// The function above for `dtype`; false (nothing written) for a dense dtype.
bool dequantize_row(DType dtype, const std::byte* blocks, float* out, std::size_t n);

}  // namespace ft::engine

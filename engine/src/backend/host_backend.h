// The data-movement ops every backend whose activations live in host memory does the same way
// (row gathers, copies out, column blocks, the gated-query split, qwen3_next's projection reorder,
// Llama 4's small row scalings, Gemma's GeGLU, scales and softcap, the clamped GLU of DeepSeek-V4's
// shared expert, its compressors' windows): written once for the reference and CPU backends.
#pragma once

#include <cstring>

#include "ft/engine/backend.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_dense.h"
#include "ft/engine/ops_moe.h"

namespace ft::engine {

class HostBackend : public Backend {
 public:
  void gather_rows(const float* src, std::span<const std::size_t> rows, std::size_t width, float* dst) override {
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::memcpy(dst + i * width, src + rows[i] * width, width * sizeof(float));
  }
  void to_host(const float* src, std::size_t n, float* dst) override { std::memcpy(dst, src, n * sizeof(float)); }
  void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                    std::size_t rows, std::size_t width) override {
    ref::copy_columns(src, src_ld, repeat, dst, dst_ld, rows, width);
  }
  void split_gated_query(const float* qg, std::size_t T, std::size_t heads, std::size_t head_dim, float* q,
                         float* gate) override {
    ref::split_gated_query(qg, T, heads, head_dim, q, gate);
  }
  void scale_by_top_sigmoid(const float* x, const float* logits, std::size_t T, std::size_t width, std::size_t E,
                            float* out) override {
    ref::scale_by_top_sigmoid(x, logits, T, width, E, out);
  }
  void attention_temperature(float* x, std::size_t T, std::size_t width, const int64_t* positions, float floor_scale,
                             float attn_scale) override {
    ref::attention_temperature(x, T, width, positions, floor_scale, attn_scale);
  }
  void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n) override {
    ref::gelu_tanh_mul(gate, up, out, n);
  }
  void scale(float* x, std::size_t n, float factor) override { ref::scale(x, n, factor); }
  void softcap(float* x, std::size_t n, float cap) override { ref::softcap(x, n, cap); }
  void deltanet_unfuse(const ref::DeltaNetDims& dims, const float* qkvz, const float* ba, std::size_t T, float* qkv,
                       float* z, float* b, float* a) override {
    ref::deltanet_unfuse(dims, qkvz, ba, T, qkv, z, b, a);
  }
  void expert_glu(const ref::ExpertGlu& glu, const float* gate, const float* up, float* out, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) out[i] = ref::expert_glu(glu, gate[i], up[i]);
  }
  // A window's entry is a few hundred values pooled once the window closes: the reference's
  // arithmetic, sequence by sequence.
  void v4_compress(const CompressorSpec& spec, const CompressorParams& p, const float* kv, const float* gate,
                   std::span<const CompressorSeq> seqs, float* entries) override {
    for (const CompressorSeq& s : seqs) {
      ref::compress_rows(kv + s.row0 * spec.row(), gate + s.row0 * spec.row(), s.rows, s.pos0, p.position_bias,
                         p.norm_weight, p.inv_freq, spec, s.kv, s.gate, s.ld, entries + s.row0 * spec.width);
    }
  }
};

}  // namespace ft::engine

// Moving K and V between token-major activations and the head-major KV pages of kv_pool.h.
#include <cstring>

#include "ft/engine/bf16.h"
#include "ft/engine/ops_attention.h"

namespace ft::engine::ref {

void kv_write(const KvLayout& l, int64_t layer, const float* k, const float* v, std::size_t rows, int64_t pos0,
              std::byte* const* pages) {
  const std::size_t KV = std::size_t(l.kv_heads), D = std::size_t(l.head_dim), e = l.elem_bytes();
  for (std::size_t t = 0; t < rows; ++t) {
    const int64_t pos = pos0 + int64_t(t);
    std::byte* page = pages[pos / l.page_tokens];
    const std::size_t slot = std::size_t(pos % l.page_tokens) * D * e;
    for (std::size_t h = 0; h < KV; ++h) {
      const float* src[2] = {k + (t * KV + h) * D, v + (t * KV + h) * D};
      std::byte* dst[2] = {page + l.k_offset(layer, int64_t(h)) + slot, page + l.v_offset(layer, int64_t(h)) + slot};
      for (int kv = 0; kv < 2; ++kv) {
        if (l.dtype == KvDType::kF32) {
          std::memcpy(dst[kv], src[kv], D * sizeof(float));
        } else {
          for (std::size_t d = 0; d < D; ++d) {
            const bf16_t b = f32_to_bf16(src[kv][d]);
            std::memcpy(dst[kv] + 2 * d, &b, 2);
          }
        }
      }
    }
  }
}

void kv_gather(const KvLayout& l, int64_t layer, int64_t tokens, std::byte* const* pages, float* k, float* v) {
  const std::size_t KV = std::size_t(l.kv_heads), D = std::size_t(l.head_dim), e = l.elem_bytes();
  for (int64_t pos = 0; pos < tokens; ++pos) {
    const std::byte* page = pages[pos / l.page_tokens];
    const std::size_t slot = std::size_t(pos % l.page_tokens) * D * e;
    for (std::size_t h = 0; h < KV; ++h) {
      const std::byte* src[2] = {page + l.k_offset(layer, int64_t(h)) + slot, page + l.v_offset(layer, int64_t(h)) + slot};
      float* dst[2] = {k + (std::size_t(pos) * KV + h) * D, v + (std::size_t(pos) * KV + h) * D};
      for (int kv = 0; kv < 2; ++kv) {
        if (l.dtype == KvDType::kF32) {
          std::memcpy(dst[kv], src[kv], D * sizeof(float));
        } else {
          for (std::size_t d = 0; d < D; ++d) {
            bf16_t b;
            std::memcpy(&b, src[kv] + 2 * d, 2);
            dst[kv][d] = bf16_to_f32(b);
          }
        }
      }
    }
  }
}

}  // namespace ft::engine::ref

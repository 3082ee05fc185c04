// Moving K and V between token-major activations and the KV pages of kv_pool.h (K blocks
// [page_tokens][head_dim], V blocks [head_dim][page_tokens]).
#include <cstring>

#include "ft/engine/bf16.h"
#include "ft/engine/ops_attention.h"

namespace ft::engine::ref {

namespace {

// Element (slot, d) of a K block is at slot * D + d, of a V block at d * P + slot.
void put(const KvLayout& l, std::byte* block, std::size_t at, float v) {
  if (l.dtype == KvDType::kF32) {
    std::memcpy(block + at * 4, &v, 4);
  } else {
    const bf16_t b = f32_to_bf16(v);
    std::memcpy(block + at * 2, &b, 2);
  }
}

float get(const KvLayout& l, const std::byte* block, std::size_t at) {
  if (l.dtype == KvDType::kF32) {
    float v;
    std::memcpy(&v, block + at * 4, 4);
    return v;
  }
  bf16_t b;
  std::memcpy(&b, block + at * 2, 2);
  return bf16_to_f32(b);
}

}  // namespace

void kv_write(const KvLayout& l, int64_t layer, const float* k, const float* v, std::size_t rows, int64_t pos0,
              std::byte* const* pages) {
  const std::size_t KV = std::size_t(l.kv_heads_at(layer)), D = std::size_t(l.head_dim_at(layer)),
                    P = std::size_t(l.page_tokens);
  for (std::size_t t = 0; t < rows; ++t) {
    const int64_t pos = pos0 + int64_t(t);
    std::byte* page = pages[pos / l.page_tokens];
    const std::size_t slot = std::size_t(pos % l.page_tokens);
    for (std::size_t h = 0; h < KV; ++h) {
      std::byte* kb = page + l.k_offset(layer, int64_t(h));
      std::byte* vb = page + l.v_offset(layer, int64_t(h));
      for (std::size_t d = 0; d < D; ++d) {
        put(l, kb, slot * D + d, k[(t * KV + h) * D + d]);
        put(l, vb, d * P + slot, v[(t * KV + h) * D + d]);
      }
    }
  }
}

void kv_gather(const KvLayout& l, int64_t layer, int64_t tokens, std::byte* const* pages, float* k, float* v) {
  const std::size_t KV = std::size_t(l.kv_heads_at(layer)), D = std::size_t(l.head_dim_at(layer)),
                    P = std::size_t(l.page_tokens);
  for (int64_t pos = 0; pos < tokens; ++pos) {
    const std::byte* page = pages[pos / l.page_tokens];
    const std::size_t slot = std::size_t(pos % l.page_tokens);
    for (std::size_t h = 0; h < KV; ++h) {
      const std::byte* kb = page + l.k_offset(layer, int64_t(h));
      const std::byte* vb = page + l.v_offset(layer, int64_t(h));
      for (std::size_t d = 0; d < D; ++d) {
        k[(std::size_t(pos) * KV + h) * D + d] = get(l, kb, slot * D + d);
        v[(std::size_t(pos) * KV + h) * D + d] = get(l, vb, d * P + slot);
      }
    }
  }
}

}  // namespace ft::engine::ref

// Helpers shared by the checkpoint-store tests: deterministic states and whole-state reads.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ft/store/checkpoint_format.h"
#include "ft/store/options.h"
#include "ft/store/state_tier.h"

namespace ft::store::testing {

inline std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n);
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t v = splitmix64(x);
    std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, n - i));
  }
  return out;
}

inline ModelFingerprint model(std::uint64_t n) { return {0xfeedull, n}; }
inline PrefixKey prefix(std::uint64_t n) { return {0xabcdull, n}; }
inline StoreKey key(const std::string& tenant, std::uint64_t model_n, std::uint64_t prefix_n) {
  return {tenant, model(model_n), prefix(prefix_n)};
}

// One u8 chunk per entry of chunk_bytes (layer i, kinds cycling), content derived from seed.
inline ModelState make_state(ModelFingerprint m, std::uint64_t tokens, const std::vector<std::size_t>& chunk_bytes,
                             std::uint64_t seed) {
  ModelState s;
  s.tokens = tokens;
  s.model = m;
  for (std::size_t i = 0; i < chunk_bytes.size(); ++i) {
    StateChunk c;
    c.layer = static_cast<std::uint32_t>(i);
    c.kind = static_cast<ChunkKind>(1 + i % 3);
    c.dtype = DType::kU8;
    c.shape = {chunk_bytes[i]};
    c.data = pattern(chunk_bytes[i], seed * 1000 + i);
    s.chunks.push_back(std::move(c));
  }
  return s;
}

// KV page `index` holding `data` (u8: any bytes).
inline StateChunk page_chunk(std::size_t index, ChunkBytes data) {
  StateChunk c;
  c.layer = static_cast<std::uint32_t>(index);
  c.kind = ChunkKind::kKvPage;
  c.dtype = DType::kU8;
  c.shape = {data.size()};
  c.data = std::move(data);
  return c;
}

// Appends KV pages 0..count-1 of `bytes` each; page j's content depends on j and `seed` only, so
// states built with the same seed share their first pages (as one growing sequence's checkpoints do).
inline void add_pages(ModelState& s, std::size_t count, std::size_t bytes, std::uint64_t seed = 0) {
  for (std::size_t j = 0; j < count; ++j)
    s.chunks.push_back(page_chunk(j, pattern(bytes, 0x9a9e0000ull + seed * 100000 + j)));
}

inline StoreOptions small_options(const std::filesystem::path& path) {
  StoreOptions o;
  o.path = path;
  o.byte_budget = 256ull << 20;
  o.ram_budget = 64ull << 20;
  return o;
}

// Reads a whole checkpoint through lookup_header + read_chunks.
inline Result<ModelState> read_all(StateTier& tier, const StoreKey& k) {
  FT_ASSIGN_OR_RETURN(ModelStateHeader h, tier.lookup_header(k));
  ModelState s;
  s.tokens = h.tokens;
  s.model = h.model;
  for (const auto& c : h.chunks) s.chunks.push_back({c.layer, c.kind, c.dtype, c.shape, std::vector<std::byte>(c.bytes)});
  FT_RETURN_IF_ERROR(tier.read_chunks(k, h, [&](const ChunkPiece& p) {
    std::memcpy(s.chunks.at(p.chunk_index).data.mutable_data() + p.offset, p.bytes.data(), p.bytes.size());
    return Status::ok();
  }));
  return s;
}

inline bool same(const ModelState& a, const ModelState& b) {
  if (a.tokens != b.tokens || a.model != b.model || a.chunks.size() != b.chunks.size()) return false;
  for (std::size_t i = 0; i < a.chunks.size(); ++i) {
    const auto &x = a.chunks[i], &y = b.chunks[i];
    if (x.layer != y.layer || x.kind != y.kind || x.dtype != y.dtype || x.shape != y.shape || x.data != y.data) {
      return false;
    }
  }
  return true;
}

}  // namespace ft::store::testing

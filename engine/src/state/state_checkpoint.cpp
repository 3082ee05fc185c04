#include "ft/engine/state_checkpoint.h"

#include <cstring>
#include <xxhash.h>

namespace ft::engine {
namespace {

using store::ChunkKind;
using store::StateChunk;

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<std::uint64_t> dims(const std::vector<int64_t>& shape) { return {shape.begin(), shape.end()}; }

// Where each chunk's bytes go in a state being restored: up to two destinations (K then V).
struct Destination {
  std::byte* first = nullptr;
  std::uint64_t first_bytes = 0;
  std::byte* second = nullptr;
};

}  // namespace

ModelFingerprint store_fingerprint(const Model& model) {
  const std::string text =
      model.fingerprint() + "|state=f32|format=" + std::to_string(store::kCheckpointFormatVersion);
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.high64, h.low64};
}

store::ModelState to_model_state(const SequenceState& state, const ModelFingerprint& fingerprint) {
  store::ModelState out;
  out.tokens = std::uint64_t(state.position());
  out.model = fingerprint;
  for (std::size_t i = 0; i < state.layers().size(); ++i) {
    const LayerState& l = state.layers()[i];
    if (l.kind == LayerStateKind::kAttention) {
      StateChunk c;
      c.layer = std::uint32_t(i);
      c.kind = ChunkKind::kAttentionKv;
      c.dtype = store::DType::kF32;
      c.shape = {2, std::uint64_t(l.kv.tokens()), std::uint64_t(l.kv.kv_heads), std::uint64_t(l.kv.head_dim)};
      c.data.resize((l.kv.k.size() + l.kv.v.size()) * sizeof(float));
      if (!l.kv.k.empty()) std::memcpy(c.data.data(), l.kv.k.data(), l.kv.k.size() * sizeof(float));
      if (!l.kv.v.empty())
        std::memcpy(c.data.data() + l.kv.k.size() * sizeof(float), l.kv.v.data(), l.kv.v.size() * sizeof(float));
      out.chunks.push_back(std::move(c));
    } else {
      out.chunks.push_back({std::uint32_t(i), ChunkKind::kConv, store::DType::kF32, dims(l.linear.conv_shape),
                            bytes_of(l.linear.conv)});
      out.chunks.push_back({std::uint32_t(i), ChunkKind::kRecurrent, store::DType::kF32,
                            dims(l.linear.recurrent_shape), bytes_of(l.linear.recurrent)});
    }
  }
  return out;
}

Status restore_model_state(store::StateTier& tier, const store::StoreKey& key, SequenceState& state) {
  state.reset();
  FT_ASSIGN_OR_RETURN(store::ModelStateHeader header, tier.lookup_header(key));
  const auto layout_mismatch = [&] {
    state.reset();
    return not_found("checkpoint " + key.prefix.to_hex() + " has another state layout");
  };
  if (header.model != key.model) return layout_mismatch();
  const std::int64_t n = std::int64_t(header.tokens);

  // Size the state for N tokens and point each chunk at its buffers.
  std::vector<Destination> dest;
  std::size_t c = 0;
  for (std::size_t i = 0; i < state.layers().size(); ++i) {
    LayerState& l = state.layers()[i];
    const auto expect = [&](ChunkKind kind, const std::vector<std::uint64_t>& shape) {
      if (c >= header.chunks.size()) return false;
      const store::ChunkDesc& d = header.chunks[c];
      return d.layer == i && d.kind == kind && d.dtype == store::DType::kF32 && d.shape == shape;
    };
    if (l.kind == LayerStateKind::kAttention) {
      const std::uint64_t per = std::uint64_t(l.kv.kv_heads * l.kv.head_dim);
      if (!expect(ChunkKind::kAttentionKv, {2, std::uint64_t(n), std::uint64_t(l.kv.kv_heads),
                                            std::uint64_t(l.kv.head_dim)}))
        return layout_mismatch();
      l.kv.k.resize(std::size_t(n) * per);
      l.kv.v.resize(std::size_t(n) * per);
      dest.push_back({reinterpret_cast<std::byte*>(l.kv.k.data()), l.kv.k.size() * sizeof(float),
                      reinterpret_cast<std::byte*>(l.kv.v.data())});
      ++c;
    } else {
      if (!expect(ChunkKind::kConv, dims(l.linear.conv_shape))) return layout_mismatch();
      dest.push_back({reinterpret_cast<std::byte*>(l.linear.conv.data()), l.linear.conv.size() * sizeof(float)});
      ++c;
      if (!expect(ChunkKind::kRecurrent, dims(l.linear.recurrent_shape))) return layout_mismatch();
      dest.push_back(
          {reinterpret_cast<std::byte*>(l.linear.recurrent.data()), l.linear.recurrent.size() * sizeof(float)});
      ++c;
    }
  }
  if (c != header.chunks.size()) return layout_mismatch();

  Status read = tier.read_chunks(key, header, [&](const store::ChunkPiece& p) -> Status {
    const Destination& d = dest[p.chunk_index];
    std::uint64_t at = p.offset;
    std::size_t done = 0;
    while (done < p.bytes.size()) {
      const bool in_first = at < d.first_bytes;
      std::byte* base = in_first ? d.first + at : d.second + (at - d.first_bytes);
      const std::size_t room = in_first ? std::size_t(d.first_bytes - at) : p.bytes.size() - done;
      const std::size_t n_copy = std::min(room, p.bytes.size() - done);
      if (!in_first && !d.second) return corrupt("checkpoint chunk larger than its destination");
      std::memcpy(base, p.bytes.data() + done, n_copy);
      done += n_copy;
      at += n_copy;
    }
    return Status::ok();
  });
  if (!read) {
    state.reset();
    return not_found("checkpoint " + key.prefix.to_hex() + ": " + read.message());
  }
  state.advance(n);
  return Status::ok();
}

}  // namespace ft::engine

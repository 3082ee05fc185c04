#include "ft/store/checkpoint_format.h"

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <optional>

namespace ft::store {
namespace {

constexpr char kMagic[4] = {'F', 'T', 'C', 'K'};
constexpr std::size_t kFixedBytes = 40;  // up to and including chunk_count
constexpr std::size_t kChecksumBytes = 8;

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Bounds-checked little-endian reader over the header bytes.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool read(std::uint64_t& v, int bytes) {
    if (in_.size() - pos_ < static_cast<std::size_t>(bytes)) return false;
    v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
    pos_ += bytes;
    return true;
  }
  std::size_t remaining() const { return in_.size() - pos_; }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

// Elements x element size, or nullopt on overflow / unknown dtype.
std::optional<std::uint64_t> expected_bytes(DType dtype, const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = dtype_bytes(dtype);
  if (n == 0) return std::nullopt;
  for (std::uint64_t d : shape) {
    if (d != 0 && n > UINT64_MAX / d) return std::nullopt;
    n *= d;
  }
  return n;
}

}  // namespace

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
    case DType::kF16: return 2;
    case DType::kF32: return 4;
    case DType::kF8E4M3:
    case DType::kU8: return 1;
  }
  return 0;
}

const char* chunk_kind_name(ChunkKind kind) {
  switch (kind) {
    case ChunkKind::kAttentionKv: return "attention_kv";
    case ChunkKind::kRecurrent: return "recurrent";
    case ChunkKind::kConv: return "conv";
    case ChunkKind::kKvPage: return "kv_page";
  }
  return "unknown";
}

ChunkBytes ChunkBytes::shared(std::span<const std::byte> view, std::shared_ptr<const ChunkOwner> owner) {
  ChunkBytes b;
  b.view_ = view;
  b.owner_ = std::move(owner);
  return b;
}

void ChunkBytes::resize(std::size_t n) {
  if (owner_) {  // a shared view becomes owned bytes (a copy) before it can change
    owner_->wait_ready();
    owned_.assign(view_.begin(), view_.end());
    owner_.reset();
    view_ = {};
  }
  owned_.resize(n);
}

std::byte* ChunkBytes::mutable_data() {
  if (owner_) resize(view_.size());
  return owned_.data();
}

bool ChunkBytes::operator==(const ChunkBytes& other) const {
  return size() == other.size() && (size() == 0 || std::memcmp(data(), other.data(), size()) == 0);
}

std::uint64_t ModelState::payload_bytes() const {
  std::uint64_t n = 0;
  for (const auto& c : chunks) n += c.data.size();
  return n;
}

std::uint64_t ModelStateHeader::payload_bytes() const {
  std::uint64_t n = 0;
  for (const auto& c : chunks) n += c.bytes;
  return n;
}

std::uint32_t ModelStateHeader::piece_count(std::size_t chunk_index) const {
  const std::uint64_t bytes = chunks[chunk_index].bytes;
  return static_cast<std::uint32_t>((bytes + piece_bytes - 1) / piece_bytes);
}

bool same_state(const ModelStateHeader& a, const ModelStateHeader& b) {
  return a.tokens == b.tokens && a.model == b.model && a.chunks == b.chunks;
}

ChunkHash chunk_checksum(std::span<const std::byte> data) {
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return {h.low64, h.high64};
}

Status validate_state(const ModelState& state) {
  for (std::size_t i = 0; i < state.chunks.size(); ++i) {
    const StateChunk& c = state.chunks[i];
    const std::string where = "chunk " + std::to_string(i) + " (layer " + std::to_string(c.layer) + ")";
    if (c.kind != ChunkKind::kAttentionKv && c.kind != ChunkKind::kRecurrent && c.kind != ChunkKind::kConv &&
        c.kind != ChunkKind::kKvPage) {
      return invalid_argument(where + ": unknown chunk kind");
    }
    if (c.shape.size() > kMaxChunkRank) return invalid_argument(where + ": rank above 8");
    const auto expected = expected_bytes(c.dtype, c.shape);
    if (!expected) return invalid_argument(where + ": unknown dtype or shape overflow");
    if (*expected != c.data.size()) {
      return invalid_argument(where + ": shape needs " + std::to_string(*expected) + " bytes, data has " +
                              std::to_string(c.data.size()));
    }
  }
  return Status::ok();
}

ModelStateHeader make_header(const ModelState& state, std::uint32_t piece_bytes) {
  ModelStateHeader h;
  h.tokens = state.tokens;
  h.model = state.model;
  h.piece_bytes = piece_bytes;
  h.chunks.reserve(state.chunks.size());
  for (const StateChunk& c : state.chunks) {
    h.chunks.push_back({c.layer, c.kind, c.dtype, c.shape, c.data.size(), chunk_checksum(c.data)});
  }
  return h;
}

std::string encode_header(const ModelStateHeader& h) {
  std::string out(kMagic, sizeof kMagic);
  put_le(out, h.format_version, 4);
  put_le(out, h.tokens, 8);
  put_le(out, h.model.hi, 8);
  put_le(out, h.model.lo, 8);
  put_le(out, h.piece_bytes, 4);
  put_le(out, h.chunks.size(), 4);
  for (const ChunkDesc& c : h.chunks) {
    put_le(out, c.layer, 4);
    put_le(out, static_cast<std::uint8_t>(c.kind), 1);
    put_le(out, static_cast<std::uint8_t>(c.dtype), 1);
    put_le(out, c.shape.size(), 1);
    put_le(out, 0, 1);
    for (std::uint64_t d : c.shape) put_le(out, d, 8);
    put_le(out, c.bytes, 8);
    put_le(out, c.checksum.lo, 8);
    put_le(out, c.checksum.hi, 8);
  }
  put_le(out, XXH3_64bits(out.data(), out.size()), 8);
  return out;
}

Result<ModelStateHeader> decode_header(std::string_view bytes) {
  if (bytes.size() < kFixedBytes + kChecksumBytes) return corrupt("checkpoint header truncated");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return corrupt("checkpoint header: bad magic");
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  std::uint64_t stored_sum = 0;
  Reader(bytes.substr(body.size())).read(stored_sum, 8);
  if (XXH3_64bits(body.data(), body.size()) != stored_sum) return corrupt("checkpoint header: checksum mismatch");

  Reader r(body.substr(sizeof kMagic));
  std::uint64_t version = 0, piece_bytes = 0, count = 0;
  ModelStateHeader h;
  r.read(version, 4);
  if (version != kCheckpointFormatVersion) {
    return unsupported("checkpoint format version " + std::to_string(version) + " (this build reads " +
                       std::to_string(kCheckpointFormatVersion) + ")");
  }
  h.format_version = static_cast<std::uint32_t>(version);
  r.read(h.tokens, 8);
  r.read(h.model.hi, 8);
  r.read(h.model.lo, 8);
  r.read(piece_bytes, 4);
  r.read(count, 4);
  if (piece_bytes == 0) return corrupt("checkpoint header: zero piece size");
  h.piece_bytes = static_cast<std::uint32_t>(piece_bytes);
  // Each chunk record is at least 32 bytes; bounds the allocation below by the input size.
  if (count > r.remaining() / 32) return corrupt("checkpoint header: chunk count beyond its size");
  h.chunks.resize(count);
  std::uint64_t total = 0;
  for (ChunkDesc& c : h.chunks) {
    std::uint64_t layer = 0, kind = 0, dtype = 0, rank = 0, pad = 0;
    if (!r.read(layer, 4) || !r.read(kind, 1) || !r.read(dtype, 1) || !r.read(rank, 1) || !r.read(pad, 1)) {
      return corrupt("checkpoint header: truncated chunk record");
    }
    if (rank > kMaxChunkRank) return corrupt("checkpoint header: chunk rank above 8");
    c.layer = static_cast<std::uint32_t>(layer);
    c.kind = static_cast<ChunkKind>(kind);
    c.dtype = static_cast<DType>(dtype);
    c.shape.resize(rank);
    for (std::uint64_t& d : c.shape) {
      if (!r.read(d, 8)) return corrupt("checkpoint header: truncated shape");
    }
    if (!r.read(c.bytes, 8) || !r.read(c.checksum.lo, 8) || !r.read(c.checksum.hi, 8))
      return corrupt("checkpoint header: truncated chunk record");
    if (std::string_view(chunk_kind_name(c.kind)) == "unknown") return corrupt("checkpoint header: unknown chunk kind");
    const auto expected = expected_bytes(c.dtype, c.shape);
    if (!expected || *expected != c.bytes) return corrupt("checkpoint header: chunk size disagrees with shape");
    // Piece indices are u32 and the payload total a u64: a header past either cannot be read back.
    if (c.bytes / piece_bytes + (c.bytes % piece_bytes != 0) > UINT32_MAX)
      return corrupt("checkpoint header: a chunk of more pieces than the format counts");
    if (__builtin_add_overflow(total, c.bytes, &total)) return corrupt("checkpoint header: payload size overflows");
  }
  if (r.remaining() != 0) return corrupt("checkpoint header: trailing bytes");
  return h;
}

}  // namespace ft::store

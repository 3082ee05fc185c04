// The versioned byte format of a model-state checkpoint (the snapshot the engine takes at a prefix
// boundary: attention KV for positions [0, N), recurrent and conv state at N).
//
// A checkpoint is one header plus one payload per chunk. The header is stored on its own (meta
// column family); each chunk is stored as pieces of at most `piece_bytes` (blobs column family) so
// a restore streams into caller memory without ever holding the whole state twice.
//
// Header, format version 3. All integers little-endian.
//
//   offset  size  field
//   0       4     magic "FTCK"
//   4       4     u32 format_version (= 3; version 2 had a 64-bit chunk checksum, version 1 no
//                 kv_page chunks and KV stored per layer)
//   8       8     u64 tokens (N)
//   16      16    model fingerprint: u64 hi, u64 lo
//   32      4     u32 piece_bytes (how the chunks were split into blobs)
//   36      4     u32 chunk_count
//   40      ...   chunk_count records:
//                   u32 layer | u8 kind | u8 dtype | u8 rank | u8 0 | rank x u64 dim |
//                   u64 byte_size | XXH3-128 of the chunk payload (seed 0): u64 low, u64 high
//   end-8   8     u64 XXH3-64 (seed 0) of every header byte before it
//
// Invariants every version keeps, so an old reader can reject a new header cleanly: the magic,
// the version at offset 4, the header checksum in the last 8 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "ft/store/types.h"

namespace ft::store {

inline constexpr std::uint32_t kCheckpointFormatVersion = 3;
inline constexpr std::uint32_t kDefaultPieceBytes = 4u << 20;  // 4 MiB
inline constexpr std::size_t kMaxChunkRank = 8;

// kAttentionKv: one layer's K and V for all N tokens. kKvPage: a fixed number of token positions
// (a page) of every attention layer at once, `layer` holding the page index; the engine's paged
// KV is stored page by page so that checkpoints of one growing sequence share their pages.
enum class ChunkKind : std::uint8_t { kAttentionKv = 1, kRecurrent = 2, kConv = 3, kKvPage = 4 };
enum class DType : std::uint8_t { kBf16 = 1, kF16 = 2, kF32 = 3, kF8E4M3 = 4, kU8 = 5 };

std::size_t dtype_bytes(DType dtype);  // 0 for an unknown tag
const char* chunk_kind_name(ChunkKind kind);

// Whatever keeps shared chunk bytes alive (the engine's KV pages derive from it, so a reader can
// tell its own pages from other memory and adopt them instead of copying). The bytes may still be
// arriving when the chunk is saved (a GPU page copied to the host by an asynchronous copy, so that
// a checkpoint does not stall the next prefill chunk): wait_ready() returns once they are in place,
// and ChunkBytes::data() calls it, so every reader of the bytes waits and no saver does.
class ChunkOwner {
 public:
  virtual ~ChunkOwner() = default;
  virtual void wait_ready() const {}
};

// A chunk's payload: bytes it owns, or a read-only view of memory that `owner` keeps alive. The
// second is how one KV page serves every checkpoint of a growing sequence without a copy. Either
// way the bytes must not change while a saved state holds them.
class ChunkBytes {
 public:
  ChunkBytes() = default;
  ChunkBytes(std::vector<std::byte> owned) : owned_(std::move(owned)) {}  // NOLINT: implicit on purpose
  static ChunkBytes shared(std::span<const std::byte> view, std::shared_ptr<const ChunkOwner> owner);

  const std::byte* data() const {  // waits for bytes still arriving (ChunkOwner::wait_ready)
    if (!owner_) return owned_.data();
    owner_->wait_ready();
    return view_.data();
  }
  std::size_t size() const { return owner_ ? view_.size() : owned_.size(); }
  bool empty() const { return size() == 0; }
  std::span<const std::byte> span() const { return {data(), size()}; }
  operator std::span<const std::byte>() const { return span(); }  // NOLINT: implicit on purpose

  // Building a state (owned bytes only; a shared view is read-only).
  void resize(std::size_t n);
  std::byte* mutable_data();

  const std::shared_ptr<const ChunkOwner>& owner() const { return owner_; }  // null when owned
  // Where a shared view points, without waiting for its bytes: which memory it is (two views of
  // one KV page are the same), not a way to read it. Null when owned.
  const std::byte* shared_address() const { return owner_ ? view_.data() : nullptr; }
  bool operator==(const ChunkBytes& other) const;  // same bytes

 private:
  std::vector<std::byte> owned_;
  std::span<const std::byte> view_;
  std::shared_ptr<const ChunkOwner> owner_;
};

// One layer's tensor (or one KV page of every attention layer).
struct StateChunk {
  std::uint32_t layer = 0;
  ChunkKind kind = ChunkKind::kAttentionKv;
  DType dtype = DType::kBf16;
  std::vector<std::uint64_t> shape;  // elements per dim; product x dtype_bytes == data.size()
  ChunkBytes data;
};

// Everything needed to resume decoding after `tokens` tokens.
struct ModelState {
  std::uint64_t tokens = 0;
  ModelFingerprint model;
  std::vector<StateChunk> chunks;

  std::uint64_t payload_bytes() const;
};

// XXH3-128 of a chunk's payload: its checksum, and a KV page's name in a store that keeps each page
// once however many checkpoints hold it (128 bits: two different pages never share a name).
struct ChunkHash {
  std::uint64_t lo = 0, hi = 0;
  bool operator==(const ChunkHash&) const = default;
};

struct ChunkDesc {
  std::uint32_t layer = 0;
  ChunkKind kind = ChunkKind::kAttentionKv;
  DType dtype = DType::kBf16;
  std::vector<std::uint64_t> shape;
  std::uint64_t bytes = 0;
  ChunkHash checksum;  // of the payload

  bool operator==(const ChunkDesc&) const = default;
};

struct ModelStateHeader {
  std::uint32_t format_version = kCheckpointFormatVersion;
  std::uint64_t tokens = 0;
  ModelFingerprint model;
  std::uint32_t piece_bytes = kDefaultPieceBytes;
  std::vector<ChunkDesc> chunks;

  std::uint64_t payload_bytes() const;
  std::uint32_t piece_count(std::size_t chunk_index) const;  // pieces chunk i is stored as
};

// True when both headers describe the same bytes (piece size aside): lets a reader detect that the
// entry it looked up was replaced before it read the chunks.
bool same_state(const ModelStateHeader& a, const ModelStateHeader& b);

ChunkHash chunk_checksum(std::span<const std::byte> data);

// Shapes, dtypes and sizes agree; kInvalidArgument says which chunk does not.
Status validate_state(const ModelState& state);
// Header of `state` with the chunk checksums computed.
ModelStateHeader make_header(const ModelState& state, std::uint32_t piece_bytes = kDefaultPieceBytes);

// Writes header.format_version as given (tests use this to forge other versions).
std::string encode_header(const ModelStateHeader& header);
// kCorrupt: bad magic, checksum, bounds or sizes. kUnsupported: a format version we do not read.
Result<ModelStateHeader> decode_header(std::string_view bytes);

}  // namespace ft::store

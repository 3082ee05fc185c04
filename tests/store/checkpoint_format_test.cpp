#include "ft/store/checkpoint_format.h"

#include <gtest/gtest.h>

#include "ft/store/store_key.h"
#include "store_test_util.h"

namespace ft::store {
namespace {

using testing::make_state;

ModelState realistic_state() {
  ModelState s = make_state(testing::model(1), 77, {}, 0);
  StateChunk kv{0, ChunkKind::kAttentionKv, DType::kBf16, {2, 4, 77, 16}, testing::pattern(2 * 4 * 77 * 16 * 2, 1)};
  StateChunk rec{1, ChunkKind::kRecurrent, DType::kF32, {4, 16, 16}, testing::pattern(4 * 16 * 16 * 4, 2)};
  StateChunk conv{1, ChunkKind::kConv, DType::kBf16, {3, 64}, testing::pattern(3 * 64 * 2, 3)};
  s.chunks = {kv, rec, conv};
  return s;
}

TEST(CheckpointFormat, HeaderRoundTrips) {
  const ModelState s = realistic_state();
  ASSERT_TRUE(validate_state(s).is_ok());
  const ModelStateHeader h = make_header(s, 1024);
  auto back = decode_header(encode_header(h));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->format_version, kCheckpointFormatVersion);
  EXPECT_EQ(back->tokens, 77u);
  EXPECT_EQ(back->model, testing::model(1));
  EXPECT_EQ(back->piece_bytes, 1024u);
  EXPECT_EQ(back->chunks, h.chunks);
  EXPECT_EQ(back->chunks[0].checksum, chunk_checksum(s.chunks[0].data));
  EXPECT_EQ(back->piece_count(0), (s.chunks[0].data.size() + 1023) / 1024);
  EXPECT_TRUE(same_state(*back, make_header(s)));  // piece size aside
}

TEST(CheckpointFormat, EveryFlippedByteIsRejected) {
  const std::string bytes = encode_header(make_header(realistic_state()));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_FALSE(decode_header(bad).is_ok()) << "byte " << i;
  }
  EXPECT_EQ(decode_header(bytes.substr(0, bytes.size() - 1)).status().code(), ErrorCode::kCorrupt);
  EXPECT_EQ(decode_header("").status().code(), ErrorCode::kCorrupt);
}

// Piece indices are u32: a chunk of 2^32 pieces or more (a large chunk, a tiny piece size) could
// not be read back, so such a header is corrupt, not silently truncated (found by fuzzing).
TEST(CheckpointFormat, MorePiecesThanTheFormatCountsIsCorrupt) {
  ModelStateHeader h = make_header(realistic_state(), 1);
  h.chunks[0].shape = {1u << 16, 1u << 16};  // 2^32 bf16 values: 2^33 bytes in 1-byte pieces
  h.chunks[0].bytes = std::uint64_t(1) << 33;
  const auto r = decode_header(encode_header(h));
  EXPECT_EQ(r.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(r.status().message().find("pieces"), std::string::npos) << r.status().message();
  h.piece_bytes = 4u << 20;
  EXPECT_TRUE(decode_header(encode_header(h)).is_ok());
}

TEST(CheckpointFormat, OtherVersionIsUnsupported) {
  ModelStateHeader h = make_header(realistic_state());
  h.format_version = kCheckpointFormatVersion + 1;
  EXPECT_EQ(decode_header(encode_header(h)).status().code(), ErrorCode::kUnsupported);
}

TEST(CheckpointFormat, ValidateRejectsShapeSizeMismatch) {
  ModelState s = realistic_state();
  s.chunks[1].shape = {4, 16, 15};
  const Status st = validate_state(s);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("chunk 1"), std::string::npos) << st.message();
  s = realistic_state();
  s.chunks[0].dtype = static_cast<DType>(99);
  EXPECT_EQ(validate_state(s).code(), ErrorCode::kInvalidArgument);
}

TEST(StoreKey, HexRoundTrips) {
  const PrefixKey k{0x0123456789abcdefull, 0xfedcba9876543210ull};
  EXPECT_EQ(k.to_hex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(PrefixKey::from_hex(k.to_hex()), k);
  EXPECT_FALSE(PrefixKey::from_hex("0123").has_value());
  EXPECT_FALSE(PrefixKey::from_hex(std::string(31, '0') + "g").has_value());
}

TEST(StoreKey, EncodingRoundTripsAndGroupsByTenantAndModel) {
  const StoreKey k = testing::key("acme", 7, 9);
  auto back = decode_store_key(encode_store_key(k));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, k);
  const std::string enc = encode_store_key(k);
  EXPECT_TRUE(enc.starts_with(tenant_prefix("acme")));
  EXPECT_TRUE(enc.starts_with(tenant_model_prefix("acme", testing::model(7))));
  // A tenant whose name extends another's is not inside its range.
  EXPECT_FALSE(encode_store_key(testing::key("acme2", 7, 9)).starts_with(tenant_prefix("acme")));
  EXPECT_LT(enc, prefix_end(tenant_prefix("acme")));
  EXPECT_TRUE(blob_key(enc, 1, 2).starts_with(enc));
  EXPECT_EQ(validate_store_key(testing::key("", 1, 1)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(validate_store_key(testing::key(std::string(256, 'x'), 1, 1)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(prefix_end(std::string("a\xff", 2)), "b");
}

}  // namespace
}  // namespace ft::store

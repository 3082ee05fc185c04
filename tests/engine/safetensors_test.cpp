#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "checkpoint_test_util.h"
#include "ft/engine/checkpoint.h"
#include "test_support.h"

namespace ft::engine {
namespace {

using ckpt_test::bytes_of;
using ckpt_test::f32_tensor;

struct RawFile {
  uint64_t header_len = 0;
  std::string header;  // including padding
  std::string data;
};

RawFile read_raw(const std::filesystem::path& path) {
  const std::string bytes = ft::test::read_file(path);
  RawFile f;
  EXPECT_GE(bytes.size(), 8u);
  std::memcpy(&f.header_len, bytes.data(), 8);
  f.header = bytes.substr(8, f.header_len);
  f.data = bytes.substr(8 + f.header_len);
  return f;
}

TEST(SafetensorsWriter, HeaderIsSortedByNamePaddedAndDataIsPackedWidestFirst) {
  ft::test::TempDir tmp;
  const auto path = tmp.path() / "x.safetensors";
  const std::vector<OwnedTensor> tensors = {
      {"b.bf16", DType::kBF16, {3}, bytes_of(std::vector<uint16_t>{0x1111, 0x2222, 0x3333})},
      {"a.u8", DType::kU8, {1}, bytes_of(std::vector<uint8_t>{0x44})},
      f32_tensor("c.f32", {1}, {1.0f}),
  };
  ASSERT_TRUE(write_safetensors(path, tensors, {{"format", "pt"}}).is_ok());

  const RawFile f = read_raw(path);
  EXPECT_EQ(f.header_len % 8, 0u);
  const std::string json =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a.u8":{"dtype":"U8","shape":[1],"data_offsets":[10,11]},)"
      R"("b.bf16":{"dtype":"BF16","shape":[3],"data_offsets":[4,10]},)"
      R"("c.f32":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  ASSERT_GE(f.header.size(), json.size());
  EXPECT_EQ(f.header.substr(0, json.size()), json);
  EXPECT_EQ(f.header.substr(json.size()), std::string(f.header.size() - json.size(), ' '));
  EXPECT_LT(f.header.size() - json.size(), 8u);
  EXPECT_EQ(f.data.size(), 11u);
  EXPECT_EQ(f.data.substr(0, 4), std::string("\x00\x00\x80\x3f", 4));  // 1.0f, little-endian
  EXPECT_EQ(f.data.substr(4, 6), std::string("\x11\x11\x22\x22\x33\x33", 6));
  EXPECT_EQ(f.data.substr(10), "\x44");
}

TEST(SafetensorsWriter, NoMetadataMeansNoMetadataKey) {
  ft::test::TempDir tmp;
  ASSERT_TRUE(write_safetensors(tmp.path() / "x.safetensors", {f32_tensor("w", {1}, {0.f})}).is_ok());
  EXPECT_EQ(read_raw(tmp.path() / "x.safetensors").header.find("__metadata__"), std::string::npos);
}

TEST(SafetensorsWriter, EmptyFileIsAPaddedEmptyObject) {
  ft::test::TempDir tmp;
  ASSERT_TRUE(write_safetensors(tmp.path() / "x.safetensors", {}).is_ok());
  const RawFile f = read_raw(tmp.path() / "x.safetensors");
  EXPECT_EQ(f.header, "{}      ");
  EXPECT_TRUE(f.data.empty());
}

TEST(SafetensorsWriter, RejectsBadInput) {
  ft::test::TempDir tmp;
  const auto path = tmp.path() / "x.safetensors";
  Status s = write_safetensors(path, {f32_tensor("w", {1}, {1.f}), f32_tensor("w", {1}, {2.f})});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("duplicate tensor 'w'"), std::string::npos) << s.message();

  s = write_safetensors(path, {f32_tensor("w", {2, 2}, {1.f, 2.f, 3.f})});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'w' has 12 bytes"), std::string::npos) << s.message();

  s = write_safetensors(path, {f32_tensor("w", {-1}, {})});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);

  s = write_safetensors(path, {f32_tensor("__metadata__", {1}, {1.f})});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);

  s = write_safetensors(tmp.path() / "no" / "such" / "dir.safetensors", {f32_tensor("w", {1}, {1.f})});
  EXPECT_EQ(s.code(), ErrorCode::kIo);
  EXPECT_NE(s.message().find("dir.safetensors"), std::string::npos) << s.message();
}

TEST(SafetensorsWriter, OutputReadsBackThroughCheckpoint) {
  ft::test::TempDir tmp;
  ckpt_test::write_text(tmp.path() / "config.json", "{}");
  std::vector<uint16_t> bf16;
  for (float v : {0.1f, -3.75f, 1e20f}) bf16.push_back(f32_to_bf16(v));
  ASSERT_TRUE(write_safetensors(tmp.path() / "model.safetensors",
                                {{"w", DType::kBF16, {3}, bytes_of(bf16)}}, {{"format", "pt"}})
                  .is_ok());
  auto ck = Checkpoint::open(tmp.path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  auto w = ck->load_f32("w", {3});
  ASSERT_TRUE(w.is_ok());
  EXPECT_NEAR((*w)[0], 0.1f, 0.1f / 128);
  EXPECT_EQ((*w)[1], -3.75f);
  EXPECT_NEAR((*w)[2], 1e20f, 1e20f / 128);
}

}  // namespace
}  // namespace ft::engine

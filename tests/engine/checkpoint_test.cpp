#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint_test_util.h"
#include "ft/engine/checkpoint.h"
#include "test_support.h"

namespace ft::engine {
namespace {

namespace fs = std::filesystem;
using ckpt_test::bytes_of;
using ckpt_test::f32_tensor;
using ckpt_test::write_raw_safetensors;
using ckpt_test::write_text;

constexpr const char* kConfig = R"({"architectures": ["TestForCausalLM"], "hidden_size": 4})";

// Checks the code and that the message names every one of `needles`.
void expect_error(const Status& s, ErrorCode code, std::initializer_list<std::string> needles) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const auto& n : needles) EXPECT_NE(s.message().find(n), std::string::npos) << "'" << n << "' not in: " << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "message is not one line: " << s.message();
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { write_text(dir() / "config.json", kConfig); }
  const fs::path& dir() const { return tmp_.path(); }
  Result<Checkpoint> open() const { return Checkpoint::open(dir()); }
  // One model.safetensors holding `header` (declared with its true length) and `data`.
  void write_single(const std::string& header, const std::vector<std::byte>& data) {
    write_raw_safetensors(dir() / "model.safetensors", header, data);
  }

 private:
  ft::test::TempDir tmp_;
};

// ---- Happy paths --------------------------------------------------------------------------------

TEST_F(CheckpointTest, RoundTripsEveryDtype) {
  std::vector<OwnedTensor> tensors = {
      f32_tensor("a.f32", {2, 3}, {1.f, -2.f, 3.5f, 0.f, 1e-3f, -7.f}),
      {"b.f16", DType::kF16, {3}, bytes_of(std::vector<uint16_t>{0x3c00, 0xc000, 0x3800})},     // 1, -2, 0.5
      {"c.bf16", DType::kBF16, {1, 3}, bytes_of(std::vector<uint16_t>{0x3f80, 0xc000, 0x3f00})},  // 1, -2, 0.5
      {"d.i64", DType::kI64, {2}, bytes_of(std::vector<int64_t>{-1, int64_t(1) << 40})},
      {"e.i32", DType::kI32, {3}, bytes_of(std::vector<int32_t>{7, -8, 9})},
      {"f.u8", DType::kU8, {5}, bytes_of(std::vector<uint8_t>{0, 1, 2, 254, 255})},
      {"g.f8", DType::kF8E4M3, {2, 2}, bytes_of(std::vector<uint8_t>{0x38, 0x40, 0xb8, 0x7e})},
  };
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", tensors, {{"format", "pt"}}).is_ok());
  write_text(dir() / "generation_config.json", R"({"eos_token_id": 2})");

  auto ck = open();
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->dir(), dir());
  EXPECT_EQ(ck->config_text(), kConfig);
  EXPECT_EQ(ck->generation_config_text(), R"({"eos_token_id": 2})");
  EXPECT_EQ(ck->tensor_names(),
            (std::vector<std::string>{"a.f32", "b.f16", "c.bf16", "d.i64", "e.i32", "f.u8", "g.f8"}));
  for (const OwnedTensor& t : tensors) {
    SCOPED_TRACE(t.name);
    EXPECT_TRUE(ck->has(t.name));
    auto v = ck->tensor(t.name, t.shape);
    ASSERT_TRUE(v.is_ok()) << v.status().to_string();
    EXPECT_EQ(v->name, t.name);
    EXPECT_EQ(v->dtype, t.dtype);
    EXPECT_EQ(v->shape, t.shape);
    ASSERT_EQ(v->nbytes, t.data.size());
    EXPECT_EQ(std::vector<std::byte>(v->data, v->data + v->nbytes), t.data);
    // The writer lays tensors out so each is aligned to its element size in the mapping.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v->data) % dtype_size(t.dtype), 0u);
  }
  auto f32 = ck->load_f32("a.f32", {2, 3});
  ASSERT_TRUE(f32.is_ok());
  EXPECT_EQ(*f32, (std::vector<float>{1.f, -2.f, 3.5f, 0.f, 1e-3f, -7.f}));
  for (const char* name : {"b.f16", "c.bf16"}) {
    auto half = ck->load_f32(name, {});
    EXPECT_EQ(half.status().code(), ErrorCode::kInvalidArgument);  // wrong shape checked first
  }
  EXPECT_EQ(*ck->load_f32("b.f16", {3}), (std::vector<float>{1.f, -2.f, 0.5f}));
  EXPECT_EQ(*ck->load_f32("c.bf16", {1, 3}), (std::vector<float>{1.f, -2.f, 0.5f}));
  expect_error(ck->load_f32("e.i32", {3}).status(), ErrorCode::kUnsupported, {"e.i32", "I32"});
  expect_error(ck->load_f32("g.f8", {2, 2}).status(), ErrorCode::kUnsupported, {"g.f8", "F8_E4M3"});
}

TEST_F(CheckpointTest, ScalarsAndEmptyTensorsRoundTrip) {
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors",
                                {f32_tensor("scalar", {}, {42.f}), f32_tensor("empty", {0, 4}, {})})
                  .is_ok());
  auto ck = open();
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(*ck->load_f32("scalar", {}), std::vector<float>{42.f});
  EXPECT_TRUE(ck->load_f32("empty", {0, 4})->empty());
  EXPECT_EQ(ck->generation_config_text(), "");
}

TEST_F(CheckpointTest, ViewsSurviveMovingTheCheckpoint) {
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {2}, {5.f, 6.f})}).is_ok());
  auto ck = open();
  ASSERT_TRUE(ck.is_ok());
  const TensorView v = *ck->tensor("w");
  Checkpoint moved = std::move(ck).value();
  float out[2];
  ASSERT_TRUE(to_f32(v, out, 0, 2).is_ok());
  EXPECT_EQ(out[0], 5.f);
  EXPECT_EQ(out[1], 6.f);
  EXPECT_TRUE(moved.has("w"));
}

TEST_F(CheckpointTest, ShardedCheckpointWithIndex) {
  ASSERT_TRUE(write_safetensors(dir() / "model-00001-of-00002.safetensors",
                                {f32_tensor("model.embed.weight", {2, 2}, {1, 2, 3, 4}),
                                 f32_tensor("model.layers.0.w", {2}, {5, 6})})
                  .is_ok());
  ASSERT_TRUE(write_safetensors(dir() / "model-00002-of-00002.safetensors",
                                {f32_tensor("lm_head.weight", {2, 2}, {7, 8, 9, 10}),
                                 // Not in the index; transformers still loads it, so do we.
                                 f32_tensor("model.norm.weight", {2}, {11, 12})})
                  .is_ok());
  write_text(dir() / "model.safetensors.index.json", R"({
    "metadata": {"total_size": 48},
    "weight_map": {
      "model.embed.weight": "model-00001-of-00002.safetensors",
      "model.layers.0.w": "model-00001-of-00002.safetensors",
      "lm_head.weight": "model-00002-of-00002.safetensors"
    }})");
  auto ck = open();
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->tensor_names(), (std::vector<std::string>{"lm_head.weight", "model.embed.weight",
                                                          "model.layers.0.w", "model.norm.weight"}));
  EXPECT_EQ(*ck->load_f32("model.embed.weight", {2, 2}), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(*ck->load_f32("model.layers.0.w", {2}), (std::vector<float>{5, 6}));
  EXPECT_EQ(*ck->load_f32("lm_head.weight", {2, 2}), (std::vector<float>{7, 8, 9, 10}));
  EXPECT_EQ(*ck->load_f32("model.norm.weight", {2}), (std::vector<float>{11, 12}));
}

TEST_F(CheckpointTest, IndexDecidesWhichCopyOfADuplicatedTensorWins) {
  ASSERT_TRUE(write_safetensors(dir() / "a.safetensors", {f32_tensor("w", {1}, {1})}).is_ok());
  ASSERT_TRUE(write_safetensors(dir() / "b.safetensors", {f32_tensor("w", {1}, {2})}).is_ok());
  write_text(dir() / "model.safetensors.index.json", R"({"weight_map": {"w": "b.safetensors"}})");
  auto ck = open();
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(*ck->load_f32("w", {1}), std::vector<float>{2});
}

TEST_F(CheckpointTest, SingleFileWinsOverIndex) {
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {1}, {3})}).is_ok());
  write_text(dir() / "model.safetensors.index.json", R"({"weight_map": {"w": "gone.safetensors"}})");
  auto ck = open();
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(*ck->load_f32("w", {1}), std::vector<float>{3});
}

TEST_F(CheckpointTest, DtypeOutsideTheEnumOpensButIsUnsupportedOnUse) {
  write_single(R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
               R"("f":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
               std::vector<std::byte>(20));
  auto ck = open();
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_TRUE(ck->has("d"));
  expect_error(ck->tensor("d").status(), ErrorCode::kUnsupported, {"'d'", "F64", "model.safetensors"});
  EXPECT_TRUE(ck->tensor("f").is_ok());
}

// ---- Errors at open() ---------------------------------------------------------------------------

TEST_F(CheckpointTest, MissingDirectory) {
  expect_error(Checkpoint::open(dir() / "nope").status(), ErrorCode::kNotFound, {"nope"});
}

TEST_F(CheckpointTest, MissingConfig) {
  fs::remove(dir() / "config.json");
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {1}, {1})}).is_ok());
  expect_error(open().status(), ErrorCode::kNotFound, {"config.json", dir().string()});
}

TEST_F(CheckpointTest, MalformedConfig) {
  write_text(dir() / "config.json", "{\"hidden_size\": ");
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {1}, {1})}).is_ok());
  expect_error(open().status(), ErrorCode::kCorrupt, {"config.json"});
}

TEST_F(CheckpointTest, MalformedGenerationConfig) {
  write_text(dir() / "generation_config.json", "not json");
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {1}, {1})}).is_ok());
  expect_error(open().status(), ErrorCode::kCorrupt, {"generation_config.json"});
}

TEST_F(CheckpointTest, MissingWeights) {
  expect_error(open().status(), ErrorCode::kNotFound, {"model.safetensors", dir().string()});
}

TEST_F(CheckpointTest, FileTooShortForTheLengthPrefix) {
  write_text(dir() / "model.safetensors", "abc");
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "too short"});
}

TEST_F(CheckpointTest, EmptyFile) {
  write_text(dir() / "model.safetensors", "");
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "too short"});
}

TEST_F(CheckpointTest, HeaderLengthBeyondFileSize) {
  write_raw_safetensors(dir() / "model.safetensors", "{}", {}, 1000);
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "header length 1000", "file size"});
}

TEST_F(CheckpointTest, HugeHeaderLengthDoesNotOverflow) {
  write_raw_safetensors(dir() / "model.safetensors", "{}", {}, ~uint64_t(0));
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "header length"});
}

TEST_F(CheckpointTest, TruncatedFile) {
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {4}, {1, 2, 3, 4})}).is_ok());
  fs::resize_file(dir() / "model.safetensors", fs::file_size(dir() / "model.safetensors") - 4);
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "'w'", "truncated"});
}

TEST_F(CheckpointTest, TruncatedInsideTheHeader) {
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {4}, {1, 2, 3, 4})}).is_ok());
  fs::resize_file(dir() / "model.safetensors", 20);
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "header length"});
}

TEST_F(CheckpointTest, MalformedHeaderJson) {
  write_single(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4])", std::vector<std::byte>(4));
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "malformed JSON header"});
}

// A number no double holds makes the JSON parser throw out_of_range, not parse_error: it must
// still be a clean error, not an exception out of the loader (found by fuzzing).
TEST_F(CheckpointTest, HeaderNumberTooLargeForADouble) {
  write_single(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4e999]}})", std::vector<std::byte>(4));
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "malformed JSON header", "out of range"});
}

TEST_F(CheckpointTest, HeaderThatIsNotAnObject) {
  write_single("[1, 2, 3]", {});
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "not a JSON object"});
}

TEST_F(CheckpointTest, BinaryGarbageHeader) {
  write_single(std::string("{\xff\xfe\x00\x01", 5), {});
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "malformed JSON header"});
}

TEST_F(CheckpointTest, OffsetsPastTheDataSection) {
  write_single(R"({"w":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}})", std::vector<std::byte>(16));
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "'w'", "[0, 64]", "16-byte"});
}

TEST_F(CheckpointTest, OffsetsInconsistentWithDtypeAndShape) {
  write_single(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", std::vector<std::byte>(16));
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "'w'", "12 bytes", "F32", "16"});
}

TEST_F(CheckpointTest, OffsetsEndingBeforeTheyBegin) {
  write_single(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})", std::vector<std::byte>(16));
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "'w'", "[8, 4]"});
}

TEST_F(CheckpointTest, OverlappingTensors) {
  write_single(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               std::vector<std::byte>(12));
  expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors", "'a'", "'b'", "overlap"});
}

TEST_F(CheckpointTest, BadTensorEntries) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"w":{"shape":[1],"data_offsets":[0,4]}})", "dtype"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "shape"},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "negative"},
      {R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "non-integer"},
      {R"({"w":{"dtype":"F32","shape":[1]}})", "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,4]}})", "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "overflows"},
      {R"({"w":[1,2]})", "not a JSON object"},
      {R"({"__metadata__":{"format":1}})", "__metadata__"},
  };
  for (const auto& [header, needle] : cases) {
    SCOPED_TRACE(header);
    write_single(header, std::vector<std::byte>(4));
    const Status s = open().status();
    if (header.find("__metadata__") == std::string::npos) {
      expect_error(s, ErrorCode::kCorrupt, {"model.safetensors", "'w'", needle});
    } else {
      expect_error(s, ErrorCode::kCorrupt, {"model.safetensors", needle});
    }
  }
}

TEST_F(CheckpointTest, IndexNamingAMissingShard) {
  ASSERT_TRUE(write_safetensors(dir() / "model-00001-of-00002.safetensors", {f32_tensor("a", {1}, {1})}).is_ok());
  write_text(dir() / "model.safetensors.index.json", R"({"weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  expect_error(open().status(), ErrorCode::kCorrupt,
               {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "'b'", "does not exist"});
}

TEST_F(CheckpointTest, IndexListingATensorAbsentFromItsShard) {
  ASSERT_TRUE(write_safetensors(dir() / "model-00001-of-00001.safetensors", {f32_tensor("a", {1}, {1})}).is_ok());
  write_text(dir() / "model.safetensors.index.json", R"({"weight_map": {
      "a": "model-00001-of-00001.safetensors", "ghost": "model-00001-of-00001.safetensors"}})");
  expect_error(open().status(), ErrorCode::kCorrupt,
               {"'ghost'", "model-00001-of-00001.safetensors", "does not contain"});
}

TEST_F(CheckpointTest, CorruptShardIsNamed) {
  ASSERT_TRUE(write_safetensors(dir() / "model-00001-of-00002.safetensors", {f32_tensor("a", {1}, {1})}).is_ok());
  write_text(dir() / "model-00002-of-00002.safetensors", "short");
  write_text(dir() / "model.safetensors.index.json", R"({"weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  expect_error(open().status(), ErrorCode::kCorrupt, {"model-00002-of-00002.safetensors"});
}

TEST_F(CheckpointTest, MalformedIndex) {
  for (const std::string text : {"{", R"({"metadata": {}})", R"({"weight_map": []})", R"({"weight_map": {"a": 3}})",
                                 R"({"weight_map": {"a": "../outside.safetensors"}})",
                                 R"({"weight_map": {"a": "/etc/passwd"}})"}) {
    SCOPED_TRACE(text);
    write_text(dir() / "model.safetensors.index.json", text);
    expect_error(open().status(), ErrorCode::kCorrupt, {"model.safetensors.index.json"});
  }
}

TEST_F(CheckpointTest, SameTensorInTwoShardsWithoutIndexGuidance) {
  ASSERT_TRUE(write_safetensors(dir() / "a.safetensors", {f32_tensor("w", {1}, {1}), f32_tensor("x", {1}, {1})}).is_ok());
  ASSERT_TRUE(write_safetensors(dir() / "b.safetensors", {f32_tensor("w", {1}, {2}), f32_tensor("x", {1}, {2})}).is_ok());
  write_text(dir() / "model.safetensors.index.json",
             R"({"weight_map": {"w": "a.safetensors", "y": "b.safetensors"}})");
  expect_error(open().status(), ErrorCode::kCorrupt, {"'x'", "a.safetensors", "b.safetensors"});
}

// ---- Errors on lookup ---------------------------------------------------------------------------

TEST_F(CheckpointTest, MissingTensor) {
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {1}, {1})}).is_ok());
  auto ck = open();
  ASSERT_TRUE(ck.is_ok());
  EXPECT_FALSE(ck->has("model.layers.3.mlp.gate.weight"));
  expect_error(ck->tensor("model.layers.3.mlp.gate.weight").status(), ErrorCode::kNotFound,
               {"'model.layers.3.mlp.gate.weight'", "not found", dir().string()});
  expect_error(ck->load_f32("nope", {1}).status(), ErrorCode::kNotFound, {"'nope'"});
}

TEST_F(CheckpointTest, ShapeMismatch) {
  ASSERT_TRUE(write_safetensors(dir() / "model.safetensors", {f32_tensor("w", {2, 3}, {1, 2, 3, 4, 5, 6})}).is_ok());
  auto ck = open();
  ASSERT_TRUE(ck.is_ok());
  expect_error(ck->tensor("w", {3, 2}).status(), ErrorCode::kInvalidArgument, {"'w'", "[2, 3]", "expected [3, 2]"});
  expect_error(ck->load_f32("w", {6}).status(), ErrorCode::kInvalidArgument, {"'w'", "[2, 3]", "[6]"});
  EXPECT_TRUE(ck->tensor("w", {2, 3}).is_ok());
}

}  // namespace
}  // namespace ft::engine

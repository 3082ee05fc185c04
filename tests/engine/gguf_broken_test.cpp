// Broken GGUF files: each is refused with one line that names the file and the key or tensor at
// fault, never a crash, an over-read or an allocation the file's size does not justify.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "ft/engine/gguf.h"
#include "gguf_test_util.h"
#include "test_support.h"

namespace ft::engine {
namespace {

using namespace gguf_test;

class GgufBroken : public ::testing::Test {
 protected:
  // Writes `bytes` as NAME in a fresh directory and opens it.
  Result<GgufFile> open(const std::string& bytes, const std::string& name = "x.gguf") {
    write(tmp_.path() / name, bytes);
    return GgufFile::open(tmp_.path() / name);
  }
  // The open fails with `code`, one line naming the file at fault (`culprit`, by default the one
  // opened) and containing every needle.
  void expect_error(const std::string& bytes, ErrorCode code, std::initializer_list<std::string> needles,
                    const std::string& name = "x.gguf", std::string culprit = "") {
    auto f = open(bytes, name);
    ASSERT_FALSE(f.is_ok());
    const std::string& m = f.status().message();
    EXPECT_EQ(f.status().code(), code) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    if (culprit.empty()) culprit = name;
    EXPECT_NE(m.find((tmp_.path() / culprit).string() + ": "), std::string::npos) << m;
    for (const std::string& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' not in: " << m;
  }
  ft::test::TempDir tmp_;
};

TEST_F(GgufBroken, TheBuilderMakesAValidFile) {
  auto f = open(build(small_file()));
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->find("m")->shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(f->find("m")->dtype, DType::kQ8_0);
  EXPECT_EQ(*f->metadata().get_int("test.n"), 7);
  FileSpec v2 = small_file();
  v2.version = 2;  // version 2 has version 3's layout (3 added big-endian files)
  auto f2 = open(build(v2));
  ASSERT_TRUE(f2.is_ok()) << f2.status().to_string();
  EXPECT_EQ(f2->version(), 2u);
  FileSpec none;  // no tensors at all: no data section, no padding
  none.kvs = {kv_u32("a", 1)};
  EXPECT_TRUE(open(build(none)).is_ok());
}

TEST_F(GgufBroken, BadMagicVersionOrByteOrder) {
  FileSpec f = small_file();
  f.magic = "GGUX";
  expect_error(build(f), ErrorCode::kCorrupt, {"not a GGUF file", "GGUX"});
  expect_error("", ErrorCode::kCorrupt, {"not a GGUF file"});
  expect_error("GG", ErrorCode::kCorrupt, {"not a GGUF file"});
  expect_error("GGUF\3\0", ErrorCode::kCorrupt, {"the version", "past the end"});
  for (uint32_t v : {0u, 1u, 4u, 1000u}) {
    f = small_file();
    f.version = v;
    expect_error(build(f), ErrorCode::kUnsupported, {"version " + std::to_string(v)});
  }
  f = small_file();
  f.version = 0x03000000;  // version 3 written big-endian
  expect_error(build(f), ErrorCode::kUnsupported, {"big-endian"});
}

TEST_F(GgufBroken, EveryTruncationOfTheHeaderIsAnError) {
  const std::string whole = build(small_file());
  const std::size_t data_start = whole.size() - 100;  // 'v' (16 bytes), padding to 32, 'm' (68 bytes)
  for (std::size_t n = 0; n < data_start; ++n) {
    auto f = open(whole.substr(0, n));
    ASSERT_FALSE(f.is_ok()) << n;
    EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
  }
}

TEST_F(GgufBroken, TruncatedTensorDataNamesTheTensor) {
  const std::string whole = build(small_file());
  expect_error(whole.substr(0, whole.size() - 1), ErrorCode::kCorrupt,
               {"tensor 'm'", "68 bytes", "run past", "truncated"});
}

TEST_F(GgufBroken, LyingCounts) {
  FileSpec counts;
  counts.kvs = {kv_u32("a", 1)};
  counts.n_kv = 1000;
  expect_error(build(counts), ErrorCode::kCorrupt, {"metadata entry 2 of 1000", "past the end"});
  counts.n_kv.reset();
  counts.n_tensors = uint64_t(1) << 62;  // nothing is reserved from a count
  expect_error(build(counts), ErrorCode::kCorrupt, {"tensor 1 of 4611686018427387904", "past the end"});
  FileSpec f = small_file();
  f.kvs.push_back(kv_array("big", 4, uint64_t(1) << 61, le<uint32_t>(1)));
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata 'big'", "array of 2305843009213693952 u32", "past the end"});
  f = small_file();
  f.kvs.push_back(kv_array("names", 8, uint64_t(1) << 40, str("a") + str("b")));
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata 'names'", "string", "past the end"});
  f = small_file();
  f.kvs.push_back(str("s") + le<uint32_t>(8) + le<uint64_t>(uint64_t(1) << 40) + "abc");
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata 's'", "a string", "past the end"});
  f = small_file();
  f.kvs.push_back(le<uint64_t>(uint64_t(1) << 40) + "key");
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata entry 3 of 3", "key", "past the end"});
}

TEST_F(GgufBroken, BadMetadata) {
  FileSpec f = small_file();
  f.kvs.push_back(str("odd") + le<uint32_t>(13) + le<uint32_t>(0));
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata 'odd'", "unknown value type 13"});
  f = small_file();
  f.kvs.push_back(kv_array("arr", 99, 1, "x"));
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata 'arr'", "unknown value type 99"});
  f = small_file();
  f.kvs.push_back(kv_u32("test.n", 8));
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata 'test.n' appears twice"});
  f = small_file();
  f.kvs.push_back(kv_u32("", 8));
  expect_error(build(f), ErrorCode::kCorrupt, {"empty key"});
  // Nine levels of arrays of arrays, one element each.
  std::string nested = le<uint32_t>(4) + le<uint64_t>(0);
  for (int i = 0; i < 8; ++i) nested = le<uint32_t>(9) + le<uint64_t>(1) + nested;
  f = small_file();
  f.kvs.push_back(str("deep") + le<uint32_t>(9) + nested);
  expect_error(build(f), ErrorCode::kCorrupt, {"metadata 'deep'", "deeper than 8"});
  // Eight levels are fine.
  std::string ok = le<uint32_t>(4) + le<uint64_t>(0);
  for (int i = 0; i < 7; ++i) ok = le<uint32_t>(9) + le<uint64_t>(1) + ok;
  f = small_file();
  f.kvs.push_back(str("deep") + le<uint32_t>(9) + ok);
  EXPECT_TRUE(open(build(f)).is_ok());
}

TEST_F(GgufBroken, BadAlignment) {
  FileSpec f = small_file();
  f.kvs.push_back(kv_u16("general.alignment", 64));
  expect_error(build(f), ErrorCode::kCorrupt, {"general.alignment", "u16, not u32"});
  for (uint32_t a : {0u, 48u}) {
    f = small_file();
    f.kvs.push_back(kv_u32("general.alignment", a));
    expect_error(build(f), ErrorCode::kCorrupt, {"general.alignment", "not a power of two"});
  }
  f = small_file();
  f.tensors[1].offset = 40;  // 8-aligned, not 32-aligned
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'm'", "offset 40", "alignment 32"});
  // A file laid out with alignment 64 and saying so opens.
  f = small_file();
  f.alignment = 64;
  f.kvs.push_back(kv_u32("general.alignment", 64));
  auto ok = open(build(f));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->find("m")->offset % 64, 0u);
}

TEST_F(GgufBroken, BadTensorInfo) {
  FileSpec f = small_file();
  f.tensors[1].type = 4;  // Q4_2, removed from ggml
  expect_error(build(f), ErrorCode::kUnsupported, {"tensor 'm'", "ggml type 4"});
  f.tensors[1].type = 1000;
  expect_error(build(f), ErrorCode::kUnsupported, {"tensor 'm'", "ggml type 1000"});
  f = small_file();
  f.tensors[1].ne = {33, 2};  // Q8_0 rows are whole 32-value blocks
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'm'", "rows of 33 values", "q8_0 blocks of 32"});
  f = small_file();
  f.tensors[1].ne = {32, 3};  // 102 bytes, the file holds 68
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'm'", "102 bytes", "run past"});
  f = small_file();
  f.tensors[0].ne = {uint64_t(1) << 32, uint64_t(1) << 32};
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'v'", "more than 2^63 elements"});
  f.tensors[0].ne = {uint64_t(1) << 63};
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'v'", "more than 2^63 elements"});
  f.tensors[0].ne = {0, uint64_t(1) << 62, uint64_t(1) << 62};  // empty, but its other dimensions overflow
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'v'", "more than 2^63 elements"});
  f.tensors[0].ne = {uint64_t(1) << 60};  // elements fit int64, bytes fit size_t, the file does not
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'v'", "run past"});
  f.tensors[0].ne = {1, 1, 1, 1, 4};
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'v'", "5 dimensions"});
  f = small_file();
  f.tensors[1].name = "v";
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'v' appears twice"});
  f = small_file();
  f.tensors[1].offset = 0;  // on top of 'v'
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'v'", "tensor 'm'", "overlap in the data section"});
  f = small_file();
  f.tensors[1].offset = uint64_t(1) << 63;
  expect_error(build(f), ErrorCode::kCorrupt, {"tensor 'm'", "run past"});
  f = small_file();
  f.tensors[0].name = std::string("bad\nname", 8);  // quoted names keep the message on one line
  f.tensors[0].type = 1000;
  expect_error(build(f), ErrorCode::kUnsupported, {"tensor 'bad?name'"});
}

// A part of a split model: split.no (from 0), split.count and the given tensors.
std::string part(uint16_t no, uint16_t count, std::vector<TensorSpec> tensors, std::optional<int32_t> total = {}) {
  FileSpec f;
  if (no == 0) f.kvs.push_back(kv_string("general.architecture", "test"));
  f.kvs.push_back(kv_u16("split.no", no));
  f.kvs.push_back(kv_u16("split.count", count));
  if (total) f.kvs.push_back(kv_i32("split.tensors.count", *total));
  f.tensors = std::move(tensors);
  return build(f);
}

TEST_F(GgufBroken, SplitParts) {
  const TensorSpec a{"a", {4}, 0, std::string(16, '\1'), std::nullopt};
  const TensorSpec b{"b", {4}, 0, std::string(16, '\2'), std::nullopt};
  write(tmp_.path() / "m-00002-of-00002.gguf", part(1, 2, {b}, 2));
  auto ok = open(part(0, 2, {a}, 2), "m-00001-of-00002.gguf");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->tensors().size(), 2u);
  EXPECT_EQ(ok->find("b")->file, 1u);
  EXPECT_EQ(*ok->metadata().get_string("general.architecture"), "test");

  // A part that is not there.
  expect_error(part(0, 3, {a}), ErrorCode::kNotFound, {"part 2 of 3", "m-00002-of-00003.gguf", "missing"},
               "m-00001-of-00003.gguf");
  // Parts that disagree with their names.
  write(tmp_.path() / "n-00002-of-00002.gguf", part(0, 2, {b}));
  expect_error(part(0, 2, {a}), ErrorCode::kCorrupt, {"says part 1 of 2, expected part 2 of 2"},
               "n-00001-of-00002.gguf", "n-00002-of-00002.gguf");
  expect_error(part(0, 2, {a}), ErrorCode::kCorrupt, {"not named NAME-00001-of-00002.gguf"}, "plain.gguf");
  // The same tensor in two parts; a total that does not add up.
  write(tmp_.path() / "d-00002-of-00002.gguf", part(1, 2, {a}));
  expect_error(part(0, 2, {a}), ErrorCode::kCorrupt, {"tensor 'a' is also in an earlier part"}, "d-00001-of-00002.gguf",
               "d-00002-of-00002.gguf");
  write(tmp_.path() / "t-00002-of-00002.gguf", part(1, 2, {b}));
  expect_error(part(0, 2, {a}, 5), ErrorCode::kCorrupt, {"split.tensors.count says 5", "hold 2"},
               "t-00001-of-00002.gguf");
  // split.count of the wrong type.
  FileSpec f;
  f.kvs = {kv_string("split.count", "2")};
  expect_error(build(f), ErrorCode::kCorrupt, {"'split.count' is string, not an integer"});
}

}  // namespace
}  // namespace ft::engine

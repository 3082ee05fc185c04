// The GGUF reader on files written by llama.cpp's own tools (gguf-py, llama-quantize,
// llama-gguf-split): metadata of every value type, tensor tables, shapes, alignment, split models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ft/engine/gguf.h"
#include "ft/engine/matrix.h"
#include "gguf_test_util.h"

namespace ft::engine {
namespace {

using gguf_test::fixtures;

GgufFile open_fixture(const std::string& name) {
  auto f = GgufFile::open(fixtures() / name);
  EXPECT_TRUE(f.is_ok()) << f.status().to_string();
  return std::move(f).value();
}

TEST(GgufReader, ScalarMetadataOfEveryType) {
  const GgufFile f = open_fixture("types.gguf");
  EXPECT_EQ(f.version(), 3u);
  const GgufMetadata& m = f.metadata();
  EXPECT_EQ(*m.get_string("general.architecture"), "freetoken-test");
  EXPECT_EQ(*m.get_int("test.u8"), 200);
  EXPECT_EQ(*m.get_int("test.i8"), -100);
  EXPECT_EQ(*m.get_int("test.u16"), 60000);
  EXPECT_EQ(*m.get_int("test.i16"), -30000);
  EXPECT_EQ(*m.get_int("test.u32"), 4000000000);
  EXPECT_EQ(*m.get_int("test.i32"), -2000000000);
  EXPECT_EQ(*m.get_int("test.u64"), 12345678901234);
  EXPECT_EQ(*m.get_int("test.i64"), -(int64_t(1) << 62));
  EXPECT_EQ(*m.get_float("test.f32"), 0.15625);
  EXPECT_EQ(*m.get_float("test.f64"), 0.1);
  EXPECT_TRUE(*m.get_bool("test.bool"));
  EXPECT_EQ(*m.get_string("test.string"), "h\xc3\xa9llo, GGUF");
  EXPECT_EQ(*m.get_string("test.empty_string"), "");
  EXPECT_EQ(*m.get_int("general.alignment"), 64);
}

TEST(GgufReader, ArrayMetadataOfEveryType) {
  const GgufFile f = open_fixture("types.gguf");
  const GgufMetadata& m = f.metadata();
  EXPECT_EQ(*m.get_ints("test.array.u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(*m.get_ints("test.array.i8"), (std::vector<int64_t>{-128, 0, 127}));
  EXPECT_EQ(*m.get_ints("test.array.u16"), (std::vector<int64_t>{65535, 1}));
  EXPECT_EQ(*m.get_ints("test.array.i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(*m.get_ints("test.array.u32"), (std::vector<int64_t>{4294967295, 0}));
  EXPECT_EQ(*m.get_ints("test.array.i32"), (std::vector<int64_t>{-7, 7, 2147483647}));
  EXPECT_EQ(*m.get_ints("test.array.i64"), (std::vector<int64_t>{INT64_MIN, 5}));
  EXPECT_EQ(*m.get_floats("test.array.f32"), (std::vector<double>{0.5, -1.25, 3.0}));
  EXPECT_EQ(*m.get_floats("test.array.f64"), (std::vector<double>{0.1, -2.5}));
  EXPECT_EQ(*m.get_strings("test.array.string"), (std::vector<std::string_view>{"a", "", "\xc3\xbcn\xc3\xaf"}));
  const GgufValue* b = m.find("test.array.bool");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->elem_type, GgufValueType::kBool);
  EXPECT_EQ(b->count, 3u);
  ASSERT_EQ(b->size, 3u);
  EXPECT_EQ(std::memcmp(b->data, "\1\0\1", 3), 0);
  // Arrays of arrays are read and kept (ggml itself refuses them); the getters do not decode them.
  const GgufValue* nested = m.find("test.array.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->type, GgufValueType::kArray);
  EXPECT_EQ(nested->elem_type, GgufValueType::kArray);
  EXPECT_EQ(nested->count, 3u);
  EXPECT_EQ(nested->size, 3 * (4 + 8) + 6 * 4u);  // three (type, count) headers, six i32
}

TEST(GgufReader, GettersNameTheFileAndKeyWhenTheTypeIsWrongOrTheKeyMissing) {
  const GgufFile f = open_fixture("types.gguf");
  const GgufMetadata& m = f.metadata();
  auto missing = m.get_int("test.nope");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("types.gguf"), std::string::npos);
  EXPECT_NE(missing.status().message().find("test.nope"), std::string::npos);
  EXPECT_EQ(m.find("test.nope"), nullptr);

  auto wrong = m.get_string("test.u32");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("'test.u32' is u32, not a string"), std::string::npos);
  EXPECT_FALSE(m.get_float("test.i32").is_ok());
  EXPECT_FALSE(m.get_int("test.f32").is_ok());
  EXPECT_FALSE(m.get_bool("test.u8").is_ok());
  EXPECT_FALSE(m.get_ints("test.array.f32").is_ok());
  EXPECT_FALSE(m.get_ints("test.array.bool").is_ok());
  EXPECT_FALSE(m.get_strings("test.array.nested").is_ok());
  EXPECT_FALSE(m.get_floats("test.string").is_ok());
  // A u64 above int64's range is refused, not wrapped.
  auto huge = m.get_int("test.u64_huge");
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("range"), std::string::npos);
  EXPECT_FALSE(m.get_ints("test.array.u64").is_ok());
}

TEST(GgufReader, TensorTableShapesSlowestFirstAndAlignment) {
  const GgufFile f = open_fixture("types.gguf");
  ASSERT_EQ(f.tensors().size(), 4u);
  const GgufTensor* f16 = f.find("dense.f16");
  ASSERT_NE(f16, nullptr);
  EXPECT_EQ(f16->shape, (std::vector<int64_t>{3, 7}));  // numpy (3, 7): 3 rows of 7
  EXPECT_EQ(f16->dtype, DType::kF16);
  EXPECT_EQ(f16->nbytes, 42u);
  EXPECT_EQ(f.find("dense.bf16")->shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(f.find("dense.f32")->shape, (std::vector<int64_t>{5}));
  const std::byte* base = f.mapped_files().at(0).data();
  for (const GgufTensor& t : f.tensors()) {
    EXPECT_EQ(t.offset % 64, 0u) << t.name;  // general.alignment = 64
    EXPECT_EQ(t.data, base + t.offset) << t.name;
    EXPECT_EQ(t.file, 0u);
  }
  auto view = f.tensor("dense.bf16");
  ASSERT_TRUE(view.is_ok()) << view.status().to_string();
  EXPECT_EQ(view->dtype, DType::kBF16);
  EXPECT_EQ(view->shape_string(), "[2, 3, 4]");
  EXPECT_EQ(view->nbytes, 48u);
}

TEST(GgufReader, ATypeWithoutDTypeListsButRefusesAView) {
  const GgufFile f = open_fixture("types.gguf");
  const GgufTensor* q5 = f.find("other.q5_0");
  ASSERT_NE(q5, nullptr);
  EXPECT_FALSE(q5->dtype.has_value());
  EXPECT_EQ(q5->ggml_type, 6u);
  EXPECT_EQ(q5->shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(q5->nbytes, 2 * 22u);
  auto view = f.tensor("other.q5_0");
  ASSERT_FALSE(view.is_ok());
  EXPECT_EQ(view.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(view.status().message().find("q5_0"), std::string::npos);
  auto missing = f.tensor("nope");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TEST(GgufReader, ReadsLlamaQuantizeOutput) {
  for (const auto& [file, dtype] : {std::pair{"q4_k.gguf", DType::kQ4_K}, std::pair{"q5_k.gguf", DType::kQ5_K},
                                    std::pair{"q6_k.gguf", DType::kQ6_K}, std::pair{"mxfp4.gguf", DType::kMXFP4}}) {
    SCOPED_TRACE(file);
    const GgufFile f = open_fixture(file);
    EXPECT_EQ(*f.metadata().get_string("general.architecture"), "llama");
    EXPECT_EQ(*f.metadata().get_int("llama.block_count"), 1);
    EXPECT_EQ(*f.metadata().get_int("llama.embedding_length"), 256);
    ASSERT_EQ(f.tensors().size(), 4u);
    EXPECT_EQ(f.find("blk.0.attn_norm.weight")->dtype, DType::kF32);  // norms stay F32
    const GgufTensor* up = f.find("blk.0.ffn_up.weight");
    EXPECT_EQ(up->dtype, dtype);
    EXPECT_EQ(up->shape, (std::vector<int64_t>{3, 256}));
    const GgufTensor* experts = f.find("blk.0.ffn_gate_exps.weight");
    EXPECT_EQ(experts->dtype, dtype);
    EXPECT_EQ(experts->shape, (std::vector<int64_t>{2, 2, 256}));
    // A matrix view of a block dtype: each row is cols / block elems whole blocks.
    const Matrix m = matrix_view(*f.tensor("blk.0.ffn_down.weight"));
    EXPECT_EQ(m.rows, 2);
    EXPECT_EQ(m.cols, 512);
    EXPECT_EQ(m.row_bytes, 512 / dtype_block(dtype).elems * dtype_block(dtype).bytes);
    EXPECT_EQ(m.bytes(), f.find("blk.0.ffn_down.weight")->nbytes);
  }
}

void expect_same_tensors(const GgufFile& split, const GgufFile& whole) {
  ASSERT_EQ(split.tensors().size(), whole.tensors().size());
  for (const GgufTensor& t : whole.tensors()) {
    SCOPED_TRACE(t.name);
    const GgufTensor* s = split.find(t.name);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->shape, t.shape);
    EXPECT_EQ(s->dtype, t.dtype);
    ASSERT_EQ(s->nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(s->data, t.data, t.nbytes), 0);
  }
}

TEST(GgufReader, SplitModelReadsAsOneFromAnyPart) {
  const GgufFile whole = open_fixture("q4_k.gguf");
  for (const char* part : {"split-00001-of-00002.gguf", "split-00002-of-00002.gguf"}) {
    SCOPED_TRACE(part);
    const GgufFile split = open_fixture(part);
    ASSERT_EQ(split.paths().size(), 2u);
    EXPECT_EQ(split.paths()[0].filename(), "split-00001-of-00002.gguf");
    EXPECT_EQ(split.paths()[1].filename(), "split-00002-of-00002.gguf");
    EXPECT_EQ(split.mapped_files().size(), 2u);
    EXPECT_EQ(*split.metadata().get_string("general.architecture"), "llama");
    EXPECT_EQ(*split.metadata().get_int("split.count"), 2);
    expect_same_tensors(split, whole);
    std::vector<std::size_t> files;
    for (const GgufTensor& t : split.tensors()) files.push_back(t.file);
    EXPECT_EQ(files, (std::vector<std::size_t>{0, 0, 1, 1}));
  }
}

TEST(GgufReader, EveryGgmlTypeOfADTypeHasItsBlockLayout) {
  int with_dtype = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlType* t = ggml_type(id);
    if (t == nullptr || !t->dtype) continue;
    ++with_dtype;
    SCOPED_TRACE(t->name);
    EXPECT_EQ(t->id, id);
    EXPECT_EQ(dtype_block(*t->dtype).elems, t->block_elems);
    EXPECT_EQ(dtype_block(*t->dtype).bytes, t->block_bytes);
  }
  EXPECT_EQ(with_dtype, 12);          // f32 f16 bf16 i32 i64 q8_0 q4_0 q4_1 q4_K q5_K q6_K mxfp4
  EXPECT_EQ(ggml_type(4), nullptr);   // Q4_2: removed from ggml
  EXPECT_EQ(ggml_type(43), nullptr);  // beyond GGML_TYPE_COUNT
}

}  // namespace
}  // namespace ft::engine

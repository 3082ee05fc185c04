// Block dequantisation against llama.cpp, bit for bit: every tensor of every fixture (quantised by
// gguf-py and by llama-quantize, plus random blocks of every type) dequantised by to_f32 and by
// matrix_row_f32 equals the reference .f32 written by gguf-py's dequantize and checked against
// ggml's dequantize_row_* when the fixtures were made (scripts/goldens/make-gguf-fixtures.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "ft/engine/dequant.h"
#include "ft/engine/gguf.h"
#include "ft/engine/matrix.h"
#include "gguf_test_util.h"
#include "test_support.h"

namespace ft::engine {
namespace {

using gguf_test::fixtures;

std::vector<float> read_reference(const std::filesystem::path& path) {
  const std::string bytes = ft::test::read_file(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// The first index where the bits differ, for a readable failure.
std::string first_difference(const std::vector<float>& got, const std::vector<float>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) {
      return "value " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]);
    }
  }
  return "none";
}

std::vector<std::filesystem::path> fixture_files() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(fixtures())) {
    const std::string name = e.path().filename().string();
    // Split parts hold the tensors of q4_k.gguf; the reader test compares them byte for byte.
    if (e.path().extension() == ".gguf" && name.find("-of-") == std::string::npos) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufDequant, EveryFixtureTensorEqualsLlamaCppBitForBit) {
  std::set<DType> covered;
  int tensors = 0;
  for (const auto& path : fixture_files()) {
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    for (const GgufTensor& t : file->tensors()) {
      if (!t.dtype) continue;
      const std::string where = path.filename().string() + ": " + t.name;
      SCOPED_TRACE(where);
      const auto ref_path = fixtures() / (path.stem().string() + "." + t.name + ".f32");
      ASSERT_TRUE(std::filesystem::exists(ref_path)) << "no reference " << ref_path;
      const std::vector<float> want = read_reference(ref_path);
      ASSERT_EQ(int64_t(want.size()), t.numel());

      auto view = file->tensor(t.name);
      ASSERT_TRUE(view.is_ok()) << view.status().to_string();
      std::vector<float> got(want.size());
      ASSERT_TRUE(to_f32(*view, got.data(), 0, got.size()).is_ok());
      EXPECT_TRUE(same_bits(got.data(), want.data(), want.size())) << first_difference(got, want);

      // Row by row through the Matrix view, the way the reference ops read weights.
      const Matrix m = matrix_view(*view);
      std::vector<float> row(std::size_t(m.cols));
      for (int64_t r = 0; r < m.rows; ++r) {
        matrix_row_f32(m, r, row.data());
        ASSERT_TRUE(same_bits(row.data(), want.data() + r * m.cols, row.size())) << "row " << r;
      }
      covered.insert(t.dtype.value());
      ++tensors;
    }
  }
  const std::set<DType> all = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                               DType::kQ4_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kMXFP4};
  EXPECT_EQ(covered, all);
  EXPECT_GE(tensors, 30);
}

TEST(GgufDequant, ToF32RangesThatStartAndEndInsideBlocks) {
  auto file = GgufFile::open(fixtures() / "random-blocks.gguf");
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  for (const char* name : {"random.q4_k", "random.q6_k", "random.q4_1", "random.mxfp4"}) {
    SCOPED_TRACE(name);
    const std::vector<float> want = read_reference(fixtures() / (std::string("random-blocks.") + name + ".f32"));
    const TensorView view = *file->tensor(name);
    for (const auto& [offset, count] : std::vector<std::pair<std::size_t, std::size_t>>{
             {0, 1}, {3, 300}, {255, 2}, {256, 256}, {31, 33}, {1, want.size() - 2}, {want.size() - 1, 1}}) {
      std::vector<float> got(count);
      ASSERT_TRUE(to_f32(view, got.data(), offset, count).is_ok());
      EXPECT_TRUE(same_bits(got.data(), want.data() + offset, count)) << "[" << offset << ", +" << count << ")";
    }
    std::vector<float> one(1);
    EXPECT_FALSE(to_f32(view, one.data(), want.size(), 1).is_ok());  // past the end
  }
}

// Hand-made blocks, independent of the fixtures: the scale conversions and code tables.
TEST(GgufDequant, HandMadeBlocks) {
  std::vector<std::byte> q8(34);
  const uint16_t half = 0x3800;  // 0.5
  std::memcpy(q8.data(), &half, 2);
  for (int j = 0; j < 32; ++j) q8[2 + j] = std::byte(uint8_t(int8_t(j - 16)));
  float out[32];
  dequantize_q8_0(q8.data(), out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], (j - 16) * 0.5f) << j;

  // MXFP4: the shared exponent e scales the doubled E2M1 table by 2^(e - 128); e = 0 and 1 give
  // fp32 subnormal scales, e = 128 the table halved.
  std::vector<std::byte> mx(17);
  for (int j = 0; j < 16; ++j) mx[1 + j] = std::byte(uint8_t(j | ((15 - j) << 4)));
  const float table[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int e : {0, 1, 2, 127, 128, 200}) {
    mx[0] = std::byte(uint8_t(e));
    dequantize_mxfp4(mx.data(), out, 32);
    const float scale = std::ldexp(1.0f, e - 128);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(out[j], table[j] * scale) << "e " << e << " j " << j;
      EXPECT_EQ(out[16 + j], table[15 - j] * scale) << "e " << e << " j " << j;
    }
  }
  EXPECT_FALSE(dequantize_row(DType::kBF16, mx.data(), out, 1));  // dense dtypes are not blocks
}

TEST(GgufBlockDType, DescriptorsAndByteCounts) {
  EXPECT_FALSE(dtype_is_block(DType::kBF16));
  EXPECT_TRUE(dtype_is_block(DType::kQ4_K));
  EXPECT_EQ(dtype_block(DType::kBF16).elems, 1u);
  EXPECT_EQ(dtype_block(DType::kBF16).bytes, 2u);
  EXPECT_EQ(dtype_block(DType::kQ4_K).elems, 256u);
  EXPECT_EQ(dtype_block(DType::kQ4_K).bytes, 144u);
  EXPECT_EQ(dtype_bytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(dtype_bytes(DType::kMXFP4, 64), 34u);
  EXPECT_EQ(dtype_bytes(DType::kBF16, 3), 6u);
  EXPECT_EQ(dtype_bytes(DType::kQ4_K, 100), std::nullopt);  // not whole blocks
  EXPECT_EQ(dtype_bytes(DType::kF32, uint64_t(1) << 63), std::nullopt);
  EXPECT_STREQ(dtype_name(DType::kQ6_K), "Q6_K");
  // Block dtypes are not safetensors dtypes: the safetensors reader must not learn them.
  EXPECT_FALSE(dtype_from_name("Q4_K").is_ok());
}

TEST(GgufBlockDTypeDeathTest, DenseOnlyCallersFailClearly) {
  EXPECT_DEATH(dtype_size(DType::kQ4_K), "Q4_K.*block dtype");
  TensorView odd;
  odd.name = "odd";
  odd.dtype = DType::kQ8_0;
  odd.shape = {2, 40};  // rows that end inside a block
  EXPECT_DEATH(matrix_view(odd), "odd.*not whole blocks");
}

TEST(GgufBlockDType, SafetensorsWriterRefusesBlockDTypes) {
  ft::test::TempDir tmp;
  OwnedTensor t{"w", DType::kQ8_0, {1, 32}, std::vector<std::byte>(34)};
  const Status s = write_safetensors(tmp.path() / "x.safetensors", {t});
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("Q8_0"), std::string::npos);
}

}  // namespace
}  // namespace ft::engine

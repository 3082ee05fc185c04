// The CUDA backend on weights in GGUF block dtypes, against the fp32 reference backend (which
// dequantises with ggml's arithmetic, bit for bit): embedding rows decode exactly, on blocks of
// random bytes (every code, every scale) and on a real file's table; products of every block dtype
// at decode sizes (one kernel on the blocks: 2e-6) and prefill sizes (bf16 hi + lo tiles through
// cuBLAS, the default: 1e-4, as the bf16 products; one fp16 plane: 2e-3; the int8 tensor-core
// tiles: 1.5e-4) follow the dequantised fp32 product. The weights are llama-quantize's, from the
// committed GGUF fixtures. Skips without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <string>
#include <tuple>

#include "ft/engine/backend.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/gguf.h"
#include "ft/engine/matrix.h"
#include "gpu_test_util.h"
#include "test_support.h"

namespace ft::engine {
namespace {

using test::ScopedEnv;

std::filesystem::path gguf_fixtures() {
  const char* moved = std::getenv("FT_FIXTURES_DIR");
  return std::filesystem::path(moved && *moved ? moved : FT_FIXTURES_DIR) / "gguf";
}

// Decode products on Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K take int8 activations (x ~= d1 hi + d2 lo per
// 32 values, within 1/64,516 of the block's largest value: ~2e-5 relative on normal x, up to 8e-5
// with a block of values 1e8 apart), unless FT_CUDA_INT8=0; every other decode product multiplies
// fp32 activations (~1e-7).
double decode_tolerance(DType dt) {
  const char* env = std::getenv("FT_CUDA_INT8");
  const bool int8 =
      !(env && std::strcmp(env, "0") == 0) &&
      (dt == DType::kQ8_0 || dt == DType::kQ4_0 || dt == DType::kQ4_K || dt == DType::kQ5_K || dt == DType::kQ6_K);
  return int8 ? 1.5e-4 : 2e-6;
}

class CudaBlockOps : public CudaAndReference {
 protected:
  CudaBlockOps() { rng_.seed(7); }
  // The embedding rows `ids` of `table` on both backends: equal bit for bit.
  void expect_embedding_exact(Matrix table, const std::vector<int32_t>& ids, const char* what) {
    std::vector<float> want(ids.size() * std::size_t(table.cols));
    on(*ref_, [&] { ref_->embedding(table, ids, want.data()); });
    ASSERT_TRUE(cuda_->place(table));
    float* out = dev(std::vector<float>(want.size(), -1.f));
    on(*cuda_, [&] { cuda_->embedding(table, ids, out); });
    const std::vector<float> got = host(out, want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      // NaN-free by construction; compare bits so signed zeros and subnormals count too.
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
          << what << ": value " << i << " " << got[i] << " vs " << want[i];
    }
  }
  // One weight of each GGUF block type the fixture models have, placed on the GPU, by tensor name:
  // Q8_0, Q4_0, Q4_1, Q5_K, Q4_K, Q6_K (and the lm_head, a 512-row Q6_K), MXFP4. The files stay
  // open while the fixture lives.
  std::vector<std::pair<std::string, Matrix>> block_weights() {
    std::vector<std::pair<std::string, Matrix>> out;
    for (const auto& [file, names] :
         {std::pair<const char*, std::vector<const char*>>{
              "qwen3_moe-mixed.gguf",
              {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
               "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
               "model.layers.1.mlp.experts.2.gate_proj.weight", "model.layers.1.mlp.experts.2.down_proj.weight",
               "lm_head.weight"}},
          {"qwen3_moe-mxfp4.gguf", {"model.layers.0.mlp.experts.1.up_proj.weight"}}}) {
      auto ckpt = Checkpoint::open(gguf_fixtures() / "models" / file);
      EXPECT_TRUE(ckpt.is_ok()) << file;
      if (!ckpt.is_ok()) continue;
      const Checkpoint& c = files_.emplace_back(std::move(*ckpt));
      for (const char* name : names) {
        auto view = c.tensor(name);
        EXPECT_TRUE(view.is_ok()) << view.status().to_string();
        if (!view.is_ok()) continue;
        Matrix w = matrix_view(*view);
        EXPECT_TRUE(cuda_->place(w));
        out.emplace_back(name, w);
      }
    }
    EXPECT_EQ(out.size(), 8u);
    return out;
  }
  std::deque<Checkpoint> files_;
  std::deque<MoeWeights> moe_layers_;
  std::deque<std::vector<std::byte>> blocks_;
  // A prefill MoE on GGUF-block experts with the environment variable `env` set to `value`: the
  // dequantised reference within `tol`.
  void moe_prefill_on_block_experts(const char* mma, const char* gemm, double tol);
};

TEST_F(CudaBlockOps, EmbeddingRowsDecodeExactlyAsTheReference) {
  auto random = GgufFile::open(gguf_fixtures() / "random-blocks.gguf");
  ASSERT_TRUE(random.is_ok()) << random.status().to_string();
  for (const GgufTensor& t : random->tensors()) {
    const Matrix table = matrix_view(*random->tensor(t.name));
    std::vector<int32_t> ids(std::size_t(table.rows));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(ids.size() - 1 - i);  // every row
    expect_embedding_exact(table, ids, t.name.c_str());
  }
  auto model = Checkpoint::open(gguf_fixtures() / "models" / "qwen3_moe-mixed.gguf");
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  expect_embedding_exact(matrix_view(*model->tensor("model.embed_tokens.weight")), {0, 511, 7, 7, 300},
                         "embed_tokens (Q4_K)");
}

TEST_F(CudaBlockOps, ProductsOfEveryBlockDtypeMatchTheDequantisedReference) {
  const ScopedEnv planes("FT_CUDA_BLOCK_GEMM", "planes");  // the exact prefill path (fp16's is below)
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& [name, w] : block_weights()) {
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols);
    std::vector<float> bias(R);
    for (float& b : bias) b = nd(rng_);
    for (std::size_t T : {1, 3, 8, 9, 64, 300}) {
      std::vector<float> x(T * K), want(T * R);
      for (float& v : x) v = nd(rng_);
      if (T == 3) {  // a block of zeros, and one of a wide range (the int8 planes' edge cases)
        std::fill(x.begin(), x.begin() + 32, 0.f);
        for (std::size_t i = 32; i < 64; ++i) x[i] *= i % 2 ? 1e4f : 1e-4f;
      }
      on(*ref_, [&] { ref_->linear(x.data(), T, w, bias.data(), want.data()); });
      float* y = dev(std::vector<float>(T * R, 0.f));
      const float* dx = dev(x);
      const float* db = *cuda_->place(std::span<const float>(bias));
      on(*cuda_, [&] { cuda_->linear(dx, T, w, db, y); });
      // Decode: products of the exact weights (decode_tolerance); prefill: the hi/lo tiles' ~2^-16, or
      // with FT_CUDA_MMA on, the int8 planes' on the tensor-core tiles (as decode's).
      const char* mma = std::getenv("FT_CUDA_MMA");
      const bool int8_tiles = mma && *mma && std::strcmp(mma, "0") != 0;
      const double tol = T <= 8       ? decode_tolerance(w.dtype)
                         : int8_tiles ? std::max(1e-4, decode_tolerance(w.dtype))
                                      : 1e-4;
      EXPECT_LT(rel_l2(host(y, T * R), want), tol) << name << " (" << dtype_name(w.dtype) << "), T " << T;
    }
    // A NaN in a decode input makes every output NaN (the int8 planes do not hide it).
    std::vector<float> x(K);
    for (float& v : x) v = nd(rng_);
    x[5] = std::nanf("");
    float* y = dev(std::vector<float>(R, 0.f));
    const float* dx = dev(x);
    on(*cuda_, [&] { cuda_->linear(dx, 1, w, nullptr, y); });
    const std::vector<float> got = host(y, R);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return std::isnan(v); })) << name;
  }
}

// Decode-sized products handed over together (a DeltaNet layer's q|k|v, z, b, a; a shared expert's
// gate and up; an fp32 gate beside them) go out a launch per dtype, at most four a launch: each
// equals its product alone bit for bit, and the dequantised reference.
TEST_F(CudaBlockOps, ProductsBatchedInOneLaunchEqualEachAlone) {
  auto mixed = Checkpoint::open(gguf_fixtures() / "models" / "qwen3_moe-mixed.gguf");
  ASSERT_TRUE(mixed.is_ok());
  std::vector<Matrix> ws;
  for (const char* name :
       {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight", "lm_head.weight"}) {
    ws.push_back(matrix_view(*mixed->tensor(name)));  // Q8_0, Q4_0, Q6_K
  }
  for (int e = 0; e < 4; ++e) {  // eight Q4_K products: two launches
    for (const char* m : {"gate_proj", "up_proj"}) {
      const std::string name = "model.layers.1.mlp.experts." + std::to_string(e) + "." + m + ".weight";
      ws.push_back(matrix_view(*mixed->tensor(name)));
    }
  }
  const std::size_t K = std::size_t(ws[0].cols);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> gate_f32(3 * K);  // an fp32 [3, K] matrix (a GGUF's shared-expert gate is [1, K])
  for (float& v : gate_f32) v = nd(rng_);
  ws.push_back(matrix_view(TensorView{"gate",
                                      DType::kF32,
                                      {3, int64_t(K)},
                                      reinterpret_cast<const std::byte*>(gate_f32.data()),
                                      gate_f32.size() * sizeof(float)}));
  for (Matrix& w : ws) {
    ASSERT_EQ(std::size_t(w.cols), K);
    ASSERT_TRUE(cuda_->place(w));
  }
  for (std::size_t T : {1, 5}) {
    std::vector<float> x(T * K);
    for (float& v : x) v = nd(rng_);
    const float* dx = dev(x);
    std::vector<float*> together, alone;
    std::vector<Backend::LinearOut> outs;
    for (const Matrix& w : ws) {
      together.push_back(dev(std::vector<float>(T * std::size_t(w.rows), 0.f)));
      alone.push_back(dev(std::vector<float>(T * std::size_t(w.rows), 0.f)));
      outs.push_back({&w, nullptr, together.back()});
    }
    on(*cuda_, [&] { cuda_->linears(dx, T, outs); });
    for (std::size_t i = 0; i < ws.size(); ++i) {
      const std::size_t n = T * std::size_t(ws[i].rows);
      on(*cuda_, [&] { cuda_->linear(dx, T, ws[i], nullptr, alone[i]); });
      std::vector<float> want(n);
      on(*ref_, [&] { ref_->linear(x.data(), T, ws[i], nullptr, want.data()); });
      const std::vector<float> got = host(together[i], n);
      EXPECT_EQ(got, host(alone[i], n)) << "product " << i << " (" << dtype_name(ws[i].dtype) << "), T " << T;
      EXPECT_LT(rel_l2(got, want), decode_tolerance(ws[i].dtype))
          << "product " << i << " (" << dtype_name(ws[i].dtype) << "), T " << T;
    }
  }
}

// Safetensors' FP8 / NVFP4 / MXFP4 weights as repacked into row blocks (the fixture PyTorch made):
// embedding rows decode exactly, products follow the dequantised reference.
TEST_F(CudaBlockOps, SafetensorsFp8Nvfp4AndMxfp4RowBlocksDecodeAndMultiplyAsTheReference) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("ft-quant-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(gguf_fixtures().parent_path() / "quant" / "quant-formats.safetensors",
                             dir / "model.safetensors", std::filesystem::copy_options::overwrite_existing);
  { std::ofstream(dir / "config.json") << "{}"; }
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const char* name : {"fp8.weight", "nvfp4.weight", "mxfp4.gate_up_proj"}) {
    auto view = ckpt->tensor(name);
    ASSERT_TRUE(view.is_ok()) << view.status().to_string();
    Matrix w = view->shape.size() == 3 ? matrix_view(*view, 1, 0, view->shape[1]) : matrix_view(*view);
    std::vector<int32_t> ids(std::size_t(w.rows));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(ids.size() - 1 - i);
    expect_embedding_exact(w, ids, name);
    ASSERT_TRUE(cuda_->place(w));
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols);
    for (std::size_t T : {1, 4, 9, 64}) {
      std::vector<float> x(T * K), want(T * R);
      for (float& v : x) v = nd(rng_);
      on(*ref_, [&] { ref_->linear(x.data(), T, w, nullptr, want.data()); });
      float* y = dev(std::vector<float>(T * R, 0.f));
      const float* dx = dev(x);
      on(*cuda_, [&] { cuda_->linear(dx, T, w, nullptr, y); });
      const double tol = T <= 8 ? 2e-6 : 1e-4;
      EXPECT_LT(rel_l2(host(y, T * R), want), tol) << name << " (" << dtype_name(w.dtype) << "), T " << T;
    }
  }
  std::filesystem::remove_all(dir);
}

// FP8 and NVFP4 row blocks of random codes and scales at widths of whole 256-value units, where the
// decode products take the lane kernels (block_units.h): they follow the dequantised reference.
TEST_F(CudaBlockOps, Fp8AndNvfp4LaneProductsMatchTheDequantisedReference) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (DType dtype : {DType::kF8E4M3B128, DType::kNVFP4}) {
    for (int64_t K : {256, 1280}) {
      const int64_t R = 300;
      const DTypeBlock b = dtype_block(dtype);
      const std::size_t row_bytes = std::size_t(K) / b.elems * b.bytes;
      std::vector<std::byte> bytes(std::size_t(R) * row_bytes);
      for (std::size_t blk = 0; blk < bytes.size() / b.bytes; ++blk) {
        std::byte* p = bytes.data() + blk * b.bytes;
        const float d = scale(rng_);
        std::memcpy(p, &d, 4);
        for (std::size_t i = 4; i < b.bytes; ++i) {
          int v = byte(rng_);
          const bool e4m3 = dtype == DType::kF8E4M3B128 || i < 8;  // FP8 codes, NVFP4's group scales
          if (e4m3 && (v & 0x7F) == 0x7F) v &= 0x7E;               // no NaN codes
          if (dtype == DType::kNVFP4 && i < 8) v &= 0x7F;          // positive group scales
          p[i] = std::byte(v);
        }
      }
      Matrix w{dtype, R, K, bytes.data(), row_bytes, nullptr};
      ASSERT_TRUE(cuda_->place(w));
      for (std::size_t T : {1, 2, 5, 8}) {
        std::vector<float> x(T * std::size_t(K)), want(T * std::size_t(R));
        for (float& v : x) v = nd(rng_);
        on(*ref_, [&] { ref_->linear(x.data(), T, w, nullptr, want.data()); });
        float* y = dev(std::vector<float>(want.size(), 0.f));
        const float* dx = dev(x);
        on(*cuda_, [&] { cuda_->linear(dx, T, w, nullptr, y); });
        EXPECT_LT(rel_l2(host(y, want.size()), want), 2e-6) << dtype_name(dtype) << ", K " << K << ", T " << T;
      }
    }
  }
}

// Random blocks of `dt` for a [rows, cols] weight: every code and sub-block scale byte random, the
// fp16 block scales (d, and Q4_K's / Q5_K's dmin, Q4_1's min) set to 2^exp2 (1 + m / 1024) with m random, so
// no block decodes to infinities.
std::vector<std::byte> random_blocks(DType dt, int64_t rows, int64_t cols, int exp2, std::mt19937& rng) {
  const DTypeBlock b = dtype_block(dt);
  std::vector<std::byte> bytes(std::size_t(rows) * std::size_t(cols) / b.elems * b.bytes);
  std::uniform_int_distribution<int> byte(0, 255), mant(0, 1023);
  for (std::byte& v : bytes) v = std::byte(byte(rng));
  const auto put_f16 = [&](std::size_t at) {
    const std::uint16_t bits = std::uint16_t(((exp2 + 15) << 10) | mant(rng));
    std::memcpy(&bytes[at], &bits, 2);
  };
  for (std::size_t at = 0; at < bytes.size(); at += b.bytes) {
    if (dt == DType::kQ6_K) {
      put_f16(at + 208);
    } else {
      put_f16(at);
      if (dt == DType::kQ4_K || dt == DType::kQ5_K || dt == DType::kQ4_1) put_f16(at + 2);
    }
  }
  return bytes;
}

// The exponent of random_blocks' scales that gives each type products of about unit size.
int block_exp2(DType dt) {
  switch (dt) {
    case DType::kQ6_K:
      return -14;  // fp16's least normal exponent
    case DType::kQ4_K:
    case DType::kQ5_K:
      return -13;
    default:
      return -9;
  }
}

// Prefill-sized products on the int8 tensor cores (block_mma.cu: rows a multiple of 64, columns of
// 256) on every integer-code type, at row counts that fill a 64-row tile, leave part of one, and
// take several: the dequantised reference within the int8 planes' error (as decode's), biases
// added; a block of zeros and one of values 1e8 apart stay within it too.
TEST_F(CudaBlockOps, TensorCoreTilesOfEveryIntegerBlockTypeMatchTheDequantisedReference) {
  std::deque<std::vector<std::byte>> keep;
  // 1: two blocks an SM; 3: three (the same sums).
  for (const char* mode : {"1", "3"}) {
    for (DType dt : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_0, DType::kQ8_0}) {
      const ScopedEnv mma("FT_CUDA_MMA", mode);
      SCOPED_TRACE(std::string("FT_CUDA_MMA=") + mode);
      const int64_t R = 192, K = 768;
      const std::vector<std::byte>& bytes = keep.emplace_back(random_blocks(dt, R, K, block_exp2(dt), rng_));
      Matrix w{dt, R, K, bytes.data(), bytes.size() / std::size_t(R)};
      ASSERT_TRUE(cuda_->place(w));
      std::vector<float> bias(R);
      std::normal_distribution<float> nd(0.f, 1.f);
      for (float& v : bias) v = nd(rng_);
      for (std::size_t T : {9, 64, 130}) {
        std::vector<float> x(T * std::size_t(K)), want(T * std::size_t(R));
        for (float& v : x) v = nd(rng_);
        if (T == 130) {
          std::fill(x.begin() + 256, x.begin() + 288, 0.f);
          for (std::size_t i = 288; i < 320; ++i) x[i] *= i % 2 ? 1e4f : 1e-4f;
        }
        on(*ref_, [&] { ref_->linear(x.data(), T, w, bias.data(), want.data()); });
        float* y = dev(std::vector<float>(want.size(), 0.f));
        const float* dx = dev(x);
        const float* db = param(bias);
        on(*cuda_, [&] { cuda_->linear(dx, T, w, db, y); });
        EXPECT_LT(rel_l2(host(y, want.size()), want), 1.5e-4) << dtype_name(dt) << ", T " << T;
      }
    }
  }
}

// Prefill-sized products on one fp16 plane (FT_CUDA_BLOCK_GEMM=f16: weights and x each rounded to
// fp16, one GEMM) on every block type, at row counts below, at and past a 64-row slot: the
// dequantised reference within fp16's rounding of both factors (~2^-11 each), biases added. x past
// fp16's range is held at its largest value (outputs finite); a NaN still reaches every output of
// its row.
TEST_F(CudaBlockOps, HalfPlaneProductsOfEveryBlockDtypeMatchTheDequantisedReference) {
  const ScopedEnv f16("FT_CUDA_BLOCK_GEMM", "f16");
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& [name, w] : block_weights()) {
    const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols);
    std::vector<float> bias(R);
    for (float& b : bias) b = nd(rng_);
    const float* db = param(bias);
    for (std::size_t T : {9, 64, 300}) {
      std::vector<float> x(T * K), want(T * R);
      for (float& v : x) v = nd(rng_);
      on(*ref_, [&] { ref_->linear(x.data(), T, w, bias.data(), want.data()); });
      float* y = dev(std::vector<float>(T * R, 0.f));
      const float* dx = dev(x);
      on(*cuda_, [&] { cuda_->linear(dx, T, w, db, y); });
      EXPECT_LT(rel_l2(host(y, T * R), want), 2e-3) << name << " (" << dtype_name(w.dtype) << "), T " << T;
    }
    // Row 0 has values past 65504, row 1 a NaN.
    const std::size_t T = 64;
    std::vector<float> x(T * K);
    for (float& v : x) v = nd(rng_);
    x[3] = 1e6f;
    x[K + 5] = std::nanf("");
    float* y = dev(std::vector<float>(T * R, 0.f));
    const float* dx = dev(x);
    on(*cuda_, [&] { cuda_->linear(dx, T, w, nullptr, y); });
    const std::vector<float> got = host(y, T * R);
    EXPECT_TRUE(std::all_of(got.begin(), got.begin() + std::ptrdiff_t(R), [](float v) { return std::isfinite(v); }))
        << name;
    EXPECT_TRUE(std::all_of(got.begin() + std::ptrdiff_t(R), got.begin() + std::ptrdiff_t(2 * R), [](float v) {
      return std::isnan(v);
    })) << name;
    EXPECT_TRUE(std::all_of(got.begin() + std::ptrdiff_t(2 * R), got.end(), [](float v) { return std::isfinite(v); }))
        << name;
  }
}

// A prefill MoE whose experts are GGUF blocks (gate/up and down as a Q4_K_M file mixes them, and
// other pairs), the rows of each expert padded to whole slots: its products on the int8 tensor
// cores (FT_CUDA_MMA=1: quantised gather, the GLU quantised, fp32 rows; the types without integer
// codes on the planes), on bf16 hi + lo planes (FT_CUDA_BLOCK_GEMM=planes: the slots' two-part
// layout), or on one fp16 plane (the default for experts, and FT_CUDA_BLOCK_GEMM=f16: the gather
// and the GLU rounded to fp16, one GEMM, fp32 rows). The reference routed as the GPU did, the
// output follows its dequantised experts within the int8 planes' error, the hi + lo planes', or
// fp16's.
TEST_F(CudaBlockOps, MoePrefillOnBlockExpertsMatchesTheDequantisedReference) {
  for (const auto& [mma, gemm, tol] : {std::tuple{"1", "planes", 2e-4}, std::tuple{"0", "planes", 2e-4},
                                       std::tuple{"0", "f16", 2e-3}, std::tuple{"0", "", 2e-3}})
    moe_prefill_on_block_experts(mma, gemm, tol);
}

void CudaBlockOps::moe_prefill_on_block_experts(const char* mma, const char* gemm, double tol) {
  const ScopedEnv mma_mode("FT_CUDA_MMA", mma), gemm_mode("FT_CUDA_BLOCK_GEMM", gemm);
  SCOPED_TRACE(std::string("FT_CUDA_MMA=") + mma + " FT_CUDA_BLOCK_GEMM=" + gemm);
  // The fixture's: the backend keys what it keeps of a layer (its expert table) and of a matrix by
  // their addresses, which a later call's new ones must not take over.
  std::deque<MoeWeights>& layers = moe_layers_;
  std::deque<std::vector<std::byte>>& keep = blocks_;
  const int64_t E = 8, H = 512, I = 256;
  const std::size_t K = 2;
  // The last two mix the ways: Q4_1 has no integer codes, so its products take the bf16 planes (the
  // GLU then reads one-part rows and splits, or reads two-part slots and quantises).
  for (const auto& [gu, down] : {std::pair{DType::kQ4_K, DType::kQ6_K}, std::pair{DType::kQ5_K, DType::kQ8_0},
                                 std::pair{DType::kQ4_0, DType::kQ4_K}, std::pair{DType::kQ4_K, DType::kQ4_1},
                                 std::pair{DType::kQ4_1, DType::kQ6_K}}) {
    MoeWeights& w = layers.emplace_back();
    w.router_spec = {std::size_t(E), K, ref::RouterScoring::kSoftmax, true, 1.f};
    w.hidden = H;
    w.router = weight(E, H);
    const auto block_matrix = [&](DType dt, int64_t rows, int64_t cols) {
      const std::vector<std::byte>& bytes = keep.emplace_back(random_blocks(dt, rows, cols, block_exp2(dt), rng_));
      Matrix m{dt, rows, cols, bytes.data(), bytes.size() / std::size_t(rows)};
      EXPECT_TRUE(cuda_->place(m));
      return m;
    };
    for (int64_t e = 0; e < E; ++e)
      w.experts.push_back({block_matrix(gu, I, H), block_matrix(gu, I, H), block_matrix(down, H, I)});
    for (std::size_t T : {70, 300}) {
      SCOPED_TRACE(std::string(dtype_name(gu)) + " / " + dtype_name(down) + ", T " + std::to_string(T));
      const std::vector<float> x = random(T * std::size_t(H));
      RoutingTrace gpu_trace;
      float* out = dev_zeros(x.size());
      const float* dx = dev(x);
      cuda_->set_routing_trace(&gpu_trace);
      on(*cuda_, [&] { cuda_->moe(w, dx, T, out, nullptr); });
      cuda_->set_routing_trace(nullptr);
      ASSERT_EQ(gpu_trace.calls.size(), 1u);
      // The reference along the GPU's choices (a near-tie rounding flipped is not a different function).
      std::vector<float> want(x.size());
      ASSERT_TRUE(ref_->set_forced_routing(&gpu_trace));
      on(*ref_, [&] { ref_->moe(w, x.data(), T, want.data(), nullptr); });
      ref_->set_forced_routing(nullptr);
      const std::vector<float> got = host(out, x.size());
      const auto finite = [](const std::vector<float>& v) {
        return std::size_t(std::count_if(v.begin(), v.end(), [](float f) { return std::isfinite(f); }));
      };
      EXPECT_EQ(finite(want), want.size()) << "the reference";
      EXPECT_EQ(finite(got), got.size()) << "the GPU";
      EXPECT_LT(rel_l2(got, want), tol);
    }
  }
}

}  // namespace
}  // namespace ft::engine

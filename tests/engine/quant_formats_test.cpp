// Safetensors checkpoints in FP8 (128x128 tiles or per-row scales), MXFP4 (gpt-oss's layout) and
// NVFP4 (ModelOpt's): the weights read as row blocks equal, bit for bit, what PyTorch computes by the
// formats' definitions (tests/fixtures/quant, made by scripts/goldens/make_quant_fixtures.py; the
// MXFP4 values also by transformers' own converter); broken files are one-line errors naming the
// tensor; and a model whose linear weights are FP8 or NVFP4 gives, on the CPU and CUDA runtimes, the
// logits of the same model on the dequantised weights within 1e-3. DeepSeek-V4's released formats
// (FP8 with UE8M0 tile scales, FP4 experts) are checked value by value against definitions written
// here, and a tiny V4 in them against the bf16 model holding their values.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>

#include "ft/engine/checkpoint.h"
#include "ft/engine/dequant.h"
#include "ft/engine/model.h"
#include "ft/engine/random_checkpoint.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using engine::BackendKind;
using engine::DType;

fs::path fixture() { return fs::path(FT_FIXTURES_DIR) / "quant" / "quant-formats.safetensors"; }

// A checkpoint directory holding `file` as its model.safetensors (and an empty config).
fs::path as_checkpoint(const fs::path& file, const fs::path& dir, const std::string& config = "{}") {
  fs::copy_file(file, dir / "model.safetensors", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "config.json") << config;
  return dir;
}

std::vector<float> values_of(const engine::Checkpoint& c, const std::string& name) {
  auto v = c.tensor(name);
  EXPECT_TRUE(v.is_ok()) << v.status().to_string();
  if (!v.is_ok()) return {};
  std::vector<float> out(std::size_t(v->numel()));
  EXPECT_TRUE(engine::to_f32(*v, out.data(), 0, out.size()).is_ok());
  return out;
}

// Bit for bit (none of these values is NaN). `signed_zero`: a -0 may read as +0, as it does in ggml's
// MXFP4 table (code 8 is int8 0 there, -0.0 in the OCP definition); equal values, every product alike.
void expect_bits_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                       bool signed_zero = true) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t differ = 0, first = 0, zeros = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]);
    const bool zero_sign = !same && got[i] == 0 && want[i] == 0;
    zeros += zero_sign;
    if (!same && (signed_zero || !zero_sign) && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << what << ": first at " << first << ": " << got[first] << " vs " << want[first];
  if (!signed_zero) {
    EXPECT_GT(zeros, 0u) << what << ": the -0 codes were expected to read as +0";
  }
}

TEST(QuantFormats, Fp8TilesMxfp4AndNvfp4EqualPyTorchsValuesBitForBit) {
  TempDir tmp;
  auto ckpt = engine::Checkpoint::open(as_checkpoint(fixture(), tmp.path()));
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  const SafetensorsFile want = SafetensorsFile::read(fixture());

  auto fp8 = ckpt->tensor("fp8.weight");
  ASSERT_TRUE(fp8.is_ok());
  EXPECT_EQ(fp8->dtype, DType::kF8E4M3B128);
  EXPECT_EQ(fp8->shape, (std::vector<int64_t>{200, 384}));
  expect_bits_equal(values_of(*ckpt, "fp8.weight"), want.f32("fp8.dequant"), "fp8");

  auto mx = ckpt->tensor("mxfp4.gate_up_proj");
  ASSERT_TRUE(mx.is_ok());
  EXPECT_EQ(mx->dtype, DType::kMXFP4);
  EXPECT_EQ(mx->shape, (std::vector<int64_t>{2, 64, 128}));
  expect_bits_equal(values_of(*ckpt, "mxfp4.gate_up_proj"), want.f32("mxfp4.dequant"), "mxfp4 (definition)", false);
  expect_bits_equal(values_of(*ckpt, "mxfp4.gate_up_proj"), want.f32("mxfp4.dequant_transformers"),
                    "mxfp4 (transformers' convert_moe_packed_tensors)", false);

  auto nv = ckpt->tensor("nvfp4.weight");
  ASSERT_TRUE(nv.is_ok());
  EXPECT_EQ(nv->dtype, DType::kNVFP4);
  EXPECT_EQ(nv->shape, (std::vector<int64_t>{64, 192}));
  expect_bits_equal(values_of(*ckpt, "nvfp4.weight"), want.f32("nvfp4.dequant"), "nvfp4");

  // The parts are the weights now: not listed, not loadable on their own.
  const auto names = ckpt->tensor_names();
  for (const char* part : {"fp8.weight_scale_inv", "mxfp4.gate_up_proj_blocks", "mxfp4.gate_up_proj_scales",
                           "nvfp4.weight_scale", "nvfp4.weight_scale_2", "nvfp4.input_scale"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), part), 0) << part;
    EXPECT_FALSE(ckpt->has(part)) << part;
  }
  EXPECT_TRUE(ckpt->has("mxfp4.gate_up_proj") && ckpt->has("fp8.dequant"));
}

// gpt-oss's experts.gate_up_proj interleaves gate and up rows: presented as gate_proj (the even
// rows) and up_proj (the odd ones), each expert's rows [out, in] read in place.
TEST(QuantFormats, GptOssInterleavedGateUpIsPresentedAsGateAndUp) {
  constexpr int64_t E = 2, rows = 6, groups = 2;  // 2I = 6 rows of 64 values
  const float e2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const auto code = [](int64_t e, int64_t r) { return int(e * rows + r) % 8; };
  std::vector<std::byte> blocks(std::size_t(E * rows * groups * 16)), scales(std::size_t(E * rows * groups));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const std::size_t at = std::size_t((e * rows + r) * groups + g);
        for (int i = 0; i < 16; ++i) blocks[at * 16 + std::size_t(i)] = std::byte(code(e, r) | code(e, r) << 4);
        scales[at] = std::byte(127 + g);  // 1, then 2
      }
  TempDir tmp;
  ASSERT_TRUE(engine::write_safetensors(tmp.path() / "model.safetensors",
                                        {{"m.experts.gate_up_proj_blocks", DType::kU8, {E, rows, groups, 16}, blocks},
                                         {"m.experts.gate_up_proj_scales", DType::kU8, {E, rows, groups}, scales}})
                  .is_ok());
  { std::ofstream(tmp.path() / "config.json") << "{}"; }
  auto ckpt = engine::Checkpoint::open(tmp.path());
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  EXPECT_FALSE(ckpt->has("m.experts.gate_up_proj"));
  for (const auto& [name, parity] :
       std::vector<std::pair<std::string, int64_t>>{{"m.experts.gate_proj", 0}, {"m.experts.up_proj", 1}}) {
    auto t = ckpt->tensor(name, {E, rows / 2, groups * 32});
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype, DType::kMXFP4);
    const std::vector<float> v = values_of(*ckpt, name);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < rows / 2; ++i)
        for (int64_t c = 0; c < groups * 32; ++c)
          ASSERT_EQ(v[std::size_t((e * rows / 2 + i) * groups * 32 + c)],
                    e2m1[code(e, 2 * i + parity)] * float(1 + c / 32))
              << name << " expert " << e << " row " << i << " column " << c;
  }
}

// Every E4M3 code as PyTorch's float8_e4m3fn converts it (subnormals, the largest 448, both NaNs).
TEST(QuantFormats, EveryE4m3CodeConvertsAsPyTorchConvertsIt) {
  const SafetensorsFile want = SafetensorsFile::read(fixture());
  const std::vector<float> torch = want.f32("fp8.codes_f32");
  ASSERT_EQ(torch.size(), 256u);
  std::vector<std::byte> blocks(2 * 132);
  for (int b = 0; b < 2; ++b) {
    const float one = 1.0f;
    std::memcpy(blocks.data() + b * 132, &one, 4);
    for (int j = 0; j < 128; ++j) blocks[std::size_t(b * 132 + 4 + j)] = std::byte(b * 128 + j);
  }
  std::vector<float> got(256);
  engine::dequantize_f8_b128(blocks.data(), got.data(), 256);
  for (int c = 0; c < 256; ++c) {
    if (std::isnan(torch[std::size_t(c)])) {
      EXPECT_TRUE(std::isnan(got[std::size_t(c)])) << "code " << c;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[std::size_t(c)]), std::bit_cast<uint32_t>(torch[std::size_t(c)]))
          << "code " << c << ": " << got[std::size_t(c)] << " vs " << torch[std::size_t(c)];
    }
  }
}

// ---- writing quantized checkpoints (the model tests' inputs) --------------------------------------

// Round-to-nearest (ties to the even code) onto a sorted table of non-negative values; returns the index.
std::size_t nearest(const std::vector<float>& table, float a) {
  const auto hi = std::lower_bound(table.begin(), table.end(), a);
  if (hi == table.begin()) return 0;
  if (hi == table.end()) return table.size() - 1;
  const std::size_t i = std::size_t(hi - table.begin());
  const float up = table[i] - a, down = a - table[i - 1];
  return up < down || (up == down && i % 2 == 0) ? i : i - 1;
}

const std::vector<float>& e4m3_table() {  // codes 0..126: every non-negative finite E4M3 value
  static const std::vector<float> t = [] {
    std::vector<std::byte> block(132);
    const float one = 1.0f;
    std::memcpy(block.data(), &one, 4);
    for (int j = 0; j < 128; ++j) block[std::size_t(4 + j)] = std::byte(j);
    std::vector<float> v(128);
    engine::dequantize_f8_b128(block.data(), v.data(), 128);
    v.pop_back();  // 0x7f: NaN
    return v;
  }();
  return t;
}
std::uint8_t to_e4m3(float x) {
  const std::uint8_t code = std::uint8_t(nearest(e4m3_table(), std::fabs(x)));
  return x < 0 && code ? code | 0x80 : code;
}
std::uint8_t to_e2m1(float x) {
  static const std::vector<float> t = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const std::uint8_t code = std::uint8_t(nearest(t, std::fabs(x)));
  return x < 0 && code ? code | 8 : code;
}

engine::OwnedTensor owned(std::string name, DType dtype, std::vector<int64_t> shape, const void* data,
                          std::size_t bytes) {
  engine::OwnedTensor t{std::move(name), dtype, std::move(shape), std::vector<std::byte>(bytes)};
  std::memcpy(t.data.data(), data, bytes);
  return t;
}

// FP8 in 128x128 tiles, DeepSeek's way: scale = amax / 448 per tile.
void fp8_parts(const std::string& name, const std::vector<float>& w, int64_t R, int64_t C,
               std::vector<engine::OwnedTensor>& out) {
  const int64_t TR = (R + 127) / 128, TC = C / 128;
  std::vector<float> scale(std::size_t(TR * TC));
  std::vector<std::uint8_t> codes(w.size());
  for (int64_t i = 0; i < TR; ++i)
    for (int64_t j = 0; j < TC; ++j) {
      float amax = 0;
      for (int64_t r = i * 128; r < std::min(R, i * 128 + 128); ++r)
        for (int64_t c = j * 128; c < j * 128 + 128; ++c) amax = std::max(amax, std::fabs(w[std::size_t(r * C + c)]));
      const float s = amax > 0 ? amax / 448.0f : 1.0f;
      scale[std::size_t(i * TC + j)] = s;
      for (int64_t r = i * 128; r < std::min(R, i * 128 + 128); ++r)
        for (int64_t c = j * 128; c < j * 128 + 128; ++c)
          codes[std::size_t(r * C + c)] = to_e4m3(w[std::size_t(r * C + c)] / s);
    }
  out.push_back(owned(name, DType::kF8E4M3, {R, C}, codes.data(), codes.size()));
  const std::string stem = name.substr(0, name.size() - 7);
  out.push_back(owned(stem + ".weight_scale_inv", DType::kF32, {TR, TC}, scale.data(), scale.size() * 4));
}

// NVFP4, ModelOpt's way: a tensor scale amax / (448 * 6), an E4M3 scale a 16 values.
void nvfp4_parts(const std::string& name, const std::vector<float>& w, int64_t R, int64_t C,
                 std::vector<engine::OwnedTensor>& out) {
  float amax = 0;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  const float global = amax > 0 ? amax / (448.0f * 6.0f) : 1.0f;
  std::vector<std::uint8_t> codes(w.size() / 2), scales(w.size() / 16);
  for (std::size_t g = 0; g < scales.size(); ++g) {
    float gmax = 0;
    for (std::size_t k = 0; k < 16; ++k) gmax = std::max(gmax, std::fabs(w[g * 16 + k]));
    scales[g] = to_e4m3(gmax / 6.0f / global);
    const float s = e4m3_table()[scales[g]] * global;
    for (std::size_t k = 0; k < 16; k += 2) {
      const std::uint8_t lo = s > 0 ? to_e2m1(w[g * 16 + k] / s) : 0, hi = s > 0 ? to_e2m1(w[g * 16 + k + 1] / s) : 0;
      codes[(g * 16 + k) / 2] = std::uint8_t(lo | hi << 4);
    }
  }
  const std::string stem = name.substr(0, name.size() - 7);
  out.push_back(owned(name, DType::kU8, {R, C / 2}, codes.data(), codes.size()));
  out.push_back(owned(stem + ".weight_scale", DType::kF8E4M3, {R, C / 16}, scales.data(), scales.size()));
  out.push_back(owned(stem + ".weight_scale_2", DType::kF32, {}, &global, 4));
  const float input_scale = 1.0f;
  out.push_back(owned(stem + ".input_scale", DType::kF32, {}, &input_scale, 4));
}

// MXFP4, gpt-oss's way: experts [E, in, out] as [E, out, in] blocks of 32 along `in`, an E8M0 scale
// 2^(floor(log2 amax) - 2) a block (so its largest value lands on E2M1's top codes).
void mxfp4_parts(const std::string& name, const std::vector<float>& w, int64_t E, int64_t in, int64_t out_dim,
                 std::vector<engine::OwnedTensor>& out) {
  const int64_t G = in / 32;
  std::vector<std::uint8_t> blocks(std::size_t(E * out_dim * G * 16)), scales(std::size_t(E * out_dim * G));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t o = 0; o < out_dim; ++o)
      for (int64_t g = 0; g < G; ++g) {
        const auto value = [&](int64_t k) { return w[std::size_t((e * in + g * 32 + k) * out_dim + o)]; };
        float amax = 0;
        for (int64_t k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(value(k)));
        const int exp = amax > 0 ? std::clamp(int(std::floor(std::log2(amax))) - 2, -127, 127) : -127;
        const std::size_t group = std::size_t((e * out_dim + o) * G + g);
        scales[group] = std::uint8_t(exp + 127);
        for (int64_t k = 0; k < 32; k += 2)
          blocks[group * 16 + std::size_t(k / 2)] =
              std::uint8_t(to_e2m1(std::ldexp(value(k), -exp)) | to_e2m1(std::ldexp(value(k + 1), -exp)) << 4);
      }
  out.push_back(owned(name + "_blocks", DType::kU8, {E, out_dim, G, 16}, blocks.data(), blocks.size()));
  out.push_back(owned(name + "_scales", DType::kU8, {E, out_dim, G}, scales.data(), scales.size()));
}

enum class Format { kFp8, kNvfp4, kMxfp4 };
const char* format_name(Format f) { return f == Format::kFp8 ? "Fp8" : f == Format::kNvfp4 ? "Nvfp4" : "Mxfp4"; }

// `from` with every projection (attention, MLP and expert *_proj.weight) whose columns are whole
// row blocks stored in `format`, as the released checkpoints store them (MXFP4: gpt-oss's fused
// experts); everything else as it was.
fs::path write_quantized(const fs::path& from, Format format, const fs::path& dir) {
  auto src = engine::Checkpoint::open(from);
  EXPECT_TRUE(src.is_ok()) << src.status().to_string();
  std::vector<engine::OwnedTensor> out;
  std::size_t quantized = 0;
  for (const std::string& name : src->tensor_names()) {
    auto v = src->tensor(name);
    const int64_t block = format == Format::kFp8 ? 128 : 64;
    const bool proj = name.size() > 12 && name.substr(name.size() - 12) == "_proj.weight" && v->shape.size() == 2 &&
                      v->shape[1] % block == 0;
    const bool experts = name.size() > 5 && name.substr(name.size() - 5) == "_proj" && v->shape.size() == 3;
    if (format == Format::kMxfp4 ? !experts : !proj) {
      out.push_back(owned(name, v->dtype, v->shape, v->data, v->nbytes));
      continue;
    }
    std::vector<float> w(std::size_t(v->numel()));
    EXPECT_TRUE(engine::to_f32(*v, w.data(), 0, w.size()).is_ok());
    if (format == Format::kMxfp4)
      mxfp4_parts(name, w, v->shape[0], v->shape[1], v->shape[2], out);
    else
      (format == Format::kFp8 ? fp8_parts : nvfp4_parts)(name, w, v->shape[0], v->shape[1], out);
    ++quantized;
  }
  EXPECT_GT(quantized, 0u);
  EXPECT_TRUE(engine::write_safetensors(dir / "model.safetensors", out).is_ok());
  std::ofstream(dir / "config.json") << src->config_text();
  if (!src->generation_config_text().empty())
    std::ofstream(dir / "generation_config.json") << src->generation_config_text();
  return dir;
}

// The checkpoint with its quantized weights as F32 values (MXFP4 experts [E, out, in] back in HF's
// [E, in, out]) and every other tensor as stored: a bf16 matrix stays bf16, so both models take the
// same path there (bf16 activations into AMX or cuBLAS) and differ by the quantized products alone.
fs::path write_dequantised(const fs::path& from, const fs::path& dir) {
  auto src = engine::Checkpoint::open(from);
  EXPECT_TRUE(src.is_ok()) << src.status().to_string();
  std::vector<engine::OwnedTensor> out;
  for (const std::string& name : src->tensor_names()) {
    auto v = src->tensor(name);
    if (!engine::dtype_is_block(v->dtype)) {
      out.push_back(owned(name, v->dtype, v->shape, v->data, v->nbytes));
      continue;
    }
    std::vector<float> w(std::size_t(v->numel()));
    EXPECT_TRUE(engine::to_f32(*v, w.data(), 0, w.size()).is_ok()) << name;
    std::vector<int64_t> shape = v->shape;
    if (name.ends_with("experts.up_proj")) continue;  // with gate_proj, below
    if (name.ends_with("experts.gate_proj") && v->dtype == DType::kMXFP4) {
      // gpt-oss's gate and up rows (presented apart) interleaved again, [E, H, 2I] as in HF's bf16.
      const auto up = src->tensor(name.substr(0, name.size() - std::string_view("gate_proj").size()) + "up_proj");
      std::vector<float> u(w.size());
      EXPECT_TRUE(up.is_ok() && engine::to_f32(*up, u.data(), 0, u.size()).is_ok()) << name;
      const int64_t E = shape[0], I = shape[1], H = shape[2];
      std::vector<float> t(2 * w.size());
      for (int64_t e = 0; e < E; ++e)
        for (int64_t i = 0; i < I; ++i)
          for (int64_t h = 0; h < H; ++h) {
            t[std::size_t((e * H + h) * 2 * I + 2 * i)] = w[std::size_t((e * I + i) * H + h)];
            t[std::size_t((e * H + h) * 2 * I + 2 * i + 1)] = u[std::size_t((e * I + i) * H + h)];
          }
      const std::string gate_up = name.substr(0, name.size() - std::string_view("gate_proj").size()) + "gate_up_proj";
      out.push_back(owned(gate_up, DType::kF32, {E, H, 2 * I}, t.data(), t.size() * 4));
      continue;
    }
    if (v->dtype == DType::kMXFP4 && shape.size() == 3) {
      const int64_t E = shape[0], O = shape[1], I = shape[2];
      std::vector<float> t(w.size());
      for (int64_t e = 0; e < E; ++e)
        for (int64_t o = 0; o < O; ++o)
          for (int64_t i = 0; i < I; ++i) t[std::size_t((e * I + i) * O + o)] = w[std::size_t((e * O + o) * I + i)];
      w = std::move(t);
      shape = {E, I, O};
    }
    out.push_back(owned(name, DType::kF32, shape, w.data(), w.size() * 4));
  }
  EXPECT_TRUE(engine::write_safetensors(dir / "model.safetensors", out).is_ok());
  std::ofstream(dir / "config.json") << src->config_text();
  return dir;
}

// slots > 0: the routed experts stay in host RAM, `slots` of them at a time in VRAM (the split
// planner's policy serving the misses).
std::unique_ptr<engine::Model> load(const fs::path& dir, BackendKind backend, int slots = 0) {
  engine::LoadOptions o;
  o.backend = backend;
  o.deterministic = true;
  // A small KV pool: on the GPU the default is all the budget leaves, and each test holds two models.
  o.kv_budget_bytes = 64ull << 20;
  if (slots > 0) {
    o.expert_slots = slots;
    o.threads = 2;
  }
  auto m = engine::load_model(dir, o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// Two models' logits: every position of a prefill of `ids`, then each of `steps` decode steps (one
// token a pass, the products decode sizes take). A prefill position whose experts the two models
// chose differently in some layer (a near-tie the products' rounding flipped, as in the HF golden
// tests) is counted, not compared: its logits follow other experts.
struct Gap {
  double worst = 0;  // over the positions routed alike and the decode steps
  std::size_t flipped = 0, positions = 0;
};
Gap logits_gap(const fs::path& a_dir, const fs::path& b_dir, BackendKind backend, const std::vector<int32_t>& ids,
               std::size_t steps, int a_slots = 0) {
  Gap gap;
  auto a = load(a_dir, backend, a_slots), b = load(b_dir, backend);
  if (!a || !b) return {1.0, 0, 0};
  const std::size_t V = std::size_t(a->vocab_size()), T = ids.size();
  engine::SequenceState sa = a->new_state(), sb = b->new_state();
  std::vector<float> la(T * V), lb(T * V);
  engine::RoutingTrace ta, tb;
  a->set_routing_trace(&ta);
  b->set_routing_trace(&tb);
  EXPECT_TRUE(a->forward(sa, ids, la.data(), engine::LogitsMode::kAll).is_ok());
  EXPECT_TRUE(b->forward(sb, ids, lb.data(), engine::LogitsMode::kAll).is_ok());
  a->set_routing_trace(nullptr);
  b->set_routing_trace(nullptr);
  EXPECT_EQ(ta.calls.size(), tb.calls.size());
  gap.positions = T;
  for (std::size_t t = 0; t < T; ++t) {
    bool flipped = false;
    for (std::size_t c = 0; c < std::min(ta.calls.size(), tb.calls.size()); ++c) {
      std::vector<int32_t> x(ta.calls[c].begin() + long(t * ta.top_k), ta.calls[c].begin() + long((t + 1) * ta.top_k));
      std::vector<int32_t> y(tb.calls[c].begin() + long(t * tb.top_k), tb.calls[c].begin() + long((t + 1) * tb.top_k));
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      flipped = flipped || x != y;
    }
    gap.flipped += flipped;
    if (!flipped) gap.worst = std::max(gap.worst, rel_l2(&la[t * V], &lb[t * V], V));
  }
  for (std::size_t i = 0; i < steps; ++i) {
    const std::vector<int32_t> next = {ids[i % T]};
    EXPECT_TRUE(a->forward(sa, next, la.data(), engine::LogitsMode::kLast).is_ok());
    EXPECT_TRUE(b->forward(sb, next, lb.data(), engine::LogitsMode::kLast).is_ok());
    gap.worst = std::max(gap.worst, rel_l2(la.data(), lb.data(), V));
  }
  return gap;
}

void expect_close(const Gap& gap, double tol, const std::string& what) {
  EXPECT_LT(gap.worst, tol) << what;
  EXPECT_LE(gap.flipped * 20, gap.positions)
      << what << ": " << gap.flipped << " of " << gap.positions << " positions routed otherwise";
  std::printf("[ %s ] worst logits rel L2 %.3g; %zu of %zu positions with a flipped routing\n", what.c_str(), gap.worst,
              gap.flipped, gap.positions);
}

// The products' own error, as these random models amplify it. The CPU's are fp32 in another order
// than the dense model's (up to 2e-4 here). The GPU's prefill products on blocks run through bf16
// hi + lo planes (~2^-16 of each product, against the dense model's fp32 cuBLAS), a MoE's routed
// experts through one fp16 plane (~2^-11 a factor): 1.1e-3 (FP8), 1.5e-3 (NVFP4) and 1.7e-3 (gpt-oss
// MXFP4) measured in these tiny models with every matrix quantized, 2-3e-4 in the wide ones. A
// wrong value anywhere is orders of magnitude more.
double tolerance(BackendKind backend) { return backend == BackendKind::kCuda ? 3e-3 : 1e-3; }

class QuantModel : public ::testing::TestWithParam<std::tuple<Format, BackendKind>> {};

TEST_P(QuantModel, LogitsOnTheQuantizedWeightsEqualThoseOnTheirDequantisedValues) {
  const auto [format, backend] = GetParam();
  FT_SKIP_UNLESS_RUNNABLE(backend);
  const std::string family = format == Format::kMxfp4 ? "gpt_oss" : "qwen3_moe";
  if (!fixture_present(family)) GTEST_SKIP() << "no " << family << " fixture";
  TempDir q, d;
  const fs::path quantized = write_quantized(fixture_checkpoint(family), format, q.path());
  const fs::path dense = write_dequantised(quantized, d.path());
  auto ckpt = engine::Checkpoint::open(quantized);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  auto wq = ckpt->tensor(format == Format::kMxfp4 ? "model.layers.0.mlp.experts.gate_proj"
                                                  : "model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(wq.is_ok());
  EXPECT_EQ(wq->dtype, format == Format::kFp8     ? DType::kF8E4M3B128
                       : format == Format::kNvfp4 ? DType::kNVFP4
                                                  : DType::kMXFP4);
  expect_close(
      logits_gap(quantized, dense, backend, test_tokens(24, 1024), 4), tolerance(backend),
      family + " " + format_name(format) + " on " + engine::backend_name(backend) + " against the dequantised weights");
}

// Every matrix in whole 256-value units (hidden, heads and experts 256 wide), so the decode steps
// take the GPU's lane kernels for FP8 and NVFP4, linear and MoE alike.
TEST_P(QuantModel, WideModelsDecodeAsTheirDequantisedValuesDo) {
  const auto [format, backend] = GetParam();
  FT_SKIP_UNLESS_RUNNABLE(backend);
  if (format == Format::kMxfp4) GTEST_SKIP() << "MXFP4 is gpt-oss's experts' format (the test above)";
  engine::RandomCheckpointSpec spec;
  spec.family = engine::ModelFamily::kQwen3Moe;
  spec.vocab_size = 512;
  spec.hidden_size = 256;
  spec.num_layers = 2;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_dim = 64;
  spec.intermediate_size = 512;
  spec.num_experts = 8;
  spec.top_k = 2;
  spec.moe_intermediate_size = 256;
  TempDir src, q, d;
  ASSERT_TRUE(engine::write_random_checkpoint(src.path(), spec).is_ok());
  const fs::path quantized = write_quantized(src.path(), format, q.path());
  const std::string what =
      std::string("wide qwen3_moe ") + format_name(format) + " on " + engine::backend_name(backend);
  expect_close(
      logits_gap(quantized, write_dequantised(quantized, d.path()), backend, test_tokens(16, spec.vocab_size), 6),
      tolerance(backend), what + " against the dequantised weights");
  if (backend != BackendKind::kCuda) return;
  // The experts in host RAM as stored, 4 VRAM slots for 8 experts a layer: prefill streams them
  // through the slots, decode fetches or computes the misses on the CPU, on the same blocks (the
  // CPU's fp32 sums in another order than the GPU's lanes: 2.2e-4 measured for FP8).
  expect_close(logits_gap(quantized, quantized, backend, test_tokens(16, spec.vocab_size), 6, 4), 1e-3,
               what + ", experts in host RAM, against all in VRAM");
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantModel,
                         ::testing::Combine(::testing::Values(Format::kFp8, Format::kNvfp4, Format::kMxfp4),
                                            ::testing::Values(BackendKind::kCpu, BackendKind::kCuda)),
                         [](const auto& info) {
                           return std::string(format_name(std::get<0>(info.param))) + "_" +
                                  engine::backend_name(std::get<1>(info.param));
                         });

// ---- DeepSeek-V4's released formats -------------------------------------------------------------
// FP8 linears: X.weight E4M3 with X.scale UE8M0 (F8_E8M0) a 128x128 tile; routed experts FP4: X.weight
// I8 [out, in/2] (E2M1 pairs, the even value in the low nibble) with X.scale UE8M0 [out, in/32].

// The formats' definitions, written apart from the engine's: UE8M0 2^(e - 127) with 255 NaN; E2M1
// sign, then magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}; E4M3 bias 7, subnormals m * 2^-9, S.1111.111 NaN.
float ue8m0(std::uint8_t e) { return e == 255 ? std::nanf("") : std::ldexp(1.0f, int(e) - 127); }
float e2m1(std::uint8_t code) {
  static constexpr float kMagnitude[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  return code & 8 ? -kMagnitude[code & 7] : kMagnitude[code & 7];
}
float e4m3(std::uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::nanf("");
  const float v = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), e - 10);
  return code & 0x80 ? -v : v;
}
// Value i of a row of FP4 bytes: the low nibble holds the even value.
std::uint8_t fp4_code(const std::uint8_t* row, std::size_t i) { return (row[i / 2] >> (4 * (i & 1))) & 0x0F; }

// DeepSeek's UE8M0 scale of a block whose largest magnitude is amax and whose codes reach `top`: the
// least power of two with amax / scale <= top.
std::uint8_t ue8m0_for(float amax, float top) {
  if (!(amax > 0)) return 127;
  int k;
  const float f = std::frexp(amax / top, &k);  // f * 2^k, f in [0.5, 1)
  return std::uint8_t(std::clamp((f == 0.5f ? k - 1 : k) + 127, 0, 254));
}

// Same value and the same bits, but a NaN for a NaN and +0 for -0 (ggml's MXFP4 table has no -0).
void expect_value(float got, float want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": " << got;
  } else if (want == 0) {
    EXPECT_EQ(got, 0.0f) << what;
  } else {
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << what << ": " << got << " vs " << want;
  }
}

TEST(QuantFormats, Ue8m0ScalesConvertByTheirDefinition) {
  std::vector<std::uint8_t> codes(256);
  for (int e = 0; e < 256; ++e) codes[std::size_t(e)] = std::uint8_t(e);
  const engine::TensorView v{"s", DType::kF8E8M0, {256}, reinterpret_cast<const std::byte*>(codes.data()), 256};
  std::vector<float> got(256);
  ASSERT_TRUE(engine::to_f32(v, got.data(), 0, 256).is_ok());
  for (int e = 0; e < 255; ++e) EXPECT_EQ(got[std::size_t(e)], std::ldexp(1.0, e - 127)) << "e = " << e;
  EXPECT_TRUE(std::isnan(got[255]));
  EXPECT_EQ(got[127], 1.0f);
  EXPECT_EQ(std::fpclassify(got[0]), FP_SUBNORMAL);  // 2^-127
  EXPECT_EQ(got[254], 0x1p127f);
  EXPECT_STREQ(engine::dtype_name(DType::kF8E8M0), "F8_E8M0");
  EXPECT_STREQ(engine::dtype_name(DType::kI8), "I8");
}

// FP4 experts, 2-D as the releases store them (I8 codes, F8_E8M0 scales) and 3-D with both parts U8:
// every code in both nibbles, beside scales from 2^-127 to 2^127, against the definition value by
// value. The value order pins the nibble order: a swapped pair reads other codes.
TEST(QuantFormats, DeepseekV4Fp4ExpertsReadAsMxfp4ValueByValue) {
  const std::vector<std::uint8_t> exps = {0, 1, 2, 60, 126, 127, 128, 131, 200, 252, 253, 254};
  struct Case {
    std::string name;
    std::vector<int64_t> shape;  // in values
    DType codes_dtype, scales_dtype;
  };
  for (const Case& c : {Case{"layers.1.ffn.experts.3.w1", {6, 64}, DType::kI8, DType::kF8E8M0},
                        Case{"experts.w2", {2, 3, 96}, DType::kU8, DType::kU8}}) {
    int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < c.shape.size(); ++i) rows *= c.shape[i];
    const int64_t C = c.shape.back();
    std::vector<std::uint8_t> codes(std::size_t(rows * C / 2)), scales(std::size_t(rows * C / 32));
    for (std::size_t k = 0; k < codes.size(); ++k)
      codes[k] = std::uint8_t((k * 7 + k / 13) % 16 | ((k * 3 + 5) % 16) << 4);
    for (std::size_t g = 0; g < scales.size(); ++g) scales[g] = exps[g % exps.size()];
    std::vector<int64_t> packed = c.shape, scale_shape = c.shape;
    packed.back() /= 2;
    scale_shape.back() /= 32;
    TempDir tmp;
    std::vector<engine::OwnedTensor> parts = {
        owned(c.name + ".weight", c.codes_dtype, packed, codes.data(), codes.size()),
        owned(c.name + ".scale", c.scales_dtype, scale_shape, scales.data(), scales.size())};
    ASSERT_TRUE(engine::write_safetensors(tmp.path() / "model.safetensors", parts).is_ok());
    std::ofstream(tmp.path() / "config.json") << "{}";
    auto ckpt = engine::Checkpoint::open(tmp.path());
    ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
    auto t = ckpt->tensor(c.name + ".weight");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype, DType::kMXFP4);
    EXPECT_EQ(t->shape, c.shape);
    const std::vector<float> got = values_of(*ckpt, c.name + ".weight");
    ASSERT_EQ(got.size(), std::size_t(rows * C));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < C; ++i) {
        const std::uint8_t code = fp4_code(codes.data() + r * C / 2, std::size_t(i));
        const std::uint8_t e = scales[std::size_t(r * C / 32 + i / 32)];
        expect_value(got[std::size_t(r * C + i)], e2m1(code) * ue8m0(e),
                     c.name + " [" + std::to_string(r) + ", " + std::to_string(i) + "] code " + std::to_string(code) +
                         " e " + std::to_string(e));
      }
    EXPECT_FALSE(ckpt->has(c.name + ".scale"));
    const auto names = ckpt->tensor_names();
    EXPECT_EQ(names, std::vector<std::string>{c.name + ".weight"});
  }
}

// FP8 linears with UE8M0 tile scales (X.scale as the releases name it, X.weight_scale_inv as HF's
// quantizer renames it) and fp32 ones (DeepSeek-V4-Flash-Base): every E4M3 code, a tile at 2^-127,
// one at 2^127, one NaN, rows that end inside a tile.
TEST(QuantFormats, DeepseekV4Fp8LinearsWithUe8m0TileScalesReadByDefinition) {
  const int64_t R = 200, C = 256;
  std::vector<std::uint8_t> codes(std::size_t(R * C));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) codes[std::size_t(r * C + c)] = std::uint8_t((r * 131 + c * 7) & 0xFF);
  const std::vector<std::uint8_t> tiles = {0, 127, 254, 255};  // [2, 2]
  const float f32_tiles[4] = {0.375f, 1e-3f, 3.0f, 0.5f};
  TempDir tmp;
  std::vector<engine::OwnedTensor> parts = {
      owned("layers.0.attn.wq_a.weight", DType::kF8E4M3, {R, C}, codes.data(), codes.size()),
      owned("layers.0.attn.wq_a.scale", DType::kF8E8M0, {2, 2}, tiles.data(), tiles.size()),
      owned("model.layers.0.self_attn.o_b_proj.weight", DType::kF8E4M3, {R, C}, codes.data(), codes.size()),
      owned("model.layers.0.self_attn.o_b_proj.weight_scale_inv", DType::kF8E8M0, {2, 2}, tiles.data(), tiles.size()),
      owned("layers.0.ffn.experts.0.w1.weight", DType::kF8E4M3, {R, C}, codes.data(), codes.size()),
      owned("layers.0.ffn.experts.0.w1.scale", DType::kF32, {2, 2}, f32_tiles, sizeof f32_tiles)};
  ASSERT_TRUE(engine::write_safetensors(tmp.path() / "model.safetensors", parts).is_ok());
  std::ofstream(tmp.path() / "config.json") << R"({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
      "scale_fmt": "ue8m0", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}})";
  auto ckpt = engine::Checkpoint::open(tmp.path());
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  for (const char* name :
       {"layers.0.attn.wq_a.weight", "model.layers.0.self_attn.o_b_proj.weight", "layers.0.ffn.experts.0.w1.weight"}) {
    auto t = ckpt->tensor(name);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype, DType::kF8E4M3B128);
    const bool f32 = std::string(name).find("experts") != std::string::npos;
    const std::vector<float> got = values_of(*ckpt, name);
    ASSERT_EQ(got.size(), std::size_t(R * C));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const std::size_t tile = std::size_t(r / 128 * 2 + c / 128);
        const float scale = f32 ? f32_tiles[tile] : ue8m0(tiles[tile]);
        const float want = e4m3(codes[std::size_t(r * C + c)]) * scale;
        const float v = got[std::size_t(r * C + c)];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(v)) << name << " [" << r << ", " << c << "]";
        } else {
          EXPECT_EQ(std::bit_cast<uint32_t>(v), std::bit_cast<uint32_t>(want)) << name << " [" << r << ", " << c << "]";
        }
      }
  }
  for (const char* part : {"layers.0.attn.wq_a.scale", "model.layers.0.self_attn.o_b_proj.weight_scale_inv",
                           "layers.0.ffn.experts.0.w1.scale"})
    EXPECT_FALSE(ckpt->has(part)) << part;
}

// FP8 as the releases store it: a UE8M0 scale a 128x128 tile, the least power of two that brings
// the tile within E4M3's 448. `dense` gets the values by definition.
void v4_fp8_parts(const std::string& name, const std::vector<float>& w, int64_t R, int64_t C,
                  std::vector<engine::OwnedTensor>& out, std::vector<float>& dense) {
  const int64_t TR = (R + 127) / 128, TC = C / 128;
  std::vector<std::uint8_t> scale(std::size_t(TR * TC)), codes(w.size());
  dense.resize(w.size());
  for (int64_t i = 0; i < TR; ++i)
    for (int64_t j = 0; j < TC; ++j) {
      float amax = 0;
      for (int64_t r = i * 128; r < std::min(R, i * 128 + 128); ++r)
        for (int64_t c = j * 128; c < j * 128 + 128; ++c) amax = std::max(amax, std::fabs(w[std::size_t(r * C + c)]));
      const std::uint8_t e = ue8m0_for(amax, 448.0f);
      scale[std::size_t(i * TC + j)] = e;
      for (int64_t r = i * 128; r < std::min(R, i * 128 + 128); ++r)
        for (int64_t c = j * 128; c < j * 128 + 128; ++c) {
          const std::size_t at = std::size_t(r * C + c);
          codes[at] = to_e4m3(w[at] / ue8m0(e));
          dense[at] = e4m3(codes[at]) * ue8m0(e);
        }
    }
  const std::string stem = name.substr(0, name.size() - 6);  // "X." of "X.weight"
  out.push_back(owned(name, DType::kF8E4M3, {R, C}, codes.data(), codes.size()));
  out.push_back(owned(stem + "scale", DType::kF8E8M0, {TR, TC}, scale.data(), scale.size()));
}

// FP4 as the releases store the routed experts: a UE8M0 scale a 32 values, the least power of two
// that brings them within E2M1's 6; two codes a byte, the even value low.
void v4_fp4_parts(const std::string& name, const std::vector<float>& w, int64_t R, int64_t C,
                  std::vector<engine::OwnedTensor>& out, std::vector<float>& dense) {
  std::vector<std::uint8_t> codes(w.size() / 2, 0), scales(w.size() / 32);
  dense.resize(w.size());
  for (std::size_t g = 0; g < scales.size(); ++g) {
    float amax = 0;
    for (std::size_t k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(w[g * 32 + k]));
    scales[g] = ue8m0_for(amax, 6.0f);
    const float s = ue8m0(scales[g]);
    for (std::size_t k = 0; k < 32; ++k) {
      const std::size_t at = g * 32 + k;
      const std::uint8_t code = to_e2m1(w[at] / s);
      codes[at / 2] |= std::uint8_t(code << (4 * (at & 1)));
      dense[at] = e2m1(code) * s;
    }
  }
  const std::string stem = name.substr(0, name.size() - 6);
  out.push_back(owned(name, DType::kI8, {R, C / 2}, codes.data(), codes.size()));
  out.push_back(owned(stem + "scale", DType::kF8E8M0, {R, C / 32}, scales.data(), scales.size()));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `from` (a bf16 deepseek_v4 checkpoint under the releases' names) in the releases' formats, FP8
// linears (the attention's, the indexer's query, the shared expert) and FP4 routed experts, with
// their quantization_config and expert_dtype; and beside it the same model in bf16 holding those
// weights' values by the formats' definitions (exact in bf16: E4M3 and E2M1 times powers of two).
void write_v4_released(const fs::path& from, const fs::path& released, const fs::path& dense) {
  auto src = engine::Checkpoint::open(from);
  ASSERT_TRUE(src.is_ok()) << src.status().to_string();
  std::vector<engine::OwnedTensor> q, d;
  std::size_t fp8 = 0, fp4 = 0;
  for (const std::string& name : src->tensor_names()) {
    auto v = src->tensor(name);
    ASSERT_TRUE(v.is_ok());
    const bool linear = ends_with(name, ".attn.wq_a.weight") || ends_with(name, ".attn.wq_b.weight") ||
                        ends_with(name, ".attn.wkv.weight") || ends_with(name, ".attn.wo_a.weight") ||
                        ends_with(name, ".attn.wo_b.weight") || ends_with(name, ".attn.indexer.wq_b.weight") ||
                        name.find(".ffn.shared_experts.") != std::string::npos;
    const bool expert = name.find(".ffn.experts.") != std::string::npos;
    if (!linear && !expert) {
      q.push_back(owned(name, v->dtype, v->shape, v->data, v->nbytes));
      d.push_back(owned(name, v->dtype, v->shape, v->data, v->nbytes));
      continue;
    }
    ASSERT_EQ(v->shape.size(), 2u) << name;
    ASSERT_EQ(v->shape[1] % (linear ? 128 : 32), 0) << name;
    std::vector<float> w(std::size_t(v->numel())), values;
    ASSERT_TRUE(engine::to_f32(*v, w.data(), 0, w.size()).is_ok());
    (linear ? v4_fp8_parts : v4_fp4_parts)(name, w, v->shape[0], v->shape[1], q, values);
    ++(linear ? fp8 : fp4);
    std::vector<engine::bf16_t> b(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      b[i] = engine::f32_to_bf16(values[i]);
      ASSERT_EQ(engine::bf16_to_f32(b[i]), values[i]) << name << " " << i;
    }
    d.push_back(owned(name, DType::kBF16, v->shape, b.data(), b.size() * 2));
  }
  EXPECT_GT(fp8, 0u);
  EXPECT_GT(fp4, 0u);
  ASSERT_TRUE(engine::write_safetensors(released / "model.safetensors", q).is_ok());
  ASSERT_TRUE(engine::write_safetensors(dense / "model.safetensors", d).is_ok());
  auto config = nlohmann::json::parse(src->config_text());
  std::ofstream(dense / "config.json") << config.dump();
  config["expert_dtype"] = "fp4";
  config["quantization_config"] = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"scale_fmt", "ue8m0"},
                                   {"weight_block_size", {128, 128}},
                                   {"activation_scheme", "dynamic"}};
  std::ofstream(released / "config.json") << config.dump();
  for (const fs::path& dir : {released, dense})
    std::ofstream(dir / "generation_config.json") << src->generation_config_text();
}

// The tiny deepseek_v4 model (every attention kind, hash and score routing) under the releases'
// names, 128 wide where the FP8 linears read (hidden, q LoRA, the output groups, the shared expert).
engine::RandomCheckpointSpec v4_released_spec() {
  engine::RandomCheckpointSpec s = tiny_spec(engine::ModelFamily::kDeepseekV4, /*fused_experts=*/false);
  s.v4_released_names = true;
  s.hidden_size = 128;
  s.q_lora_rank = 128;
  s.num_heads = 4;
  s.head_dim = 64;
  s.o_groups = 2;
  s.o_lora_rank = 64;
  s.moe_intermediate_size = 128;
  return s;
}

class DeepseekV4Released : public ::testing::TestWithParam<BackendKind> {};

// The model on its released formats gives the logits of the bf16 model on their values: the same
// numbers on the reference, which converts both to fp32 row by row; on the CPU the block kernels'
// fp32 sums against the bf16 products. Greedy tokens identical.
TEST_P(DeepseekV4Released, LogitsEqualThoseOfTheBf16ModelOnTheirValues) {
  const BackendKind backend = GetParam();
  const engine::RandomCheckpointSpec spec = v4_released_spec();
  TempDir src, q, d;
  ASSERT_TRUE(engine::write_random_checkpoint(src.path(), spec).is_ok());
  write_v4_released(src.path(), q.path(), d.path());
  auto ckpt = engine::Checkpoint::open(q.path());
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  EXPECT_EQ(ckpt->tensor("layers.1.ffn.experts.0.w2.weight")->dtype, DType::kMXFP4);
  EXPECT_EQ(ckpt->tensor("layers.1.attn.wo_a.weight")->dtype, DType::kF8E4M3B128);
  EXPECT_EQ(ckpt->tensor("layers.1.attn.indexer.wq_b.weight")->dtype, DType::kF8E4M3B128);
  const std::vector<int32_t> ids = test_tokens(40, spec.vocab_size, 5);
  const std::string what = std::string("deepseek_v4 FP8 + FP4 on ") + engine::backend_name(backend);
  expect_close(logits_gap(q.path(), d.path(), backend, ids, 4), backend == BackendKind::kReference ? 1e-6 : 1e-2,
               what + " against the bf16 model on their values");
  auto a = load(q.path(), backend), b = load(d.path(), backend);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(greedy_steps(*a, ids, 8), greedy_steps(*b, ids, 8)) << what;
}

INSTANTIATE_TEST_SUITE_P(Backends, DeepseekV4Released, ::testing::Values(BackendKind::kReference, BackendKind::kCpu),
                         [](const auto& info) { return std::string(engine::backend_name(info.param)); });

// ---- broken files --------------------------------------------------------------------------------

// A checkpoint of `tensors` (name -> dtype, shape; zero bytes); the error opening it.
std::string open_error(const std::vector<engine::OwnedTensor>& tensors, const std::string& config = "{}") {
  TempDir tmp;
  EXPECT_TRUE(engine::write_safetensors(tmp.path() / "model.safetensors", tensors).is_ok());
  std::ofstream(tmp.path() / "config.json") << config;
  auto c = engine::Checkpoint::open(tmp.path());
  return c.is_ok() ? "" : c.status().message();
}

engine::OwnedTensor zeros(std::string name, DType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return engine::OwnedTensor{std::move(name), dtype, std::move(shape),
                             std::vector<std::byte>(std::size_t(n) * engine::dtype_size(dtype))};
}

TEST(QuantFormats, BrokenWeightsAreOneLineErrorsNamingTheTensor) {
  const std::string w = "model.layers.0.mlp.down_proj.weight";
  // A tile scale of the wrong shape.
  std::string e = open_error({zeros(w, DType::kF8E4M3, {256, 384}),
                              zeros("model.layers.0.mlp.down_proj.weight_scale_inv", DType::kF32, {2, 2})});
  EXPECT_NE(e.find("down_proj.weight_scale_inv"), std::string::npos) << e;
  EXPECT_NE(e.find("[2, 3]"), std::string::npos) << e;
  // FP8 without any scale.
  e = open_error({zeros(w, DType::kF8E4M3, {256, 384})});
  EXPECT_NE(e.find(w), std::string::npos) << e;
  // Columns that are not whole row blocks.
  e = open_error({zeros(w, DType::kF8E4M3, {256, 200}),
                  zeros("model.layers.0.mlp.down_proj.weight_scale_inv", DType::kF32, {2, 2})});
  EXPECT_NE(e.find("200 columns"), std::string::npos) << e;
  // Tiles narrower than a row block.
  e = open_error({zeros(w, DType::kF8E4M3, {256, 384}),
                  zeros("model.layers.0.mlp.down_proj.weight_scale_inv", DType::kF32, {4, 6})},
                 R"({"quantization_config": {"weight_block_size": [64, 64]}})");
  EXPECT_NE(e.find("64 columns wide"), std::string::npos) << e;
  // NVFP4 without its tensor scale; MXFP4 scales that do not match the blocks.
  e = open_error(
      {zeros(w, DType::kU8, {64, 96}), zeros("model.layers.0.mlp.down_proj.weight_scale", DType::kF8E4M3, {64, 12})});
  EXPECT_NE(e.find("weight_scale_2"), std::string::npos) << e;
  e = open_error({zeros("experts.down_proj_blocks", DType::kU8, {2, 64, 4, 16}),
                  zeros("experts.down_proj_scales", DType::kU8, {2, 64, 3})});
  EXPECT_NE(e.find("experts.down_proj_scales"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  // DeepSeek-V4's parts: a tile scale or an FP4 scale of the wrong shape or dtype, a NaN FP4 scale.
  e = open_error({zeros("layers.0.attn.wq_a.weight", DType::kF8E4M3, {256, 384}),
                  zeros("layers.0.attn.wq_a.scale", DType::kF8E8M0, {2, 2})});
  EXPECT_NE(e.find("layers.0.attn.wq_a.scale"), std::string::npos) << e;
  EXPECT_NE(e.find("[2, 3]"), std::string::npos) << e;
  const std::string x = "layers.0.ffn.experts.0.w1";
  e = open_error({zeros(x + ".weight", DType::kI8, {64, 48}), zeros(x + ".scale", DType::kF8E8M0, {64, 4})});
  EXPECT_NE(e.find(x + ".scale"), std::string::npos) << e;
  EXPECT_NE(e.find("[64, 3]"), std::string::npos) << e;
  e = open_error({zeros(x + ".weight", DType::kI8, {64, 48}), zeros(x + ".scale", DType::kF32, {64, 3})});
  EXPECT_NE(e.find("is F32 [64, 3], expected F8_E8M0"), std::string::npos) << e;
  engine::OwnedTensor nan_scale = zeros(x + ".scale", DType::kF8E8M0, {64, 3});
  nan_scale.data[100] = std::byte{0xFF};
  e = open_error({zeros(x + ".weight", DType::kI8, {64, 48}), nan_scale});
  EXPECT_NE(e.find(x + ".scale' holds the E8M0 NaN code 0xFF (scale 100)"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  // compressed-tensors' packed weights are named, not misread.
  e = open_error({zeros("model.layers.0.mlp.down_proj.weight_packed", DType::kU8, {64, 96})});
  EXPECT_NE(e.find("weight_packed' is packed by compressed-tensors"), std::string::npos) << e;
}

}  // namespace
}  // namespace ft::test

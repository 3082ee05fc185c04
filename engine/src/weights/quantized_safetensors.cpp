#include "weights/quantized_safetensors.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ft/engine/bf16.h"
#include "ops/block_fields.h"

namespace ft::engine {
namespace {

constexpr int64_t kFp8Block = 128;  // values per F8_E4M3_B128 row block
constexpr int64_t kNvfp4Block = 64;
constexpr int64_t kNvfp4Group = 16;
constexpr int64_t kMxfp4Group = 32;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  TensorView v;
  v.shape = shape;
  return v.shape_string();
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool is_float_scale(const SafetensorsEntry& e) { return e.dtype == DType::kF32 || e.dtype == DType::kBF16; }
// UE8M0 scales (DeepSeek-V4's releases): F8_E8M0, or the same bytes stored as U8.
bool is_e8m0_scale(const SafetensorsEntry& e) { return e.dtype == DType::kF8E8M0 || e.dtype == DType::kU8; }

float scale_at(const TensorView& v, std::size_t i) {
  if (v.dtype == DType::kF8E8M0 || v.dtype == DType::kU8)
    return std::bit_cast<float>(e8m0_bits(std::to_integer<std::uint32_t>(v.data[i])));
  if (v.dtype == DType::kF32) {
    float f;
    std::memcpy(&f, v.data + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, v.data + 2 * i, 2);
  return bf16_to_f32(h);
}

// FP8's tile from the config (quantization_config.weight_block_size), 128 x 128 when it names none.
std::pair<int64_t, int64_t> fp8_tile(const std::string& config_json) {
  const auto cfg = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_object()) {
    const auto q = cfg.find("quantization_config");
    if (q != cfg.end() && q->is_object()) {
      const auto b = q->find("weight_block_size");
      if (b != q->end() && b->is_array() && b->size() == 2 && (*b)[0].is_number_integer() &&
          (*b)[1].is_number_integer() && (*b)[0].get<int64_t>() > 0 && (*b)[1].get<int64_t>() > 0)
        return {(*b)[0].get<int64_t>(), (*b)[1].get<int64_t>()};
    }
  }
  return {kFp8Block, kFp8Block};
}

using Entries = std::map<std::string, SafetensorsEntry, std::less<>>;

const SafetensorsEntry* find(const Entries& entries, const std::string& name) {
  const auto it = entries.find(name);
  return it == entries.end() ? nullptr : &it->second;
}

Status whole_blocks(const std::string& name, int64_t cols, int64_t block, const char* format) {
  if (cols % block == 0) return Status::ok();
  return unsupported("tensor '" + name + "' has " + std::to_string(cols) + " columns, not a whole number of the " +
                     std::to_string(block) + "-value row blocks its " + format + " values are computed in");
}

Result<QuantizedWeight> fp8_weight(const Entries& entries, const std::string& name, const SafetensorsEntry& e,
                                   std::pair<int64_t, int64_t> tile) {
  const std::string stem = name.substr(0, name.size() - std::string_view(".weight").size());
  if (e.shape.size() < 2)
    return corrupt("FP8 tensor '" + name + "' has shape " + shape_text(e.shape) + ", not a matrix");
  const int64_t R = e.shape[e.shape.size() - 2], C = e.shape.back();
  QuantizedWeight w{
      QuantizedWeight::Kind::kFp8Tiles, name, DType::kF8E4M3B128, e.shape, name, "", "", tile.first, tile.second, {}};
  // DeepSeek-V4's releases name the tile scales X.scale (HF's FP8 quantizer renames them weight_scale_inv).
  const SafetensorsEntry* tiles = find(entries, stem + ".weight_scale_inv");
  if (tiles == nullptr) tiles = find(entries, stem + ".scale");
  if (const SafetensorsEntry* s = tiles) {
    std::vector<int64_t> want(e.shape.begin(), e.shape.end() - 2);
    want.push_back((R + tile.first - 1) / tile.first);
    want.push_back((C + tile.second - 1) / tile.second);
    if (!(is_float_scale(*s) || is_e8m0_scale(*s)) || s->shape != want)
      return corrupt("tensor '" + s->name + "' is " + s->dtype_spelling + " " + shape_text(s->shape) +
                     ", expected F32 or F8_E8M0 " + shape_text(want) + ": one scale a " + std::to_string(tile.first) +
                     "x" + std::to_string(tile.second) + " tile of '" + name + "' " + shape_text(e.shape));
    if (tile.second % kFp8Block != 0)
      return unsupported("tensor '" + name + "' is scaled in tiles " + std::to_string(tile.second) +
                         " columns wide; FreeToken computes FP8 in 128-value row blocks (a multiple is needed)");
    w.scales = s->name;
  } else if (const SafetensorsEntry* s = find(entries, stem + ".weight_scale")) {
    const bool per_row = s->shape == std::vector<int64_t>{R} || s->shape == std::vector<int64_t>{R, 1};
    if (!is_float_scale(*s) || (numel(s->shape) != 1 && !(per_row && e.shape.size() == 2)))
      return corrupt("tensor '" + s->name + "' is " + s->dtype_spelling + " " + shape_text(s->shape) +
                     ", expected an F32 scale for all of '" + name + "' ([]) or one a row ([" + std::to_string(R) +
                     "])");
    w.kind = QuantizedWeight::Kind::kFp8Rows;
    w.scales = s->name;
  } else {
    return unsupported("FP8 tensor '" + name + "' has no weight_scale_inv, scale or weight_scale beside it");
  }
  FT_RETURN_IF_ERROR(whole_blocks(name, C, kFp8Block, "FP8"));
  w.hidden = {w.scales};
  return w;
}

Result<QuantizedWeight> nvfp4_weight(const Entries& entries, const std::string& name, const SafetensorsEntry& e,
                                     const SafetensorsEntry& scale) {
  const std::string stem = name.substr(0, name.size() - std::string_view(".weight").size());
  if (e.shape.size() < 2)
    return corrupt("NVFP4 tensor '" + name + "' has shape " + shape_text(e.shape) + ", not a matrix");
  std::vector<int64_t> shape = e.shape;
  shape.back() *= 2;  // two E2M1 values a byte
  std::vector<int64_t> want(shape.begin(), shape.end() - 1);
  want.push_back(shape.back() / kNvfp4Group);
  if (scale.shape != want || shape.back() % kNvfp4Group != 0)
    return corrupt("tensor '" + scale.name + "' has shape " + shape_text(scale.shape) + ", expected " +
                   shape_text(want) + ": one E4M3 scale a 16 values of '" + name + "' " + shape_text(shape));
  const SafetensorsEntry* global = find(entries, stem + ".weight_scale_2");
  if (global == nullptr || global->dtype != DType::kF32 || numel(global->shape) != 1)
    return corrupt("NVFP4 tensor '" + name + "' needs an F32 " + stem + ".weight_scale_2 (its tensor scale)");
  FT_RETURN_IF_ERROR(whole_blocks(name, shape.back(), kNvfp4Block, "NVFP4"));
  QuantizedWeight w{QuantizedWeight::Kind::kNvfp4, name, DType::kNVFP4, shape, name, scale.name, global->name, 0, 0,
                    {scale.name, global->name}};
  return w;
}

Result<QuantizedWeight> mxfp4_weight(const Entries& entries, const std::string& name, const SafetensorsEntry& e) {
  const std::string stem = name.substr(0, name.size() - std::string_view("_blocks").size());
  const SafetensorsEntry* s = find(entries, stem + "_scales");
  if (e.shape.size() < 2 || e.shape.back() != 16)
    return corrupt("MXFP4 tensor '" + name + "' has shape " + shape_text(e.shape) + ", expected [.., groups, 16]");
  std::vector<int64_t> want(e.shape.begin(), e.shape.end() - 1);
  if (s->dtype != DType::kU8 || s->shape != want)
    return corrupt("tensor '" + s->name + "' is " + s->dtype_spelling + " " + shape_text(s->shape) + ", expected U8 " +
                   shape_text(want) + ": one E8M0 scale a 32 values of '" + name + "'");
  std::vector<int64_t> shape = want;
  shape.back() *= kMxfp4Group;
  return QuantizedWeight{
      QuantizedWeight::Kind::kMxfp4, stem, DType::kMXFP4, shape, name, s->name, "", 0, 0, {name, s->name}};
}

// gpt-oss's interleaved gate_up [E, 2I, H] as gate [E, I, H] (even rows) and up (odd rows): the
// expert kernels then read each in place instead of a copy of every other row.
bool is_gpt_oss_gate_up(const QuantizedWeight& w) {
  return w.kind == QuantizedWeight::Kind::kMxfp4 && ends_with(w.name, ".experts.gate_up_proj") && w.shape.size() == 3 &&
         w.shape[1] % 2 == 0;
}

std::pair<QuantizedWeight, QuantizedWeight> split_gate_up(QuantizedWeight w) {
  const std::string stem = w.name.substr(0, w.name.size() - std::string_view("gate_up_proj").size());
  w.shape[1] /= 2;
  w.row_step = 2;
  QuantizedWeight up = w;
  w.name = stem + "gate_proj";
  up.name = stem + "up_proj";
  up.row_offset = 1;
  up.hidden.clear();  // the parts are hidden once
  return {std::move(w), std::move(up)};
}

// DeepSeek-V4's FP4 experts: gpt-oss's MXFP4 values with the codes one row after another, so a row's
// groups of 32 are its blocks in order, as in X_blocks.
Result<QuantizedWeight> fp4_weight(const std::string& name, const SafetensorsEntry& e, const SafetensorsEntry& s) {
  if (e.shape.size() < 2)
    return corrupt("FP4 tensor '" + name + "' has shape " + shape_text(e.shape) + ", not a matrix");
  std::vector<int64_t> shape = e.shape;
  shape.back() *= 2;  // two E2M1 values a byte
  std::vector<int64_t> want(shape.begin(), shape.end() - 1);
  want.push_back(shape.back() / kMxfp4Group);
  if (!is_e8m0_scale(s) || s.shape != want || shape.back() % kMxfp4Group != 0)
    return corrupt("tensor '" + s.name + "' is " + s.dtype_spelling + " " + shape_text(s.shape) +
                   ", expected F8_E8M0 " + shape_text(want) + ": one UE8M0 scale a 32 values of the FP4 tensor '" +
                   name + "' " + shape_text(shape));
  return QuantizedWeight{QuantizedWeight::Kind::kMxfp4, name, DType::kMXFP4, shape, name, s.name, "", 0, 0, {s.name}};
}

}  // namespace

std::size_t QuantizedWeight::nbytes() const { return dtype_bytes(dtype, uint64_t(numel(shape))).value_or(0); }

Result<std::vector<QuantizedWeight>> find_quantized_weights(const Entries& entries, const std::string& config_json) {
  const auto tile = fp8_tile(config_json);
  std::vector<QuantizedWeight> out;
  for (const auto& [name, e] : entries) {
    std::optional<QuantizedWeight> w;
    const SafetensorsEntry* fp4_scale = nullptr;
    if ((e.dtype == DType::kI8 || e.dtype == DType::kU8) && ends_with(name, ".weight"))
      fp4_scale = find(entries, name.substr(0, name.size() - std::string_view("weight").size()) + "scale");
    if (e.dtype == DType::kF8E4M3 && ends_with(name, ".weight")) {
      FT_ASSIGN_OR_RETURN(w, fp8_weight(entries, name, e, tile));
    } else if (fp4_scale != nullptr) {
      FT_ASSIGN_OR_RETURN(w, fp4_weight(name, e, *fp4_scale));
    } else if (e.dtype == DType::kU8 && ends_with(name, ".weight")) {
      const SafetensorsEntry* scale = find(entries, name + "_scale");
      if (scale != nullptr && scale->dtype == DType::kF8E4M3) {
        FT_ASSIGN_OR_RETURN(w, nvfp4_weight(entries, name, e, *scale));
      }
    } else if (ends_with(name, ".weight_packed")) {
      // compressed-tensors' packed layouts (its NVFP4 and int4 schemes): their scales mean other things.
      return unsupported("tensor '" + name + "' is packed by compressed-tensors (" + e.dtype_spelling +
                         "), which FreeToken does not read; FP8, MXFP4 and ModelOpt's NVFP4 checkpoints load");
    } else if (e.dtype == DType::kU8 && ends_with(name, "_blocks") &&
               find(entries, name.substr(0, name.size() - 7) + "_scales") != nullptr) {
      FT_ASSIGN_OR_RETURN(w, mxfp4_weight(entries, name, e));
    }
    if (!w) continue;
    if (w->name == name) {  // presented under its codes' name (all but gpt-oss's X_blocks)
      w->hidden.push_back(name);
      const std::string input_scale = name.substr(0, name.size() - std::string_view("weight").size()) + "input_scale";
      if (find(entries, input_scale) != nullptr) w->hidden.push_back(input_scale);
    }
    if (is_gpt_oss_gate_up(*w)) {
      auto [gate, up] = split_gate_up(std::move(*w));
      out.push_back(std::move(gate));
      out.push_back(std::move(up));
      continue;
    }
    out.push_back(std::move(*w));
  }
  return out;
}

Status repack_quantized(const QuantizedWeight& w, const std::function<Result<TensorView>(std::string_view)>& part,
                        std::byte* out) {
  FT_ASSIGN_OR_RETURN(const TensorView codes, part(w.codes));
  FT_ASSIGN_OR_RETURN(const TensorView scales, part(w.scales));
  const int64_t C = w.shape.back(), rows = numel(w.shape) / C;
  const int64_t R = w.shape.size() >= 2 ? w.shape[w.shape.size() - 2] : 1;
  // The stored row a presented row comes from.
  const auto stored_row = [&](int64_t row) { return row / R * R * w.row_step + row % R * w.row_step + w.row_offset; };
  const DTypeBlock block = dtype_block(w.dtype);
  const std::size_t row_bytes = std::size_t(C / int64_t(block.elems)) * block.bytes;
  float global = 0;
  if (w.kind == QuantizedWeight::Kind::kNvfp4) {
    FT_ASSIGN_OR_RETURN(const TensorView g, part(w.global));
    std::memcpy(&global, g.data, 4);
  }
  const auto* q = reinterpret_cast<const std::uint8_t*>(codes.data);
  const auto* sc = reinterpret_cast<const std::uint8_t*>(scales.data);
  std::atomic<bool> nan_scale = false;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, 64), [&](const tbb::blocked_range<int64_t>& range) {
    for (int64_t row = range.begin(); row < range.end(); ++row) {
      auto* o = reinterpret_cast<std::uint8_t*>(out + std::size_t(row) * row_bytes);
      switch (w.kind) {
        case QuantizedWeight::Kind::kFp8Tiles:
        case QuantizedWeight::Kind::kFp8Rows: {
          const int64_t batch = row / R, r = row % R;
          const int64_t tile_cols = (C + w.tile_cols - 1) / w.tile_cols;
          const int64_t tiles_per_batch = (R + w.tile_rows - 1) / w.tile_rows * tile_cols;
          for (int64_t k = 0; k < C / kFp8Block; ++k, o += 4 + kFp8Block) {
            std::size_t s = 0;
            if (w.kind == QuantizedWeight::Kind::kFp8Tiles)
              s = std::size_t(batch * tiles_per_batch + r / w.tile_rows * tile_cols + k * kFp8Block / w.tile_cols);
            else if (scales.numel() != 1)
              s = std::size_t(r);
            const float d = scale_at(scales, s);
            std::memcpy(o, &d, 4);
            std::memcpy(o + 4, q + std::size_t(row * C + k * kFp8Block), kFp8Block);
          }
          break;
        }
        case QuantizedWeight::Kind::kNvfp4:
          for (int64_t k = 0; k < C / kNvfp4Block; ++k, o += 40) {
            std::memcpy(o, &global, 4);
            std::memcpy(o + 4, sc + std::size_t(row * (C / kNvfp4Group) + k * 4), 4);
            std::memcpy(o + 8, q + std::size_t(row * (C / 2) + k * 32), 32);
          }
          break;
        case QuantizedWeight::Kind::kMxfp4:
          for (int64_t g = 0; g < C / kMxfp4Group; ++g, o += 17) {
            const std::size_t group = std::size_t(stored_row(row) * (C / kMxfp4Group) + g);
            const std::uint8_t* b = q + group * 16;  // values 2i (low) and 2i + 1 in byte i
            if (sc[group] == 0xFF) nan_scale.store(true, std::memory_order_relaxed);
            o[0] = sc[group];  // ggml's block: the E8M0 byte, then values j and j + 16 in byte j
            for (int i = 0; i < 8; ++i) {
              o[1 + 2 * i] = std::uint8_t((b[i] & 0x0F) | (b[8 + i] & 0x0F) << 4);
              o[2 + 2 * i] = std::uint8_t(b[i] >> 4 | (b[8 + i] & 0xF0));
            }
          }
          break;
      }
    }
  });
  if (nan_scale) {
    // ggml's block reads E8M0 255 as 2^127 (its zero codes as 0): refused rather than computed otherwise.
    const std::size_t at = std::size_t(std::find(sc, sc + scales.numel(), 0xFF) - sc);
    return corrupt("tensor '" + w.scales + "' holds the E8M0 NaN code 0xFF (scale " + std::to_string(at) +
                   "), which the MXFP4 blocks of '" + w.name + "' cannot hold");
  }
  return Status::ok();
}

}  // namespace ft::engine

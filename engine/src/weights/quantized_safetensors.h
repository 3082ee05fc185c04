// Safetensors checkpoints whose weights are stored in a scaled low-precision format, as the released
// checkpoints store them, each weight split over several tensors (codes, scales):
//   - FP8 (DeepSeek-V3/V4, Qwen3-FP8, GLM FP8; "quant_method": "fp8"): X.weight F8_E4M3 [.., R, C]
//     with X.weight_scale_inv (DeepSeek-V4's releases: X.scale) [.., ceil(R/br), ceil(C/bc)] (one
//     scale a br x bc tile, config's weight_block_size, 128 x 128 by default; F32, BF16, or UE8M0 as
//     F8_E8M0 or U8), or X.weight_scale [], [R] or [R, 1] (per tensor or per row: ModelOpt and
//     compressed-tensors FP8); value = e4m3 * scale.
//   - MXFP4 (gpt-oss): X_blocks U8 [.., G, 16] (E2M1 pairs, the even value low) with X_scales U8
//     [.., G] (E8M0), 32 values a scale; presented as X. gpt-oss's experts.gate_up_proj interleaves
//     gate and up rows (gate 0, up 0, gate 1, ...): it is presented as experts.gate_proj and
//     experts.up_proj [experts, I, H], each a matrix of whole rows the kernels read in place.
//   - FP4 (DeepSeek-V4's routed experts, "expert_dtype": "fp4"): X.weight I8 or U8 [.., R, C/2] (E2M1
//     pairs, the even value low) with X.scale F8_E8M0 or U8 [.., R, C/32]: MXFP4's values, rows one
//     after another; presented as MXFP4. In both, a scale 0xFF (NaN) is refused: ggml's MXFP4 block,
//     which they become, has no NaN.
//   - NVFP4 (NVIDIA ModelOpt): X.weight U8 [.., R, C/2] (E2M1 pairs) with X.weight_scale F8_E4M3
//     [.., R, C/16] and X.weight_scale_2 F32 [] (the tensor's scale); value = e2m1 * (e4m3 * global).
// Each weight is presented as one tensor of a row-block dtype (dtype.h: F8_E4M3_B128, MXFP4, NVFP4)
// under the weight's name, its parts (and an activation X.input_scale, unused: activations stay in
// fp32/bf16) hidden. The blocks are a copy made once at load (the same bytes plus 3% for FP8's
// per-block scale, 11% for NVFP4's; MXFP4 and FP4 the bytes of codes and scales), which the block
// kernels then read like a GGUF file's.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/checkpoint.h"
#include "weights/safetensors.h"

namespace ft::engine {

struct QuantizedWeight {
  enum class Kind { kFp8Tiles, kFp8Rows, kMxfp4, kNvfp4 };
  Kind kind;
  std::string name;                          // as presented ("model.layers.0.mlp.down_proj.weight", "...gate_up_proj")
  DType dtype;                               // the row-block dtype it is presented in
  std::vector<int64_t> shape;                // in values: [.., rows, cols]
  std::string codes, scales, global;         // the stored tensors it is made of (global: NVFP4's scale_2)
  int64_t tile_rows = 128, tile_cols = 128;  // kFp8Tiles
  std::vector<std::string> hidden;           // every stored tensor it replaces (its parts, input_scale)
  // Row r of each [R, cols] matrix is the stored row r * row_step + row_offset (of R * row_step):
  // one of the row sets an interleaved tensor is split into.
  int64_t row_step = 1, row_offset = 0;
  std::size_t nbytes() const;
};

// The quantized weights among a checkpoint's tensors (`entries`, by name). `config_json` gives FP8's
// tile (quantization_config.weight_block_size). kCorrupt / kUnsupported name the tensor: a scale of
// the wrong shape or dtype, columns that are not whole row blocks, an FP8 weight without a scale.
Result<std::vector<QuantizedWeight>> find_quantized_weights(
    const std::map<std::string, SafetensorsEntry, std::less<>>& entries, const std::string& config_json);

// Writes `w`'s row blocks (w.nbytes() bytes) to `out`, reading its parts through `part` (a stored
// tensor's view by name). Rows are repacked in parallel.
Status repack_quantized(const QuantizedWeight& w, const std::function<Result<TensorView>(std::string_view)>& part,
                        std::byte* out);

}  // namespace ft::engine

// A Hugging Face checkpoint directory exactly as published: config.json (+ generation_config.json)
// and model.safetensors or sharded model-0000X-of-0000N.safetensors with model.safetensors.index.json;
// or a GGUF model file (llama.cpp's format, split or not), which presents itself as the HF checkpoint
// it was converted from (weights/gguf_hf.h): config.json rebuilt from its metadata, tensors under
// their HF names, still in their GGUF block dtypes.
// Files are mmap'd read-only; TensorView points into the mapping (zero copy) and stays valid as long
// as the Checkpoint lives. Weights stored in FP8, MXFP4 or NVFP4 (codes and scales in separate
// tensors) are the exception: repacked once at open into row blocks of one tensor each
// (weights/quantized_safetensors.h), their parts hidden.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/bf16.h"
#include "ft/engine/dtype.h"

namespace ft::engine {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // into the mmap'd file
  std::size_t nbytes = 0;           // for a block dtype: numel / block elems * block bytes

  int64_t numel() const;
  std::string shape_string() const;  // "[128, 2048]"
};

// Converts `count` elements starting at element `offset` of a F32/F16/BF16 or block-dtype view
// to float (a block dtype is dequantised a block at a time, the reference way: tests and small
// tensors).
Status to_f32(const TensorView& view, float* out, std::size_t offset, std::size_t count);

class Checkpoint {
 public:
  // Opens DIR: reads config.json (required), generation_config.json (optional), maps every
  // safetensors file. Errors: kNotFound (no config/weights), kCorrupt (truncated or malformed
  // safetensors header, offsets past the end of the file, shard index naming a missing file).
  // A path to a GGUF file (is_gguf_file: by its magic, so an Ollama blob too) opens that file
  // (GgufFile::open's errors, and kUnsupported for an architecture or tensor FreeToken has no HF
  // counterpart for).
  static Result<Checkpoint> open(const std::filesystem::path& path);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::filesystem::path& dir() const;           // the directory, or the .gguf file
  const std::string& config_text() const;             // config.json verbatim
  const std::string& generation_config_text() const;  // "" when absent

  bool has(std::string_view name) const;
  // kNotFound: "tensor 'model.layers.3.mlp.gate.weight' not found in <dir>".
  Result<TensorView> tensor(std::string_view name) const;
  // As tensor(), plus a shape check; kInvalidArgument names the tensor, wanted and actual shapes.
  Result<TensorView> tensor(std::string_view name, const std::vector<int64_t>& expected_shape) const;
  // The whole tensor converted to f32 after the shape check.
  Result<std::vector<float>> load_f32(std::string_view name, const std::vector<int64_t>& expected_shape) const;
  std::vector<std::string> tensor_names() const;  // sorted
  // The mapped safetensors files, whole, and the memory of the repacked weights (for pinning them
  // as the source of GPU copies).
  std::vector<std::span<const std::byte>> mapped_files() const;

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Writes one safetensors file (header sorted by name, 8-byte aligned data). Used by the demo-model
// maker and tests; `data` of each tensor must hold numel * dtype_size bytes.
struct OwnedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};
Status write_safetensors(const std::filesystem::path& path, const std::vector<OwnedTensor>& tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata = {});


}  // namespace ft::engine

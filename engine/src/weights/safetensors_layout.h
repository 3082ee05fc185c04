// Where each tensor of a safetensors file goes, decided before any data exists: the header bytes
// and every tensor's file offset. The in-memory writer and the streaming synthetic-model writer
// both lay files out through here, so they produce the same format.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/checkpoint.h"

namespace ft::engine {

struct TensorHeader {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;

  uint64_t nbytes() const;
};

struct SafetensorsLayout {
  std::string prefix;           // the 8-byte little-endian header length, then the JSON header padded to 8
  std::vector<uint64_t> begin;  // per input tensor: where its data starts, from the start of the file
  uint64_t file_size = 0;
};

// The header lists tensors by name; data goes widest dtype first (stable by name), as the reference
// writer does. kInvalidArgument for a reserved or duplicate name or a negative dimension.
Result<SafetensorsLayout> layout_safetensors(const std::vector<TensorHeader>& tensors,
                                             const std::vector<std::pair<std::string, std::string>>& metadata);

}  // namespace ft::engine

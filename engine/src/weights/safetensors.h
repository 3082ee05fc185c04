// Parsing and validation of one safetensors file's header. Private to the loader: callers use
// Checkpoint, which turns entries into TensorViews.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/checkpoint.h"

namespace ft::engine {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_spelling;  // as written in the header, for messages about dtypes we lack
  // Empty for a valid safetensors dtype FreeToken does not represent (F64, I8, ...): the file
  // still opens, and asking for that tensor reports kUnsupported.
  std::optional<DType> dtype;
  std::vector<int64_t> shape;
  std::size_t offset = 0;  // from the start of the file
  std::size_t nbytes = 0;
};

// The reference implementation refuses headers above 100 MB; so do we, before parsing them.
inline constexpr std::size_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Validates the whole header of a `size`-byte file at `data` (length prefix, JSON, dtypes, shapes,
// offsets inside the data section and matching dtype * numel, no overlaps). Errors are kCorrupt,
// one line, starting with `label` (the file's path).
Result<std::vector<SafetensorsEntry>> parse_safetensors_header(const std::byte* data, std::size_t size,
                                                               const std::string& label);

}  // namespace ft::engine

// Parsing and validation of one GGUF file's header (magic, version, metadata, tensor table) from
// its bytes. Private to the loader: callers use GgufFile, which maps the files and joins split parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/gguf.h"

namespace ft::engine {

inline constexpr std::size_t kGgufDefaultAlignment = 32;  // when general.alignment is absent
inline constexpr std::uint32_t kGgufMaxDims = 4;          // ggml's GGML_MAX_DIMS
// Arrays of arrays: gguf-py writes them, ggml refuses them. Depth is capped so that a hostile
// file cannot recurse the parser's stack away.
inline constexpr int kGgufMaxArrayDepth = 8;

struct GgufHeader {
  std::uint32_t version = 0;
  std::vector<GgufKv> kvs;          // keys and values point into the parsed bytes
  std::vector<GgufTensor> tensors;  // data points into the parsed bytes; file = 0
  std::size_t alignment = kGgufDefaultAlignment;
  std::size_t data_start = 0;  // offset of the data section (where tensor offsets count from)
};

// Bytes of one scalar of a fixed-size value type; 0 for string and array.
std::size_t gguf_scalar_bytes(GgufValueType t);

// Validates the whole header of a `size`-byte file at `data`: every count, length and dimension
// against the bytes that are there (no allocation larger than the file implies), the tensors'
// types, shapes (rows of whole blocks, element counts within int64), alignment, and that their
// data lies inside the file without overlapping. Errors are one line starting with `label`.
Result<GgufHeader> parse_gguf(const std::byte* data, std::size_t size, const std::string& label);

}  // namespace ft::engine

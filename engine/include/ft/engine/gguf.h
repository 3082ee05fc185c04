// GGUF files (llama.cpp's format, versions 2 and 3, little-endian) read in place: the files are
// mmap'd, metadata values and tensors are views into the mapping (zero copy), valid as long as the
// GgufFile lives. A model split by gguf-split (NAME-00001-of-0000N.gguf) opens as one file.
//
// Shapes: GGUF stores a tensor's dimensions fastest-first (ggml's ne[0] is the row length).
// GgufTensor::shape lists them slowest-first, as safetensors and PyTorch do: a matrix is
// [rows, cols], an expert stack [experts, rows, cols]; the last dimension is contiguous.
//
// Every count, length and offset of the header is checked against the file before it is used;
// anything wrong is a one-line kCorrupt (or kUnsupported) error naming the file and the key or tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/checkpoint.h"

namespace ft::engine {

// Metadata value types, numbered as in the file.
enum class GgufValueType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* gguf_value_type_name(GgufValueType type);  // "u32", "string", "array", ...

// One metadata value, undecoded: its bytes in the mapped file. The typed getters of GgufMetadata
// decode it on demand, so a 150k-string vocabulary costs nothing until someone asks for it.
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  GgufValueType elem_type = GgufValueType::kU8;  // arrays: the type of the elements
  std::uint64_t count = 0;                       // arrays: the number of elements
  const std::byte* data = nullptr;               // scalars: the value; arrays: the first element
  std::size_t size = 0;                          // bytes at `data`
};

struct GgufKv {
  std::string_view key;  // into the mapped file
  GgufValue value;
};

// The key-value metadata of a GGUF file (of the first file of a split model), with typed getters.
// A getter's errors: kNotFound (no such key), kInvalidArgument (another type, or an integer out of
// int64's range); both name the file and the key.
class GgufMetadata {
 public:
  GgufMetadata() = default;
  GgufMetadata(std::vector<GgufKv> kvs, std::string label);

  const std::vector<GgufKv>& entries() const { return kvs_; }  // in file order
  const GgufValue* find(std::string_view key) const;           // nullptr when absent

  Result<std::string_view> get_string(std::string_view key) const;
  Result<std::int64_t> get_int(std::string_view key) const;  // any integer type
  Result<double> get_float(std::string_view key) const;      // f32 or f64
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string_view>> get_strings(std::string_view key) const;  // array of strings
  Result<std::vector<std::int64_t>> get_ints(std::string_view key) const;         // array of any integer type
  Result<std::vector<double>> get_floats(std::string_view key) const;             // array of f32 or f64

 private:
  Result<const GgufValue*> typed(std::string_view key) const;
  Status wrong_type(std::string_view key, const GgufValue& v, const char* wanted) const;

  std::vector<GgufKv> kvs_;
  std::string label_;  // the file, for messages
};

// ggml's tensor types as GGUF numbers them (ggml.h), with their block layout. `dtype` is empty for a
// type FreeToken does not compute with (Q5_0, IQ2_XXS, ...): such a tensor still lists and maps,
// and TensorView access reports kUnsupported.
struct GgmlType {
  std::uint32_t id = 0;
  const char* name = "";  // ggml's spelling: "q4_K", "f16"
  std::uint32_t block_elems = 1;
  std::uint32_t block_bytes = 0;
  std::optional<DType> dtype;
};
const GgmlType* ggml_type(std::uint32_t id);  // nullptr: not a type of any ggml this build knows

struct GgufTensor {
  std::string name;
  std::uint32_t ggml_type = 0;  // the type id in the file
  std::optional<DType> dtype;   // empty: see GgmlType::dtype
  std::vector<int64_t> shape;   // slowest-first: [rows, cols] for a matrix (GGUF's ne reversed)
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
  std::size_t file = 0;    // which file of a split model (0 otherwise)
  std::size_t offset = 0;  // of the data, from the start of that file

  int64_t numel() const;
};

// A regular file that starts with GGUF's magic, whatever its name (Ollama keeps its models as
// blobs named by digest).
bool is_gguf_file(const std::filesystem::path& path);

class GgufFile {
 public:
  // Opens PATH. A file named NAME-0000k-of-0000N.gguf whose metadata says split.count = N opens all
  // N parts (any part may be given); metadata is the first part's. Errors: kNotFound (a missing
  // file or part), kIo, kCorrupt (a malformed or truncated header, tensors past the end of the file
  // or overlapping, parts that disagree), kUnsupported (big-endian, version 1 or > 3, a ggml type
  // this build does not know).
  static Result<GgufFile> open(const std::filesystem::path& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  std::uint32_t version() const;  // of the first file
  const GgufMetadata& metadata() const;
  const std::vector<GgufTensor>& tensors() const;  // in file order, part after part
  const GgufTensor* find(std::string_view name) const;
  // The tensor as a TensorView (shape slowest-first, dtype, bytes), for matrix_view and to_f32.
  // kNotFound; kUnsupported when its ggml type has no DType.
  Result<TensorView> tensor(std::string_view name) const;
  std::vector<std::filesystem::path> paths() const;  // the files, in part order
  std::vector<std::span<const std::byte>> mapped_files() const;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft::engine

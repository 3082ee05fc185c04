#include "weights/gguf_parse.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_set>

namespace ft::engine {

namespace {

// A read position in the file's bytes; every read checks that the bytes are there.
class Cursor {
 public:
  Cursor(const std::byte* data, std::size_t size) : data_(data), size_(size) {}

  std::size_t pos() const { return pos_; }
  std::size_t left() const { return size_ - pos_; }
  const std::byte* here() const { return data_ + pos_; }

  template <typename T>
  bool read(T& v) {
    if (left() < sizeof(T)) return false;
    std::memcpy(&v, here(), sizeof(T));  // little-endian on disk and on the host (dtype.cpp)
    pos_ += sizeof(T);
    return true;
  }
  bool skip(std::uint64_t n) {
    if (n > left()) return false;
    pos_ += std::size_t(n);
    return true;
  }
  // A GGUF string: u64 length, then that many bytes (not NUL-terminated).
  bool read_string(std::string_view& s) {
    std::uint64_t len = 0;
    const std::size_t start = pos_;
    if (!read(len) || len > left()) {
      pos_ = start;
      return false;
    }
    s = std::string_view(reinterpret_cast<const char*>(here()), std::size_t(len));
    pos_ += std::size_t(len);
    return true;
  }

 private:
  const std::byte* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace

std::size_t gguf_scalar_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

namespace {

bool valid_type(std::uint32_t t) { return t <= std::uint32_t(GgufValueType::kF64); }

// Keys and tensor names are quoted in messages; a hostile one could be long or hold newlines.
std::string shown(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 80) out += "...";
  return out + "'";
}

class Parser {
 public:
  Parser(const std::byte* data, std::size_t size, const std::string& label)
      : cur_(data, size), data_(data), size_(size), label_(label) {}

  Result<GgufHeader> run();

 private:
  Status fail(const std::string& what) const { return corrupt(label_ + ": " + what); }
  Status truncated(const std::string& what) const {
    return corrupt(label_ + ": " + what + " runs past the end of the " + std::to_string(size_) +
                   "-byte file (truncated, or a count or length that lies)");
  }

  Status parse_preamble(std::uint64_t& n_tensors, std::uint64_t& n_kv);
  Status parse_kv(std::uint64_t i, std::uint64_t n_kv);
  Status parse_value(GgufValueType type, int depth, GgufValue& out, const std::string& where);
  Status parse_array(int depth, GgufValue& out, const std::string& where);
  Status parse_alignment();
  Status parse_tensor_info(std::uint64_t i, std::uint64_t n_tensors);
  Status place_tensors();

  Cursor cur_;
  const std::byte* data_;
  std::size_t size_;
  const std::string& label_;
  GgufHeader h_;
  std::unordered_set<std::string_view> keys_, names_;
};

Result<GgufHeader> Parser::run() {
  std::uint64_t n_tensors = 0, n_kv = 0;
  FT_RETURN_IF_ERROR(parse_preamble(n_tensors, n_kv));
  for (std::uint64_t i = 0; i < n_kv; ++i) FT_RETURN_IF_ERROR(parse_kv(i, n_kv));
  FT_RETURN_IF_ERROR(parse_alignment());
  for (std::uint64_t i = 0; i < n_tensors; ++i) FT_RETURN_IF_ERROR(parse_tensor_info(i, n_tensors));
  FT_RETURN_IF_ERROR(place_tensors());
  return std::move(h_);
}

Status Parser::parse_preamble(std::uint64_t& n_tensors, std::uint64_t& n_kv) {
  if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0) {
    std::string magic;
    for (std::size_t i = 0; i < std::min<std::size_t>(size_, 4); ++i) {
      const char c = char(data_[i]);
      magic += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    return fail("not a GGUF file (starts with '" + magic + "', not 'GGUF')");
  }
  cur_.skip(4);
  if (!cur_.read(h_.version)) return truncated("the version");
  // A big-endian file's version (2 or 3) reads as 0x02000000 or 0x03000000 here.
  if (h_.version != 0 && (h_.version & 0xffffu) == 0) {
    return unsupported(label_ + ": a big-endian GGUF file (version field 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%08x", h_.version);
      return std::string(buf);
    }() + "); only little-endian files are read");
  }
  if (h_.version < 2 || h_.version > 3) {
    return unsupported(label_ + ": GGUF version " + std::to_string(h_.version) + " is not supported (2 and 3 are)");
  }
  if (!cur_.read(n_tensors)) return truncated("the tensor count");
  if (!cur_.read(n_kv)) return truncated("the metadata count");
  return Status::ok();
}

Status Parser::parse_kv(std::uint64_t i, std::uint64_t n_kv) {
  const std::string nth = "metadata entry " + std::to_string(i + 1) + " of " + std::to_string(n_kv);
  GgufKv kv;
  if (!cur_.read_string(kv.key)) return truncated(nth + " (its key)");
  if (kv.key.empty()) return fail(nth + " has an empty key");
  const std::string where = "metadata " + shown(kv.key);
  if (!keys_.insert(kv.key).second) return fail(where + " appears twice");
  std::uint32_t type = 0;
  if (!cur_.read(type)) return truncated(where + " (its type)");
  if (!valid_type(type)) return fail(where + " has unknown value type " + std::to_string(type));
  FT_RETURN_IF_ERROR(parse_value(GgufValueType(type), 0, kv.value, where));
  h_.kvs.push_back(kv);
  return Status::ok();
}

Status Parser::parse_value(GgufValueType type, int depth, GgufValue& out, const std::string& where) {
  out.type = type;
  if (type == GgufValueType::kArray) return parse_array(depth, out, where);
  if (type == GgufValueType::kString) {
    std::string_view s;
    if (!cur_.read_string(s)) return truncated(where + " (a string)");
    out.data = reinterpret_cast<const std::byte*>(s.data());
    out.size = s.size();
    return Status::ok();
  }
  out.data = cur_.here();
  out.size = gguf_scalar_bytes(type);
  if (!cur_.skip(out.size)) return truncated(where + " (a " + gguf_value_type_name(type) + ")");
  return Status::ok();
}

Status Parser::parse_array(int depth, GgufValue& out, const std::string& where) {
  if (depth >= kGgufMaxArrayDepth) {
    return fail(where + " nests arrays deeper than " + std::to_string(kGgufMaxArrayDepth) + " levels");
  }
  std::uint32_t elem = 0;
  if (!cur_.read(elem) || !cur_.read(out.count)) return truncated(where + " (an array header)");
  if (!valid_type(elem)) return fail(where + " is an array of unknown value type " + std::to_string(elem));
  out.elem_type = GgufValueType(elem);
  out.data = cur_.here();
  const std::size_t start = cur_.pos();
  const std::string of =
      where + " (an array of " + std::to_string(out.count) + " " + gguf_value_type_name(out.elem_type) + ")";
  if (const std::size_t each = gguf_scalar_bytes(out.elem_type); each != 0) {
    // The count is checked against the bytes left before anything is multiplied or allocated.
    if (out.count > cur_.left() / each) return truncated(of);
    cur_.skip(out.count * each);
  } else {
    // Strings and arrays vary in size: walk them. Each takes at least 8 bytes, so a lying count
    // runs out of file after at most size / 8 steps.
    GgufValue item;
    for (std::uint64_t k = 0; k < out.count; ++k) {
      if (out.elem_type == GgufValueType::kString) {
        std::string_view s;
        if (!cur_.read_string(s)) return truncated(of);
      } else {
        FT_RETURN_IF_ERROR(parse_array(depth + 1, item, where));
      }
    }
  }
  out.size = cur_.pos() - start;
  return Status::ok();
}

Status Parser::parse_alignment() {
  for (const GgufKv& kv : h_.kvs) {
    if (kv.key != "general.alignment") continue;
    if (kv.value.type != GgufValueType::kU32) {
      return fail(std::string("metadata 'general.alignment' is ") + gguf_value_type_name(kv.value.type) + ", not u32");
    }
    std::uint32_t a = 0;
    std::memcpy(&a, kv.value.data, 4);
    if (a == 0 || (a & (a - 1)) != 0) {
      return fail("metadata 'general.alignment' is " + std::to_string(a) + ", not a power of two");
    }
    h_.alignment = a;
  }
  return Status::ok();
}

Status Parser::parse_tensor_info(std::uint64_t i, std::uint64_t n_tensors) {
  const std::string nth = "tensor " + std::to_string(i + 1) + " of " + std::to_string(n_tensors);
  std::string_view name;
  if (!cur_.read_string(name)) return truncated(nth + " (its name)");
  const std::string where = "tensor " + shown(name);
  if (!names_.insert(name).second) return fail(where + " appears twice");
  std::uint32_t n_dims = 0;
  if (!cur_.read(n_dims)) return truncated(where + " (its dimension count)");
  if (n_dims > kGgufMaxDims) {
    return fail(where + " has " + std::to_string(n_dims) + " dimensions (at most " + std::to_string(kGgufMaxDims) +
                ")");
  }
  GgufTensor t;
  t.name = std::string(name);
  std::uint64_t ne[kGgufMaxDims] = {1, 1, 1, 1};
  // The product of the non-zero dimensions must fit int64 too, even when a zero dimension makes
  // the tensor empty: then every partial product, in any order, fits (TensorView::numel).
  std::uint64_t nonzero = 1;
  bool empty = false;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    if (!cur_.read(ne[d])) return truncated(where + " (its dimensions)");
    constexpr std::uint64_t kMax = std::uint64_t(std::numeric_limits<int64_t>::max());
    if (ne[d] > kMax || (ne[d] != 0 && nonzero > kMax / ne[d])) return fail(where + " has more than 2^63 elements");
    if (ne[d] == 0) empty = true;
    if (ne[d] != 0) nonzero *= ne[d];
  }
  const std::uint64_t numel = empty ? 0 : nonzero;
  for (std::uint32_t d = n_dims; d-- > 0;) t.shape.push_back(int64_t(ne[d]));  // slowest-first
  std::uint32_t type_id = 0;
  if (!cur_.read(type_id)) return truncated(where + " (its type)");
  const GgmlType* type = ggml_type(type_id);
  if (type == nullptr) {
    return unsupported(label_ + ": " + where + " has ggml type " + std::to_string(type_id) +
                       ", which this build does not know");
  }
  if (ne[0] % type->block_elems != 0) {
    return fail(where + " has rows of " + std::to_string(ne[0]) + " values, not whole " + type->name + " blocks of " +
                std::to_string(type->block_elems));
  }
  if (__builtin_mul_overflow(numel / type->block_elems, std::uint64_t(type->block_bytes), &t.nbytes)) {
    return fail(where + " has more bytes than the address space");
  }
  t.ggml_type = type_id;
  t.dtype = type->dtype;
  std::uint64_t offset = 0;
  if (!cur_.read(offset)) return truncated(where + " (its data offset)");
  if (offset > std::numeric_limits<std::size_t>::max()) return fail(where + " has an offset past the address space");
  t.offset = std::size_t(offset);  // relative to the data section until place_tensors
  h_.tensors.push_back(std::move(t));
  return Status::ok();
}

Status Parser::place_tensors() {
  h_.data_start = cur_.pos();
  if (h_.tensors.empty()) return Status::ok();
  // The data section starts at the next multiple of the alignment after the header.
  const std::size_t pad = (h_.alignment - h_.data_start % h_.alignment) % h_.alignment;
  if (pad > size_ - h_.data_start) return truncated("the padding before the data section");
  h_.data_start += pad;
  const std::size_t data_size = size_ - h_.data_start;
  for (GgufTensor& t : h_.tensors) {
    const std::string where = "tensor " + shown(t.name);
    if (t.offset % h_.alignment != 0) {
      return fail(where + " has data offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
                  std::to_string(h_.alignment));
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return corrupt(label_ + ": " + where + ": " + std::to_string(t.nbytes) + " bytes at data offset " +
                     std::to_string(t.offset) + " run past the " + std::to_string(data_size) +
                     "-byte data section (truncated?)");
    }
    t.offset += h_.data_start;
    t.data = data_ + t.offset;
  }
  // Overlapping tensors mean an edited or damaged table; no writer emits them.
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : h_.tensors) {
    if (t.nbytes != 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& prev = *by_offset[i - 1];
    if (by_offset[i]->offset < prev.offset + prev.nbytes) {
      return fail("tensor " + shown(prev.name) + " and tensor " + shown(by_offset[i]->name) +
                  " overlap in the data section");
    }
  }
  return Status::ok();
}

}  // namespace

Result<GgufHeader> parse_gguf(const std::byte* data, std::size_t size, const std::string& label) {
  return Parser(data, size, label).run();
}

}  // namespace ft::engine

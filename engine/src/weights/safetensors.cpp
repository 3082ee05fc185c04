#include "weights/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

namespace ft::engine {

namespace {

using json = nlohmann::json;

// Bits per element of every dtype the safetensors format defines, so byte counts can be checked
// even for dtypes FreeToken cannot compute with. 0: a spelling this table does not know.
int dtype_bits(std::string_view s) {
  static constexpr std::pair<std::string_view, int> kBits[] = {
      {"BOOL", 8},     {"U8", 8},      {"I8", 8},       {"F8_E5M2", 8},  {"F8_E4M3", 8},
      {"F8_E8M0", 8},  {"I16", 16},    {"U16", 16},     {"F16", 16},     {"BF16", 16},
      {"I32", 32},     {"U32", 32},    {"F32", 32},     {"I64", 64},     {"U64", 64},
      {"F64", 64},     {"F4", 4},      {"F6_E2M3", 6},  {"F6_E3M2", 6}};
  for (const auto& [name, bits] : kBits) {
    if (name == s) return bits;
  }
  return 0;
}

std::string tensor_label(std::string_view name) { return "tensor '" + std::string(name) + "'"; }

Result<SafetensorsEntry> parse_entry(const std::string& name, const json& info, std::size_t data_start,
                                     std::size_t data_size, const std::string& label) {
  const std::string where = label + ": " + tensor_label(name);
  if (!info.is_object()) return corrupt(where + ": header entry is not a JSON object");

  SafetensorsEntry e;
  e.name = name;
  const auto dt = info.find("dtype");
  if (dt == info.end() || !dt->is_string()) return corrupt(where + ": missing or non-string \"dtype\"");
  e.dtype_spelling = dt->get<std::string>();
  const int bits = dtype_bits(e.dtype_spelling);
  if (auto parsed = dtype_from_name(e.dtype_spelling); parsed.is_ok()) e.dtype = *parsed;

  const auto sh = info.find("shape");
  if (sh == info.end() || !sh->is_array()) return corrupt(where + ": missing or non-array \"shape\"");
  uint64_t numel = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return corrupt(where + ": shape has a non-integer or negative dimension");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > uint64_t(std::numeric_limits<int64_t>::max()) ||
        (dim != 0 && numel > uint64_t(std::numeric_limits<int64_t>::max()) / dim)) {
      return corrupt(where + ": shape overflows 64 bits");
    }
    numel *= dim;
    e.shape.push_back(int64_t(dim));
  }

  const auto off = info.find("data_offsets");
  if (off == info.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    return corrupt(where + ": \"data_offsets\" must be two non-negative integers");
  }
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  const std::string range = "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end) return corrupt(where + ": " + range + " end before they begin");
  if (end > data_size) {
    return corrupt(where + ": " + range + " run past the " + std::to_string(data_size) +
                   "-byte data section (file truncated?)");
  }
  if (bits != 0) {
    // numel < 2^63 and bits <= 64, so compare in 128 bits rather than risk a wrapped product.
    const unsigned __int128 want_bits = (unsigned __int128)numel * unsigned(bits);
    if (want_bits % 8 != 0 || want_bits / 8 != end - begin) {
      TensorView shape_only;
      shape_only.shape = e.shape;
      return corrupt(where + ": " + range + " span " + std::to_string(end - begin) + " bytes but " +
                     e.dtype_spelling + " " + shape_only.shape_string() + " needs " +
                     (want_bits % 8 ? "a whole number of bytes" : std::to_string(uint64_t(want_bits / 8))));
    }
  }
  e.offset = data_start + std::size_t(begin);
  e.nbytes = std::size_t(end - begin);
  return e;
}

}  // namespace

Result<std::vector<SafetensorsEntry>> parse_safetensors_header(const std::byte* data, std::size_t size,
                                                               const std::string& label) {
  if (size < 8) {
    return corrupt(label + ": " + std::to_string(size) + " bytes is too short for a safetensors header");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);  // little-endian on disk; the host is little-endian (dtype.cpp)
  if (header_len > size - 8) {
    return corrupt(label + ": header length " + std::to_string(header_len) + " exceeds the file size " +
                   std::to_string(size));
  }
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return corrupt(label + ": header length " + std::to_string(header_len) + " exceeds the " +
                   std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  }
  const char* text = reinterpret_cast<const char*>(data + 8);
  if (header_len < 2 || text[0] != '{') return corrupt(label + ": header is not a JSON object");

  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::parse_error& e) {
    // e.what() quotes raw header bytes, which may span lines or be binary; the offset is enough.
    return corrupt(label + ": malformed JSON header (parse error at byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception&) {  // e.g. a number too large for a double (out_of_range 406)
    return corrupt(label + ": malformed JSON header (a value out of range)");
  }
  if (!header.is_object()) return corrupt(label + ": header is not a JSON object");

  const std::size_t data_start = 8 + std::size_t(header_len);
  const std::size_t data_size = size - data_start;
  std::vector<SafetensorsEntry> entries;
  entries.reserve(header.size());
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) return corrupt(label + ": \"__metadata__\" is not a JSON object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) return corrupt(label + ": \"__metadata__\" value of '" + key + "' is not a string");
      }
      continue;
    }
    FT_ASSIGN_OR_RETURN(SafetensorsEntry entry, parse_entry(name, info, data_start, data_size, label));
    entries.push_back(std::move(entry));
  }

  // Overlapping tensors mean the header was edited or damaged; the reference writer never emits them.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries) {
    if (e.nbytes != 0) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry& prev = *by_offset[i - 1];
    if (by_offset[i]->offset < prev.offset + prev.nbytes) {
      return corrupt(label + ": " + tensor_label(prev.name) + " and " + tensor_label(by_offset[i]->name) +
                     " overlap in the data section");
    }
  }
  return entries;
}

}  // namespace ft::engine

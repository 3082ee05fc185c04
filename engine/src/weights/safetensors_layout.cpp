#include "weights/safetensors_layout.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

namespace ft::engine {

uint64_t TensorHeader::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

Result<SafetensorsLayout> layout_safetensors(const std::vector<TensorHeader>& tensors,
                                             const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::set<std::string_view> seen;
  for (const TensorHeader& t : tensors) {
    if (t.name == "__metadata__") return invalid_argument("write_safetensors: '__metadata__' is a reserved name");
    if (!seen.insert(t.name).second) return invalid_argument("write_safetensors: duplicate tensor '" + t.name + "'");
    // Block dtypes are GGUF's: safetensors has no spelling for them, and no size per element.
    if (dtype_is_block(t.dtype)) {
      return invalid_argument("write_safetensors: tensor '" + t.name + "' has the GGUF block dtype " +
                              dtype_name(t.dtype) + ", which safetensors cannot store");
    }
    for (int64_t d : t.shape) {
      if (d < 0) return invalid_argument("write_safetensors: tensor '" + t.name + "' has a negative dimension");
    }
  }
  std::vector<std::size_t> by_name(tensors.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::sort(by_name.begin(), by_name.end(),
            [&](std::size_t a, std::size_t b) { return tensors[a].name < tensors[b].name; });

  // Data goes widest dtype first, as the reference writer does: with the data section 8-byte
  // aligned, every tensor then starts aligned to its element size while offsets stay contiguous
  // (the reference reader rejects gaps).
  std::vector<std::size_t> data_order = by_name;
  std::stable_sort(data_order.begin(), data_order.end(), [&](std::size_t a, std::size_t b) {
    return dtype_size(tensors[a].dtype) > dtype_size(tensors[b].dtype);
  });
  std::vector<uint64_t> data_begin(tensors.size());
  uint64_t cursor = 0;
  for (std::size_t i : data_order) {
    data_begin[i] = cursor;
    cursor += tensors[i].nbytes();
  }

  // ordered_json keeps insertion order: "__metadata__" first, then tensors by name.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  for (std::size_t i : by_name) {
    const TensorHeader& t = tensors[i];
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {data_begin[i], data_begin[i] + t.nbytes()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  SafetensorsLayout layout;
  const uint64_t len = text.size();
  layout.prefix.resize(8);
  std::memcpy(layout.prefix.data(), &len, 8);  // little-endian host (dtype.cpp)
  layout.prefix += text;
  layout.begin.resize(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) layout.begin[i] = layout.prefix.size() + data_begin[i];
  layout.file_size = layout.prefix.size() + cursor;
  return layout;
}

}  // namespace ft::engine

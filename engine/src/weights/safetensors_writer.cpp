#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "ft/engine/checkpoint.h"

namespace ft::engine {

Status write_safetensors(const std::filesystem::path& path, const std::vector<OwnedTensor>& tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::vector<const OwnedTensor*> by_name;
  std::set<std::string_view> seen;
  for (const OwnedTensor& t : tensors) {
    if (t.name == "__metadata__") return invalid_argument("write_safetensors: '__metadata__' is a reserved name");
    if (!seen.insert(t.name).second) return invalid_argument("write_safetensors: duplicate tensor '" + t.name + "'");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return invalid_argument("write_safetensors: tensor '" + t.name + "' has a negative dimension");
      numel *= uint64_t(d);
    }
    if (numel * dtype_size(t.dtype) != t.data.size()) {
      return invalid_argument("write_safetensors: tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                              " bytes, its shape and dtype " + dtype_name(t.dtype) + " need " +
                              std::to_string(numel * dtype_size(t.dtype)));
    }
    by_name.push_back(&t);
  }
  std::sort(by_name.begin(), by_name.end(),
            [](const OwnedTensor* a, const OwnedTensor* b) { return a->name < b->name; });

  // Data goes widest dtype first, as the reference writer does: with the data section 8-byte
  // aligned, every tensor then starts aligned to its element size while offsets stay contiguous
  // (the reference reader rejects gaps).
  std::vector<const OwnedTensor*> layout = by_name;
  std::stable_sort(layout.begin(), layout.end(), [](const OwnedTensor* a, const OwnedTensor* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });
  std::unordered_map<const OwnedTensor*, std::size_t> begin_of;
  std::size_t cursor = 0;
  for (const OwnedTensor* t : layout) {
    begin_of[t] = cursor;
    cursor += t->data.size();
  }

  // ordered_json keeps insertion order: "__metadata__" first, then tensors by name.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  for (const OwnedTensor* t : by_name) {
    const std::size_t begin = begin_of.at(t);
    header[t->name] = {{"dtype", dtype_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {begin, begin + t->data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create " + path.string());
  const uint64_t len = text.size();
  char len_bytes[8];
  std::memcpy(len_bytes, &len, 8);  // little-endian host (dtype.cpp)
  out.write(len_bytes, 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const OwnedTensor* t : layout) {
    out.write(reinterpret_cast<const char*>(t->data.data()), std::streamsize(t->data.size()));
  }
  out.close();
  if (!out) return io_error("cannot write " + path.string());
  return Status::ok();
}

}  // namespace ft::engine

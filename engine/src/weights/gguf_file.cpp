// GgufFile: maps a GGUF file, or every part of a split model, and joins their tensor tables.
#include <cstdio>
#include <fstream>
#include <unordered_map>
#include <utility>

#include "ft/engine/gguf.h"
#include "weights/gguf_parse.h"
#include "weights/mapped_file.h"

namespace ft::engine {

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

namespace {

// gguf-split's part names (llama_split_path): PREFIX-%05d-of-%05d.gguf, parts counted from 1.
// split.count is a u16, so both numbers always have exactly five digits.
constexpr std::string_view kSplitSuffixExample = "-00001-of-00002.gguf";

struct SplitName {
  std::string prefix;
  int part = 0;  // from 1
  int count = 0;
};

std::optional<SplitName> parse_split_name(const std::string& name) {
  const std::size_t n = kSplitSuffixExample.size();
  if (name.size() <= n) return std::nullopt;
  const std::string_view tail = std::string_view(name).substr(name.size() - n);
  auto digits = [&](std::size_t at, int& out) {
    out = 0;
    for (std::size_t i = at; i < at + 5; ++i) {
      if (tail[i] < '0' || tail[i] > '9') return false;
      out = out * 10 + (tail[i] - '0');
    }
    return true;
  };
  SplitName s;
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || tail.substr(15) != ".gguf" || !digits(1, s.part) ||
      !digits(10, s.count)) {
    return std::nullopt;
  }
  s.prefix = name.substr(0, name.size() - n);
  return s;
}

std::string split_file_name(const std::string& prefix, int part, int count) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d.gguf", part, count);
  return prefix + suffix;
}

struct Part {
  MappedFile file;
  GgufHeader header;
};

Result<Part> open_part(const std::filesystem::path& path) {
  Part p;
  FT_ASSIGN_OR_RETURN(p.file, MappedFile::open(path));
  FT_ASSIGN_OR_RETURN(p.header, parse_gguf(p.file.data(), p.file.size(), path.string()));
  return p;
}

// split.no / split.count of a part, as integers; -1 when absent. A key of another type makes the
// file corrupt rather than the caller's request invalid.
Result<std::pair<std::int64_t, std::int64_t>> split_keys(const Part& p, const std::string& label) {
  const GgufMetadata meta(p.header.kvs, label);
  std::int64_t values[2] = {-1, -1};
  const char* keys[2] = {"split.no", "split.count"};
  for (int i = 0; i < 2; ++i) {
    if (!meta.find(keys[i])) continue;
    auto v = meta.get_int(keys[i]);
    if (!v.is_ok()) return corrupt(v.status().message());
    values[i] = *v;
  }
  return std::make_pair(values[0], values[1]);
}

}  // namespace

struct GgufFile::Impl {
  std::vector<std::filesystem::path> paths;
  std::vector<MappedFile> files;  // mappings stay put when moved, so the views below survive
  std::uint32_t version = 0;
  GgufMetadata metadata;
  std::vector<GgufTensor> tensors;
  std::unordered_map<std::string_view, std::size_t> by_name;  // views of tensors[i].name

  void add_tensors(std::vector<GgufTensor> part_tensors, std::size_t file) {
    for (GgufTensor& t : part_tensors) {
      t.file = file;
      tensors.push_back(std::move(t));
    }
  }
  // Once every part's tensors are in (so the names no longer move): the name index. A name in two
  // parts is an error; the parser has already refused one twice in the same part.
  Status index() {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (!by_name.emplace(tensors[i].name, i).second) {
        return corrupt(paths[tensors[i].file].string() + ": tensor '" + tensors[i].name +
                       "' is also in an earlier part");
      }
    }
    return Status::ok();
  }
};

Result<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  const std::string label = path.string();
  FT_ASSIGN_OR_RETURN(Part given, open_part(path));
  FT_ASSIGN_OR_RETURN(const auto given_split, split_keys(given, label));
  auto impl = std::make_unique<Impl>();

  const std::int64_t count = given_split.second;
  if (count <= 1) {
    impl->paths.push_back(path);
    impl->version = given.header.version;
    impl->metadata = GgufMetadata(given.header.kvs, label);
    impl->add_tensors(std::move(given.header.tensors), 0);
    impl->files.push_back(std::move(given.file));
    FT_RETURN_IF_ERROR(impl->index());
    return GgufFile(std::move(impl));
  }

  const std::optional<SplitName> name = parse_split_name(path.filename().string());
  if (!name || name->count != count || name->part != given_split.first + 1) {
    return corrupt(label + ": metadata says part " + std::to_string(given_split.first + 1) + " of " +
                   std::to_string(count) + ", but the file is not named NAME" +
                   split_file_name("", int(given_split.first + 1), int(count)));
  }
  std::optional<Part> given_part(std::move(given));
  for (int k = 0; k < count; ++k) {
    const std::filesystem::path part_path = path.parent_path() / split_file_name(name->prefix, k + 1, int(count));
    const std::string part_label = part_path.string();
    Part part;
    if (k + 1 == name->part) {
      part = std::move(*given_part);
    } else {
      auto opened = open_part(part_path);
      if (!opened.is_ok() && opened.status().code() == ErrorCode::kNotFound) {
        return not_found(label + ": part " + std::to_string(k + 1) + " of " + std::to_string(count) + ", " +
                         part_label + ", is missing");
      }
      if (!opened.is_ok()) return opened.status();
      part = std::move(opened).value();
    }
    FT_ASSIGN_OR_RETURN(const auto split, split_keys(part, part_label));
    if (split.first != k || split.second != count) {
      return corrupt(part_label + ": metadata says part " + std::to_string(split.first + 1) + " of " +
                     std::to_string(split.second) + ", expected part " + std::to_string(k + 1) + " of " +
                     std::to_string(count));
    }
    impl->paths.push_back(part_path);
    if (k == 0) {
      impl->version = part.header.version;
      impl->metadata = GgufMetadata(part.header.kvs, part_label);
    }
    impl->add_tensors(std::move(part.header.tensors), std::size_t(k));
    impl->files.push_back(std::move(part.file));
  }
  FT_RETURN_IF_ERROR(impl->index());
  if (impl->metadata.find("split.tensors.count")) {
    auto total = impl->metadata.get_int("split.tensors.count");
    if (!total.is_ok()) return corrupt(total.status().message());
    if (*total != std::int64_t(impl->tensors.size())) {
      return corrupt(impl->paths[0].string() + ": split.tensors.count says " + std::to_string(*total) +
                     " tensors, the " + std::to_string(count) + " parts hold " + std::to_string(impl->tensors.size()));
    }
  }
  return GgufFile(std::move(impl));
}

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

std::uint32_t GgufFile::version() const { return impl_->version; }
const GgufMetadata& GgufFile::metadata() const { return impl_->metadata; }
const std::vector<GgufTensor>& GgufFile::tensors() const { return impl_->tensors; }

const GgufTensor* GgufFile::find(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &impl_->tensors[it->second];
}

Result<TensorView> GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find(name);
  if (t == nullptr) return not_found("tensor '" + std::string(name) + "' not found in " + impl_->paths[0].string());
  if (!t->dtype) {
    const GgmlType* type = ggml_type(t->ggml_type);
    return unsupported(impl_->paths[t->file].string() + ": tensor '" + t->name + "' has ggml type " +
                       (type ? type->name : "?") + ", which FreeToken does not compute with");
  }
  TensorView v;
  v.name = t->name;
  v.dtype = *t->dtype;
  v.shape = t->shape;
  v.data = t->data;
  v.nbytes = t->nbytes;
  return v;
}

std::vector<std::filesystem::path> GgufFile::paths() const { return impl_->paths; }

std::vector<std::span<const std::byte>> GgufFile::mapped_files() const {
  std::vector<std::span<const std::byte>> out;
  for (const MappedFile& f : impl_->files) out.emplace_back(f.data(), f.size());
  return out;
}

}  // namespace ft::engine

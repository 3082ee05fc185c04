#include "ft/engine/checkpoint.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "ft/engine/gguf.h"
#include "weights/gguf_hf.h"
#include "weights/mapped_file.h"
#include "weights/quantized_safetensors.h"
#include "weights/safetensors.h"

namespace ft::engine {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kGenerationConfig = "generation_config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

std::string shape_string(const std::vector<int64_t>& shape) {
  TensorView v;
  v.shape = shape;
  return v.shape_string();
}

// Missing is kNotFound so callers can tell "no such file" from "unreadable file" (kIo).
Result<std::string> read_text(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return not_found(path.filename().string() + " not found in " + path.parent_path().string());
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot read " + path.string());
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) return io_error("cannot read " + path.string());
  return os.str();
}

// Models parse these later; rejecting broken JSON here names the file instead of failing deep inside a model.
Status check_json_object(const std::string& text, const fs::path& path) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return corrupt(path.string() + " is not a valid JSON object");
  return Status::ok();
}

// The index comes from the internet: a shard name must stay inside the checkpoint directory.
bool is_safe_shard_name(const std::string& name) {
  const fs::path p(name);
  if (name.empty() || p.is_absolute()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

struct Checkpoint::Impl {
  struct Entry {
    std::size_t file = 0;  // into files
    SafetensorsEntry meta;
  };

  fs::path dir;
  std::string config_text;
  std::string generation_config_text;
  std::vector<MappedFile> files;
  std::map<std::string, Entry, std::less<>> tensors;
  // A GGUF file instead: its tensors under their HF names.
  std::unique_ptr<GgufFile> gguf;
  std::map<std::string, GgufHfTensor, std::less<>> gguf_tensors;
  // Tensors a GGUF stores otherwise than HF (GgufBuilt: DeepSeek's kv_b_proj, Qwen3-Next's 1 + w
  // norms, ...), built at open in fp32.
  struct Built {
    std::vector<int64_t> shape;
    std::vector<float> data;
  };
  std::map<std::string, Built, std::less<>> gguf_built;
  // FP8 / MXFP4 / NVFP4 weights, repacked into row blocks at open (weights/quantized_safetensors.h),
  // and the stored tensors they replace. The blocks share one allocation in 2 MiB pages where the
  // kernel gives them (a page fault a 2 MiB, not a 4 KiB: the repack ran at the page-fault rate),
  // each weight page-aligned in it.
  struct PageFree {
    void operator()(std::byte* p) const { std::free(p); }
  };
  struct Quantized {
    QuantizedWeight weight;
    std::byte* blocks = nullptr;  // in `repacked`
  };
  std::unique_ptr<std::byte[], PageFree> repacked;
  std::size_t repacked_bytes = 0;
  std::map<std::string, Quantized, std::less<>> quantized;
  std::set<std::string, std::less<>> hidden;

  // Maps `path` and records its tensors. `index` (name -> shard file name) may be null for a
  // single-file checkpoint.
  Status add_file(const fs::path& path, const std::string& shard_name, const std::map<std::string, std::string>* index);
  // Finds the quantized weights among the tensors and repacks them.
  Status add_quantized();
  Result<TensorView> stored(std::string_view name) const;  // a tensor as the files hold it
};

Status Checkpoint::Impl::add_quantized() {
  std::map<std::string, SafetensorsEntry, std::less<>> entries;
  for (const auto& [name, e] : tensors) entries.emplace(name, e.meta);
  FT_ASSIGN_OR_RETURN(std::vector<QuantizedWeight> found, find_quantized_weights(entries, config_text));
  const auto part = [this](std::string_view name) { return stored(name); };
  if (found.empty()) return Status::ok();
  constexpr std::size_t kPage = 4096, kHugePage = std::size_t(2) << 20;
  const auto page_round = [](std::size_t n, std::size_t page) { return (n + page - 1) / page * page; };
  for (const QuantizedWeight& w : found) repacked_bytes += page_round(w.nbytes(), kPage);
  const std::size_t bytes = page_round(repacked_bytes, kHugePage);
  repacked.reset(static_cast<std::byte*>(std::aligned_alloc(kHugePage, bytes)));
  if (!repacked)
    return unavailable("cannot allocate " + std::to_string(bytes) + " bytes for the repacked weights of " +
                       dir.string());
  (void)::madvise(repacked.get(), bytes, MADV_HUGEPAGE);  // a hint: 4 KiB pages where refused
  std::size_t at = 0;
  for (QuantizedWeight& w : found) {
    Quantized q{std::move(w), repacked.get() + at};
    at += page_round(q.weight.nbytes(), kPage);
    FT_RETURN_IF_ERROR(repack_quantized(q.weight, part, q.blocks));
    hidden.insert(q.weight.hidden.begin(), q.weight.hidden.end());
    std::string name = q.weight.name;
    quantized.emplace(std::move(name), std::move(q));
  }
  return Status::ok();
}

Status Checkpoint::Impl::add_file(const fs::path& path, const std::string& shard_name,
                                  const std::map<std::string, std::string>* index) {
  FT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  FT_ASSIGN_OR_RETURN(std::vector<SafetensorsEntry> entries,
                      parse_safetensors_header(file.data(), file.size(), path.string()));
  const std::size_t file_index = files.size();
  files.push_back(std::move(file));
  for (auto& e : entries) {
    if (index != nullptr) {
      // The index is authoritative: a stray copy of a tensor in another shard is not an error.
      const auto it = index->find(e.name);
      if (it != index->end() && it->second != shard_name) continue;
    }
    const auto [pos, inserted] = tensors.try_emplace(e.name);
    if (!inserted) {
      return corrupt("tensor '" + e.name + "' appears in both " + files[pos->second.file].path().string() +
                     " and " + path.string());
    }
    pos->second.file = file_index;
    pos->second.meta = std::move(e);
  }
  return Status::ok();
}

namespace {

// A view of bytes [offset, offset + nbytes) of GGUF tensor `t` under `name` (its HF name, or its own),
// or kUnsupported when FreeToken does not compute with the tensor's ggml type.
Result<TensorView> gguf_view(const GgufTensor& t, const std::string& name, const fs::path& file,
                             std::vector<int64_t> shape, std::size_t offset, std::size_t nbytes) {
  if (!t.dtype) {
    return unsupported("tensor '" + t.name + "'" + (name == t.name ? "" : " (" + name + ")") + " in " + file.string() +
                       " has ggml type " + ggml_type(t.ggml_type)->name + ", which FreeToken does not compute with");
  }
  return TensorView{name, *t.dtype, std::move(shape), t.data + offset, nbytes};
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (is_gguf_file(dir)) {
    auto impl = std::make_unique<Impl>();
    impl->dir = dir;
    FT_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(dir));
    impl->gguf = std::make_unique<GgufFile>(std::move(file));
    FT_ASSIGN_OR_RETURN(GgufAsHf hf, gguf_as_hf(*impl->gguf, dir.string()));
    impl->config_text = std::move(hf.config_json);
    impl->generation_config_text = std::move(hf.generation_config_json);
    for (GgufHfTensor& t : hf.tensors) {
      std::string name = t.hf_name;
      impl->gguf_tensors.emplace(std::move(name), std::move(t));
    }
    const auto raw = [&](std::size_t index) {
      const GgufTensor& t = impl->gguf->tensors()[index];
      return gguf_view(t, t.name, dir, t.shape, 0, t.nbytes);
    };
    for (const GgufBuilt& b : hf.built) {
      FT_ASSIGN_OR_RETURN(const TensorView src, raw(b.src));
      std::optional<TensorView> src2;  // kv_b_proj's second half
      if (b.op == GgufBuilt::Op::kJoinKvB) {
        FT_ASSIGN_OR_RETURN(src2, raw(b.src2));
      }
      Impl::Built built{b.shape, std::vector<float>(b.numel())};
      FT_RETURN_IF_ERROR(gguf_build(b, src, src2 ? &*src2 : nullptr, built.data.data()));
      impl->gguf_built.emplace(b.hf_name, std::move(built));
    }
    return Checkpoint(std::move(impl));
  }
  if (!fs::is_directory(dir, ec)) return not_found("checkpoint directory " + dir.string() + " does not exist");

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  FT_ASSIGN_OR_RETURN(impl->config_text, read_text(dir / kConfig));
  FT_RETURN_IF_ERROR(check_json_object(impl->config_text, dir / kConfig));
  if (fs::exists(dir / kGenerationConfig, ec)) {
    FT_ASSIGN_OR_RETURN(impl->generation_config_text, read_text(dir / kGenerationConfig));
    FT_RETURN_IF_ERROR(check_json_object(impl->generation_config_text, dir / kGenerationConfig));
  }

  // Same precedence as transformers: a single model.safetensors wins over an index.
  if (fs::exists(dir / kSingleFile, ec)) {
    FT_RETURN_IF_ERROR(impl->add_file(dir / kSingleFile, kSingleFile, nullptr));
    FT_RETURN_IF_ERROR(impl->add_quantized());
    return Checkpoint(std::move(impl));
  }
  if (!fs::exists(dir / kIndex, ec)) {
    return not_found(std::string("no ") + kSingleFile + " or " + kIndex + " in " + dir.string());
  }

  const fs::path index_path = dir / kIndex;
  FT_ASSIGN_OR_RETURN(const std::string index_text, read_text(index_path));
  const json index_json = json::parse(index_text, nullptr, /*allow_exceptions=*/false);
  if (index_json.is_discarded() || !index_json.is_object()) {
    return corrupt(index_path.string() + " is not a valid JSON object");
  }
  const auto wm = index_json.find("weight_map");
  if (wm == index_json.end() || !wm->is_object()) {
    return corrupt(index_path.string() + " has no \"weight_map\" object");
  }
  std::map<std::string, std::string> weight_map;
  std::set<std::string> shards;  // sorted: files map in a reproducible order
  for (const auto& [name, shard] : wm->items()) {
    if (!shard.is_string() || !is_safe_shard_name(shard.get<std::string>())) {
      return corrupt(index_path.string() + ": tensor '" + name + "' maps to an invalid shard file name");
    }
    weight_map.emplace(name, shard.get<std::string>());
    shards.insert(shard.get<std::string>());
  }
  for (const std::string& shard : shards) {
    const fs::path shard_path = dir / shard;
    if (!fs::exists(shard_path, ec)) {
      const auto named_by = std::find_if(weight_map.begin(), weight_map.end(),
                                         [&](const auto& kv) { return kv.second == shard; });
      return corrupt(index_path.string() + " names shard " + shard + " (for tensor '" + named_by->first +
                     "'), but " + shard_path.string() + " does not exist");
    }
    FT_RETURN_IF_ERROR(impl->add_file(shard_path, shard, &weight_map));
  }
  for (const auto& [name, shard] : weight_map) {
    if (!impl->tensors.contains(name)) {
      return corrupt(index_path.string() + " lists tensor '" + name + "' in " + shard + ", but " +
                     (dir / shard).string() + " does not contain it");
    }
  }
  FT_RETURN_IF_ERROR(impl->add_quantized());
  return Checkpoint(std::move(impl));
}

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

const fs::path& Checkpoint::dir() const { return impl_->dir; }
const std::string& Checkpoint::config_text() const { return impl_->config_text; }
const std::string& Checkpoint::generation_config_text() const { return impl_->generation_config_text; }

bool Checkpoint::has(std::string_view name) const {
  if (impl_->gguf) return impl_->gguf_tensors.contains(name) || impl_->gguf_built.contains(name);
  if (impl_->quantized.contains(name)) return true;
  return impl_->tensors.find(name) != impl_->tensors.end() && !impl_->hidden.contains(name);
}

Result<TensorView> Checkpoint::tensor(std::string_view name) const {
  if (impl_->gguf) {
    if (const auto b = impl_->gguf_built.find(name); b != impl_->gguf_built.end()) {
      return TensorView{b->first, DType::kF32, b->second.shape,
                        reinterpret_cast<const std::byte*>(b->second.data.data()),
                        b->second.data.size() * sizeof(float)};
    }
    const auto it = impl_->gguf_tensors.find(name);
    if (it == impl_->gguf_tensors.end()) {
      return not_found("tensor '" + std::string(name) + "' not found in " + impl_->dir.string());
    }
    const GgufHfTensor& alias = it->second;
    return gguf_view(impl_->gguf->tensors()[alias.tensor], alias.hf_name, impl_->dir, alias.shape, alias.byte_offset,
                     alias.nbytes);
  }
  if (const auto q = impl_->quantized.find(name); q != impl_->quantized.end()) {
    TensorView view;
    view.name = q->second.weight.name;
    view.dtype = q->second.weight.dtype;
    view.shape = q->second.weight.shape;
    view.data = q->second.blocks;
    view.nbytes = q->second.weight.nbytes();
    return view;
  }
  if (impl_->hidden.contains(name)) {
    return not_found("tensor '" + std::string(name) + "' not found in " + impl_->dir.string() +
                     " (it is part of a quantized weight)");
  }
  return impl_->stored(name);
}

Result<TensorView> Checkpoint::Impl::stored(std::string_view name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) return not_found("tensor '" + std::string(name) + "' not found in " + dir.string());
  const Impl::Entry& entry = it->second;
  const MappedFile& file = files[entry.file];
  if (!entry.meta.dtype) {
    return unsupported("tensor '" + entry.meta.name + "' in " + file.path().string() + " has dtype " +
                       entry.meta.dtype_spelling + ", which FreeToken does not support");
  }
  TensorView view;
  view.name = entry.meta.name;
  view.dtype = *entry.meta.dtype;
  view.shape = entry.meta.shape;
  view.data = file.data() + entry.meta.offset;
  view.nbytes = entry.meta.nbytes;
  return view;
}

Result<TensorView> Checkpoint::tensor(std::string_view name, const std::vector<int64_t>& expected_shape) const {
  FT_ASSIGN_OR_RETURN(TensorView view, tensor(name));
  if (view.shape != expected_shape) {
    return invalid_argument("tensor '" + view.name + "' has shape " + view.shape_string() + ", expected " +
                            shape_string(expected_shape));
  }
  return view;
}

Result<std::vector<float>> Checkpoint::load_f32(std::string_view name,
                                                const std::vector<int64_t>& expected_shape) const {
  FT_ASSIGN_OR_RETURN(TensorView view, tensor(name, expected_shape));
  std::vector<float> out(std::size_t(view.numel()));
  FT_RETURN_IF_ERROR(to_f32(view, out.data(), 0, out.size()));
  return out;
}

std::vector<std::span<const std::byte>> Checkpoint::mapped_files() const {
  if (impl_->gguf) return impl_->gguf->mapped_files();
  std::vector<std::span<const std::byte>> out;
  for (const MappedFile& f : impl_->files) out.emplace_back(f.data(), f.size());
  if (impl_->repacked) out.emplace_back(impl_->repacked.get(), impl_->repacked_bytes);
  return out;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  if (impl_->gguf) {
    for (const auto& [name, entry] : impl_->gguf_tensors) names.push_back(name);
    for (const auto& [name, built] : impl_->gguf_built) names.push_back(name);
    std::sort(names.begin(), names.end());
    return names;
  }
  names.reserve(impl_->tensors.size());
  for (const auto& [name, entry] : impl_->tensors)
    if (!impl_->hidden.contains(name) && !impl_->quantized.contains(name)) names.push_back(name);
  for (const auto& [name, q] : impl_->quantized) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ft::engine

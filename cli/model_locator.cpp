#include "model_locator.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "data_dirs.h"
#include "ft/engine/gguf.h"

namespace ft::cli {
namespace fs = std::filesystem;
namespace {

// The snapshot of `repo_dir` for `revision` ("" = main, or the only snapshot).
Result<fs::path> snapshot_of(const fs::path& repo_dir, const std::string& revision, const std::string& repo) {
  const fs::path snapshots = repo_dir / "snapshots";
  const std::string branch = revision.empty() ? "main" : revision;
  std::string commit;
  if (std::ifstream ref(repo_dir / "refs" / branch); ref >> commit) {
    if (fs::is_directory(snapshots / commit)) return snapshots / commit;
    return not_found(repo + ": refs/" + branch + " names " + commit + ", which is not in " + snapshots.string());
  }
  if (!revision.empty()) {
    if (fs::is_directory(snapshots / revision)) return snapshots / revision;
    return not_found(repo + ": no branch or snapshot '" + revision + "' in " + repo_dir.string());
  }
  std::vector<fs::path> all;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(snapshots, ec))
    if (e.is_directory()) all.push_back(e.path());
  if (all.size() == 1) return all.front();
  if (all.empty()) return not_found(repo + ": no snapshot in " + snapshots.string());
  return invalid_argument(repo + ": " + std::to_string(all.size()) + " snapshots and no refs/main; name one as " + repo +
                          "@COMMIT");
}

}  // namespace

fs::path hub_cache_dir() {
  if (const char* v = std::getenv("HF_HUB_CACHE"); v && *v) return v;
  if (const char* v = std::getenv("HF_HOME"); v && *v) return fs::path(v) / "hub";
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return fs::path(v) / "huggingface/hub";
  if (const char* v = std::getenv("HOME"); v && *v) return fs::path(v) / ".cache/huggingface/hub";
  return freetoken_data_dir().parent_path() / "huggingface/hub";
}

fs::path ollama_models_dir() {
  if (const char* v = std::getenv("OLLAMA_MODELS"); v && *v) return v;
  if (const char* v = std::getenv("HOME"); v && *v) return fs::path(v) / ".ollama/models";
  return freetoken_data_dir().parent_path().parent_path() / ".ollama/models";
}

Result<fs::path> ollama_blob(const fs::path& manifest, const std::string& name) {
  std::ifstream in(manifest);
  if (!in) return not_found("ollama:" + name + ": cannot read " + manifest.string());
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("layers") || !j["layers"].is_array())
    return corrupt("ollama:" + name + ": " + manifest.string() + " is not an Ollama manifest");
  // The store's root: ROOT/manifests/HOST/NAMESPACE/MODEL/TAG, five levels up.
  const fs::path root = manifest.parent_path().parent_path().parent_path().parent_path().parent_path();
  for (const auto& layer : j["layers"]) {
    if (!layer.is_object() || layer.value("mediaType", "") != "application/vnd.ollama.image.model") continue;
    const std::string digest = layer.value("digest", "");
    if (digest.rfind("sha256:", 0) != 0 || digest.find('/') != std::string::npos)
      return corrupt("ollama:" + name + ": " + manifest.string() + " has a model layer without a sha256 digest");
    const fs::path blob = root / "blobs" / ("sha256-" + digest.substr(7));
    if (!engine::is_gguf_file(blob))
      return not_found("ollama:" + name + ": its model blob " + blob.string() + " is missing or not a GGUF file");
    return blob;
  }
  return unsupported("ollama:" + name + ": " + manifest.string() + " has no model layer");
}

Result<fs::path> resolve_ollama(const std::string& name) {
  // [HOST/][NAMESPACE/]MODEL[:TAG], as `ollama pull` names it.
  const std::size_t colon = name.rfind(':'), slash = name.rfind('/');
  const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  const std::string tag = tagged ? name.substr(colon + 1) : "latest";
  std::string path = tagged ? name.substr(0, colon) : name;
  const auto parts = std::count(path.begin(), path.end(), '/');
  if (parts == 0) path = "registry.ollama.ai/library/" + path;
  if (parts == 1) path = "registry.ollama.ai/" + path;
  if (path.empty() || tag.empty() || path.find("..") != std::string::npos || tag.find('/') != std::string::npos)
    return invalid_argument("--model ollama:" + name + ": not an Ollama model name (MODEL[:TAG])");
  const fs::path manifest = ollama_models_dir() / "manifests" / path / tag;
  if (!fs::exists(manifest))
    return not_found("ollama:" + name + ": no manifest " + manifest.string() + " (ollama pull it first)");
  return ollama_blob(manifest, name);
}

Result<fs::path> resolve_model_dir(const std::string& spec) {
  if (spec.empty()) return invalid_argument("--model: empty");
  if (spec.starts_with(kOllamaPrefix)) return resolve_ollama(spec.substr(kOllamaPrefix.size()));
  std::error_code ec;
  if (fs::is_directory(spec, ec)) return fs::path(spec);
  // A GGUF model file (any part of a split one) loads as it is, whatever its name.
  if (engine::is_gguf_file(spec)) return fs::path(spec);
  // ORG/NAME[@REV]: one slash, not a path that merely does not exist.
  const std::size_t at = spec.find('@');
  const std::string repo = spec.substr(0, at), revision = at == std::string::npos ? "" : spec.substr(at + 1);
  const std::size_t slash = repo.find('/');
  const bool repo_id = slash != std::string::npos && slash > 0 && slash + 1 < repo.size() &&
                       repo.find('/', slash + 1) == std::string::npos && repo[0] != '.' && repo[0] != '~';
  if (!repo_id) return not_found("model directory " + spec + " does not exist");
  const fs::path hub = hub_cache_dir();
  const fs::path repo_dir = hub / ("models--" + repo.substr(0, slash) + "--" + repo.substr(slash + 1));
  if (!fs::is_directory(repo_dir, ec))
    return not_found(spec + " is neither a directory nor a model in the Hugging Face cache (" + repo_dir.string() +
                     " does not exist; nothing is downloaded)");
  FT_ASSIGN_OR_RETURN(fs::path dir, snapshot_of(repo_dir, revision, repo));
  if (!fs::exists(dir / "config.json")) return not_found(spec + ": " + dir.string() + " has no config.json");
  return dir;
}

std::vector<CachedModel> list_hub_cache(const fs::path& hub) {
  std::vector<CachedModel> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(hub, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("models--", 0) != 0) continue;
    const std::string rest = name.substr(8);
    const std::size_t sep = rest.find("--");
    if (sep == std::string::npos) continue;
    CachedModel m;
    m.repo = rest.substr(0, sep) + "/" + rest.substr(sep + 2);
    auto snap = snapshot_of(e.path(), "", m.repo);
    if (!snap || !fs::exists(*snap / "config.json")) continue;
    m.dir = *snap;
    m.revision = snap->filename().string();
    for (const auto& f : fs::directory_iterator(m.dir, ec)) {
      std::error_code size_ec;
      const auto size = fs::file_size(f.path(), size_ec);  // follows the symlink into blobs/
      if (!size_ec) m.bytes += size;
    }
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const CachedModel& a, const CachedModel& b) { return a.repo < b.repo; });
  return out;
}

std::vector<fs::path> gguf_dirs() {
  std::vector<fs::path> out;
  const char* home = std::getenv("HOME");
  if (const char* v = std::getenv("LLAMA_CACHE"); v && *v) {
    out.emplace_back(v);
  } else if (home && *home) {
    out.push_back(fs::path(home) / ".cache/llama.cpp");
  }
  if (home && *home) {
    out.push_back(fs::path(home) / ".lmstudio/models");
    out.push_back(fs::path(home) / ".cache/lm-studio/models");
  }
  return out;
}

namespace {

// gguf-split's part names, PREFIX-%05d-of-%05d.gguf: the part number, or 0 for any other name.
int split_part(const std::string& name) {
  constexpr std::size_t kTail = std::string_view("-00001-of-00002.gguf").size();
  if (name.size() < kTail || name.compare(name.size() - kTail + 6, 4, "-of-") != 0) return 0;
  const std::string part = name.substr(name.size() - kTail + 1, 5);
  if (!std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  return std::stoi(part);
}

}  // namespace

std::vector<CachedModel> list_gguf_files(const fs::path& dir) {
  std::vector<CachedModel> out;
  std::error_code ec;
  std::map<std::string, std::uint64_t> split_bytes;  // "PREFIX-of-N" -> the parts' bytes
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 3) it.disable_recursion_pending();
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec) || it->path().extension() != ".gguf") continue;
    const std::string name = it->path().filename().string();
    const int part = split_part(name);
    const std::uint64_t size = it->file_size(file_ec);
    if (part > 0) {
      const fs::path key =
          it->path().parent_path() / (name.substr(0, name.size() - 20) + name.substr(name.size() - 10));
      split_bytes[key.string()] += file_ec ? 0 : size;
      if (part != 1) continue;
    }
    if (!engine::is_gguf_file(it->path())) continue;
    files.push_back(it->path());
  }
  for (const fs::path& f : files) {
    CachedModel m;
    m.repo = f.string();
    m.dir = f;
    const std::string name = f.filename().string();
    std::error_code size_ec;
    if (split_part(name) == 1) {
      m.bytes =
          split_bytes[(f.parent_path() / (name.substr(0, name.size() - 20) + name.substr(name.size() - 10))).string()];
    } else {
      m.bytes = fs::file_size(f, size_ec);
    }
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const CachedModel& a, const CachedModel& b) { return a.repo < b.repo; });
  return out;
}

}  // namespace ft::cli

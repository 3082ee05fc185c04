// Where `--model` finds a checkpoint: a directory as given, or a Hugging Face repo id ("ORG/NAME",
// "ORG/NAME@REVISION") resolved in the local hub cache the way the hub client lays it out:
//   <hub>/models--ORG--NAME/refs/<branch>          the commit a branch points at
//   <hub>/models--ORG--NAME/snapshots/<commit>/    the files, symlinks into ../../blobs/<hash>
// <hub> is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub. Nothing is downloaded: a repo not in the cache is an error saying where
// it was looked for. "ollama:NAME[:TAG]" is a model `ollama pull` stored: its manifest under
// $OLLAMA_MODELS (default ~/.ollama/models)/manifests/HOST/NAMESPACE/NAME/TAG (registry.ollama.ai,
// library and latest unless given) names the GGUF blob the engine reads in place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"

namespace ft::cli {

std::filesystem::path hub_cache_dir();
std::filesystem::path ollama_models_dir();
// `--model` names an Ollama model as kOllamaPrefix + NAME[:TAG].
inline constexpr std::string_view kOllamaPrefix = "ollama:";
// The GGUF blob an Ollama manifest (ROOT/manifests/HOST/NAMESPACE/MODEL/TAG) names, ROOT/blobs/
// sha256-HEX; `name` is the model's, for messages.
Result<std::filesystem::path> ollama_blob(const std::filesystem::path& manifest, const std::string& name);

// `spec` as a checkpoint directory (one holding config.json): an existing directory, or an existing
// GGUF file (any part of a split one), is returned as is; "ollama:NAME[:TAG]" is the GGUF blob of an
// Ollama model; "ORG/NAME[@REV]" is looked up in hub_cache_dir() (REV: a branch under refs/, or a
// commit; default main, or the only snapshot when there is no refs/main).
Result<std::filesystem::path> resolve_model_dir(const std::string& spec);

// A checkpoint found in the hub cache.
struct CachedModel {
  std::string repo;                   // ORG/NAME
  std::string revision;               // the snapshot's commit
  std::filesystem::path dir;          // the snapshot directory
  std::uint64_t bytes = 0;            // weights on disk (the blobs the snapshot's files point at)
};
// Every repo in the hub cache whose resolved snapshot has a config.json, by repo name.
std::vector<CachedModel> list_hub_cache(const std::filesystem::path& hub);

// Folders other tools keep GGUF files in: llama.cpp's download cache ($LLAMA_CACHE, else
// ~/.cache/llama.cpp) and LM Studio's (~/.lmstudio/models, ~/.cache/lm-studio/models).
std::vector<std::filesystem::path> gguf_dirs();
// The GGUF model files under `dir` (a few levels deep, known by their magic): one entry per model,
// named by its path as --model takes it; a split model by its first part (-00001-of-N), its bytes
// all parts'.
std::vector<CachedModel> list_gguf_files(const std::filesystem::path& dir);

}  // namespace ft::cli

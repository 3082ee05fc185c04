// Secrets handed over in files (not argv, which any local user can read in /proc): the engine's
// key, which `serve` writes for the engine it starts and `proxy --engine-key-file` reads.
#pragma once

#include <filesystem>
#include <string>

#include "ft/common/result.h"

namespace ft::cli {

// The key in `path`, without surrounding whitespace. Refused: unreadable, empty, or readable by
// users other than its owner (chmod 600).
Result<std::string> read_key_file(const std::filesystem::path& path);

// A fresh random key (64 hex digits from the kernel's generator) written to `path`, created
// owner-only; fails if `path` exists.
Result<std::string> write_new_key_file(const std::filesystem::path& path);

}  // namespace ft::cli

// Secrets handed over in files (not argv, which any local user can read in /proc): the engine's
// key, which `serve` writes for the engine it starts and `proxy --engine-key-file` reads.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ft/common/result.h"

namespace ft::cli {

// The key in `path`, without surrounding whitespace. Refused: unreadable, empty, or readable by
// users other than its owner (chmod 600).
Result<std::string> read_key_file(const std::filesystem::path& path);

// `--api-keys FILE`: one "TENANT KEY" per line (blank lines and lines starting with # skipped);
// tenant names of letters, digits, '.', '_' and '-' (at most 64; a tenant may have several keys),
// keys without spaces, each listed once. Refused like read_key_file when others can read the file;
// errors name the line.
struct TenantKey {
  std::string tenant;
  std::string key;
};
Result<std::vector<TenantKey>> read_api_keys_file(const std::filesystem::path& path);

// A fresh random key (64 hex digits from the kernel's generator) written to `path`, created
// owner-only; fails if `path` exists.
Result<std::string> write_new_key_file(const std::filesystem::path& path);

}  // namespace ft::cli

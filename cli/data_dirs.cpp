#include "data_dirs.h"

#include <cstdlib>

namespace ft::cli {
namespace fs = std::filesystem;

fs::path freetoken_data_dir() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return fs::path(x) / "freetoken";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".local/share/freetoken";
  return fs::temp_directory_path() / "freetoken";
}

fs::path default_store_dir() { return freetoken_data_dir() / "store"; }

}  // namespace ft::cli

#include "data_dirs.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ft::cli {
namespace fs = std::filesystem;

fs::path freetoken_data_dir() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return fs::path(x) / "freetoken";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".local/share/freetoken";
  // No HOME (a service, a cleared environment): the home the user database names, else a temp
  // directory of this user's own (make_private_dir refuses one another user created first).
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir && *pw->pw_dir && std::string(pw->pw_dir) != "/")
    return fs::path(pw->pw_dir) / ".local/share/freetoken";
  return fs::temp_directory_path() / ("freetoken-" + std::to_string(::geteuid()));
}

fs::path default_store_dir() { return freetoken_data_dir() / "store"; }

}  // namespace ft::cli

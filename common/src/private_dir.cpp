#include "ft/common/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ft {

Status make_private_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return unavailable("cannot create " + dir.string() + ": " + ec.message());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return unavailable("cannot inspect " + dir.string() + ": " + std::strerror(errno));
  if (S_ISLNK(st.st_mode)) return unavailable(dir.string() + " is a symbolic link; use a directory of your own");
  if (!S_ISDIR(st.st_mode)) return unavailable(dir.string() + " is not a directory");
  if (st.st_uid != ::geteuid())
    return unavailable(dir.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
                       "); use a directory of your own");
  if ((st.st_mode & 0777) != 0700 && ::chmod(dir.c_str(), 0700) != 0)
    return unavailable("cannot make " + dir.string() + " private (mode 0700): " + std::strerror(errno));
  return Status::ok();
}

}  // namespace ft

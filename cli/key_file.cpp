#include "key_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ft::cli {

Result<std::string> read_key_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return invalid_argument("cannot read " + path.string() + ": " + std::strerror(errno));
  if (st.st_mode & 077) return invalid_argument(path.string() + " holds a key but others can read it: chmod 600 it");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  const auto first = key.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return invalid_argument(path.string() + " is empty: it should hold the key");
  key = key.substr(first, key.find_last_not_of(" \t\r\n") - first + 1);
  return key;
}

Result<std::string> write_new_key_file(const std::filesystem::path& path) {
  unsigned char bytes[32];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    return unavailable(std::string("no random bytes for a key: ") + std::strerror(errno));
  static const char* hex = "0123456789abcdef";
  std::string key;
  for (unsigned char b : bytes) {
    key.push_back(hex[b >> 4]);
    key.push_back(hex[b & 15]);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("cannot create " + path.string() + ": " + std::strerror(errno));
  const bool written = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size());
  ::close(fd);
  if (!written) return io_error("cannot write " + path.string());
  return key;
}

}  // namespace ft::cli

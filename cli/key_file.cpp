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

Result<std::vector<TenantKey>> read_api_keys_file(const std::filesystem::path& path) {
  FT_ASSIGN_OR_RETURN(const std::string text, read_key_file(path));
  std::vector<TenantKey> keys;
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    std::istringstream fields(line);
    TenantKey k;
    std::string extra;
    if (!(fields >> k.tenant) || k.tenant[0] == '#') continue;
    const std::string where = path.string() + ":" + std::to_string(n) + ": ";
    if (!(fields >> k.key) || (fields >> extra)) return invalid_argument(where + "expected TENANT KEY");
    if (k.tenant.size() > 64 || k.tenant.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                            "0123456789._-") != std::string::npos)
      return invalid_argument(where + "tenant '" + k.tenant + "': letters, digits, '.', '_' and '-' only (64 at most)");
    for (const TenantKey& other : keys)
      if (other.key == k.key) return invalid_argument(where + "this key is already listed (for '" + other.tenant + "')");
    keys.push_back(std::move(k));
  }
  return keys;
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

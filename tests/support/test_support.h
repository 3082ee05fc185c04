// Helpers shared by the test suites.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ft::test {

// A fresh directory under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built `freetoken` binary with these arguments (no shell); captures stdout and stderr.
CommandResult run_freetoken(const std::vector<std::string>& args);

// Path of the built freetoken binary.
std::string freetoken_binary();

std::string read_file(const std::filesystem::path& path);

}  // namespace ft::test

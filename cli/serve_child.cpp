#include "serve_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace ft::cli {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

std::string self_exe() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).string();
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int shell_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Forks `freetoken <args>` with stdout (and stderr unless `keep_stderr`) on `out_fd`; the child
// dies with this process, so an interrupted bench leaves no server behind.
pid_t spawn_self(const std::vector<std::string>& args, int out_fd, bool keep_stderr) {
  std::vector<std::string> storage = {self_exe()};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  dup2(out_fd, 1);
  if (!keep_stderr) dup2(out_fd, 2);
  execv(argv[0], argv.data());
  _exit(127);
}

}  // namespace

Result<std::unique_ptr<ServeChild>> ServeChild::start(const std::vector<std::string>& args, const fs::path& log,
                                                      int timeout_s) {
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("cannot write " + log.string());
  std::vector<std::string> serve_args = {"serve"};
  serve_args.insert(serve_args.end(), args.begin(), args.end());
  const pid_t pid = spawn_self(serve_args, fd, /*keep_stderr=*/false);
  close(fd);
  if (pid < 0) return unavailable("cannot start freetoken serve");
  std::unique_ptr<ServeChild> child(new ServeChild(pid, log));
  // serve's own lines start with "freetoken: "; its engine's log to the same file.
  const std::regex listening(R"((^|\n)freetoken: [^\n]*listening on http://[^:\s]+:(\d+))");
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (Clock::now() < deadline) {
    std::smatch m;
    const std::string text = read_all(log);
    if (std::regex_search(text, m, listening)) {
      child->port_ = std::stoi(m[2]);
      return child;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      child->reaped_ = true;
      return unavailable("freetoken serve ended before listening (" + std::to_string(shell_status(status)) +
                         "); its log: " + log.string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return unavailable("freetoken serve did not listen within " + std::to_string(timeout_s) +
                     " s; its log: " + log.string());
}

ServeChild::~ServeChild() { stop(); }

int ServeChild::stop() {
  if (reaped_) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return shell_status(status);
}

pid_t engine_pid_of(pid_t serve_pid) {
  // Each thread lists the children it forked: a restarted engine is the supervisor thread's.
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(serve_pid) + "/task", ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child = -1; in >> child;) {
      std::string cmdline = read_all("/proc/" + std::to_string(child) + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(" engine ") != std::string::npos) return child;
    }
  }
  return -1;
}

std::uint64_t resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    std::uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

bool process_stopped(pid_t pid) {
  const std::string stat = read_all("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
}

CommandOutput run_self(const std::vector<std::string>& args) {
  CommandOutput result;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return result;
  const pid_t pid = spawn_self(args, pipe_fds[1], /*keep_stderr=*/true);
  close(pipe_fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) result.out.append(buf, std::size_t(n));
  close(pipe_fds[0]);
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid) result.exit_code = shell_status(status);
  return result;
}

}  // namespace ft::cli

#include "engine_supervisor.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "key_file.h"

namespace ft::cli {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace

EngineSupervisor::EngineSupervisor(std::vector<std::string> args, fs::path dir)
    : args_(std::move(args)), dir_(std::move(dir)) {}

Result<std::unique_ptr<EngineSupervisor>> EngineSupervisor::start(std::vector<std::string> engine_args,
                                                                  int ready_timeout_s) {
  std::string tmpl = (fs::temp_directory_path() / "freetoken-serve-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return io_error("cannot create a temporary directory");
  std::unique_ptr<EngineSupervisor> s(new EngineSupervisor(std::move(engine_args), tmpl));
  FT_ASSIGN_OR_RETURN(s->key_, write_new_key_file(s->dir_ / "engine.key"));
  const pid_t pid = s->spawn(0);
  if (pid < 0) return unavailable("cannot start the engine process");
  {
    std::lock_guard lock(s->mu_);
    s->child_ = pid;
  }
  FT_RETURN_IF_ERROR(s->wait_ready(pid, ready_timeout_s));
  s->watcher_ = std::thread([p = s.get()] { p->watch(); });
  return s;
}

EngineSupervisor::~EngineSupervisor() {
  pid_t pid;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    pid = child_;
  }
  if (pid > 0) kill(pid, SIGTERM);
  // A graceful stop flushes the store's write-behind queue; give it 10 s, then insist.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (pid > 0 && watcher_.joinable() && Clock::now() < deadline) {
    {
      std::lock_guard lock(mu_);
      if (child_ != pid) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard lock(mu_);
    if (child_ == pid && pid > 0) kill(pid, SIGKILL);
  }
  if (watcher_.joinable()) {
    watcher_.join();
  } else if (pid > 0) {  // never got as far as watching
    waitpid(pid, nullptr, 0);
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

pid_t EngineSupervisor::spawn(int port) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> argv = {exe.string(), "engine"};
  argv.insert(argv.end(), args_.begin(), args_.end());
  argv.insert(argv.end(), {"--port", std::to_string(port), "--port-file", (dir_ / "engine.port").string(),
                           "--key-file", (dir_ / "engine.key").string()});
  fs::remove(dir_ / "engine.port", ec);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: die with the parent, take signals normally, become the engine.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(cargv[0], cargv.data());
  _exit(127);
}

Status EngineSupervisor::wait_ready(pid_t pid, int timeout_s) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  const fs::path file = dir_ / "engine.port";
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      std::lock_guard lock(mu_);
      child_ = -1;
      return unavailable("the engine process ended before serving (" + describe_exit(status) + ")");
    }
    std::ifstream in(file);
    int port = 0;
    if (in >> port && port > 0) {
      port_ = port;
      return Status::ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return unavailable("the engine did not come up within " + std::to_string(timeout_s) + " s");
}

void EngineSupervisor::watch() {
  auto backoff = std::chrono::milliseconds(250);
  for (;;) {
    pid_t pid;
    {
      std::lock_guard lock(mu_);
      pid = child_;
    }
    const auto started = Clock::now();
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    {
      std::lock_guard lock(mu_);
      child_ = -1;
      if (stopping_) return;
    }
    std::fprintf(stderr, "freetoken serve: the engine ended (%s); restarting it\n", describe_exit(status).c_str());
    if (Clock::now() - started > std::chrono::seconds(60)) backoff = std::chrono::milliseconds(250);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(8000));
    std::lock_guard lock(mu_);
    if (stopping_) return;
    child_ = spawn(port_);
    ++restarts_;
  }
}

}  // namespace ft::cli

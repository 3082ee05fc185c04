#include "engine_supervisor.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "ft/proxy/backend.h"
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

EngineSupervisor::EngineSupervisor(std::vector<std::string> args, fs::path dir, Options options)
    : args_(std::move(args)), dir_(std::move(dir)), options_(std::move(options)) {}

Result<std::unique_ptr<EngineSupervisor>> EngineSupervisor::start(std::vector<std::string> engine_args,
                                                                  Options options) {
  std::string tmpl = (fs::temp_directory_path() / "freetoken-serve-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return io_error("cannot create a temporary directory");
  std::unique_ptr<EngineSupervisor> s(new EngineSupervisor(std::move(engine_args), tmpl, std::move(options)));
  FT_ASSIGN_OR_RETURN(s->key_, write_new_key_file(s->dir_ / "engine.key"));
  const pid_t pid = s->spawn();
  if (pid < 0) return unavailable("cannot start the engine process");
  {
    std::lock_guard lock(s->mu_);
    s->child_ = pid;
  }
  FT_RETURN_IF_ERROR(s->wait_ready(pid, s->options_.ready_timeout_s));
  s->ready_ = true;
  s->watcher_ = std::thread([p = s.get()] { p->watch(); });
  if (s->options_.liveness_timeout_s > 0) s->prober_ = std::thread([p = s.get()] { p->probe(); });
  return s;
}

EngineSupervisor::~EngineSupervisor() {
  pid_t pid;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    pid = child_;
  }
  stop_cv_.notify_all();
  if (prober_.joinable()) prober_.join();
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

pid_t EngineSupervisor::spawn() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> argv = {exe.string(), "engine"};
  argv.insert(argv.end(), args_.begin(), args_.end());
  argv.insert(argv.end(), {"--port", "0", "--port-file", (dir_ / "engine.port").string(),
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
      port_->store(port);
      return Status::ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return unavailable("the engine did not come up within " + std::to_string(timeout_s) + " s");
}

void EngineSupervisor::watch() {
  auto backoff = std::chrono::milliseconds(250);
  int failures = 0;  // engines in a row that ended before they had served crash_window_s
  // When the current engine became ready (the first one is when watching starts); none while a
  // restarted one has not come up.
  std::optional<Clock::time_point> ready_at = Clock::now();
  for (;;) {
    pid_t pid;
    {
      std::lock_guard lock(mu_);
      pid = child_;
    }
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    ready_ = false;
    {
      std::lock_guard lock(mu_);
      child_ = -1;
      if (stopping_) return;
    }
    // Measured from readiness, not from the start: an engine that served a while and was then
    // killed (out of memory, an operator, a chaos test) is no crash loop, however long it took to
    // load; one that never came up, or died right after, is.
    const bool quick = !ready_at || Clock::now() - *ready_at < std::chrono::seconds(options_.crash_window_s);
    failures = quick ? failures + 1 : 1;
    if (!quick) backoff = std::chrono::milliseconds(250);
    const std::string why = pid > 0 ? "the engine ended (" + describe_exit(status) + ")" : "the engine did not start";
    if (failures >= options_.max_failures) {
      const std::string msg = why + ", the " + std::to_string(failures) + "th time in a row within " +
                              std::to_string(options_.crash_window_s) + " s of serving; giving up";
      std::fprintf(stderr, "freetoken serve: %s\n", msg.c_str());
      if (options_.on_give_up) options_.on_give_up(msg);
      return;
    }
    std::fprintf(stderr, "freetoken serve: %s; restarting it\n", why.c_str());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(8000));
    pid_t next;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      next = child_ = spawn();  // on a fresh port: the old one may belong to someone else by now
      ++restarts_;
    }
    ready_at.reset();
    if (next > 0 && wait_ready(next, options_.ready_timeout_s)) {
      ready_at = Clock::now();
      ready_ = true;
      std::fprintf(stderr, "freetoken serve: the engine is back on port %d\n", port_->load());
    } else if (next > 0) {
      std::lock_guard lock(mu_);
      if (child_ == next) kill(next, SIGKILL);  // did not come up: reaped above, counted as a failure
    }
  }
}

bool EngineSupervisor::answers(int timeout_s) const {
  return !proxy::get_engine_document("127.0.0.1", port_->load(), key_, "/engine/v1/status", timeout_s).contains("error");
}

// Every few seconds, the status route of a ready engine: when it has not answered for
// liveness_timeout_s, the engine is hung and killed (the watcher restarts it).
void EngineSupervisor::probe() {
  const auto period = std::chrono::seconds(2);
  auto last_ok = Clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, period, [&] { return stopping_; });
    if (stopping_) return;
    if (!ready_) {
      last_ok = Clock::now();
      continue;
    }
    lock.unlock();
    const bool ok = answers(std::max(1, options_.liveness_timeout_s / 2));
    lock.lock();
    if (ok || !ready_) {
      last_ok = Clock::now();
      continue;
    }
    const auto silent = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - last_ok);
    if (silent.count() >= options_.liveness_timeout_s && child_ > 0 && !stopping_) {
      std::fprintf(stderr, "freetoken serve: the engine has not answered for %d s; killing it\n", int(silent.count()));
      kill(child_, SIGKILL);
      ready_ = false;
      last_ok = Clock::now();
    }
  }
}

}  // namespace ft::cli

// `freetoken serve` (or any freetoken command that prints "listening on http://HOST:PORT") as a
// child process for end-to-end tests: output to a log file, the port read from it, signals on
// demand, SIGTERM + reap on destruction.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ft::test {

class ServeProcess {
 public:
  // Starts `freetoken <args>` and waits (up to timeout_s) for a line starting with `ready`
  // followed by "listening on http://HOST:PORT" (serve's engine child writes to the same log, so
  // the prefix tells them apart). nullptr (with the log in *log_out when given) when it exits or
  // never listens.
  static std::unique_ptr<ServeProcess> start(const std::vector<std::string>& args, const std::filesystem::path& log,
                                             int timeout_s = 120, std::string* log_out = nullptr,
                                             const std::string& ready = "freetoken: ");
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The first child process of this one (serve's engine), -1 if none.
  pid_t child_pid() const;
  void signal(int sig);
  // Waits for the process to end; returns its exit status as the shell shows it (128+sig).
  int wait();
  std::string log() const;

 private:
  ServeProcess(pid_t pid, std::filesystem::path log) : pid_(pid), log_(std::move(log)) {}
  pid_t pid_;
  int port_ = 0;
  bool reaped_ = false;
  std::filesystem::path log_;
};

}  // namespace ft::test

// `freetoken serve` as a child of `bench load`: started from this same executable with its output
// in a log file, its port read from the "listening on" line, its engine found among its children,
// stopped with SIGTERM (the engine then flushes its checkpoint store) and reaped. Also: another
// command of this executable run to completion with its stdout captured (ctl checkpoints verify).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ft/common/result.h"

namespace ft::cli {

class ServeChild {
 public:
  // Starts `freetoken serve <args>` (add --port 0) and waits up to `timeout_s` until it listens.
  static Result<std::unique_ptr<ServeChild>> start(const std::vector<std::string>& args,
                                                   const std::filesystem::path& log, int timeout_s);
  ~ServeChild();  // stop()
  ServeChild(const ServeChild&) = delete;
  ServeChild& operator=(const ServeChild&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::filesystem::path& log() const { return log_; }
  // SIGTERM, then waits for it to end: its exit code, or 128 + the signal that ended it.
  int stop();

 private:
  ServeChild(pid_t pid, std::filesystem::path log) : pid_(pid), log_(std::move(log)) {}
  pid_t pid_;
  std::filesystem::path log_;
  int port_ = 0;
  bool reaped_ = false;
};

// The engine process of the `serve` with this pid (a child running `freetoken engine`), or -1
// while there is none (it is being restarted).
pid_t engine_pid_of(pid_t serve_pid);

// Resident memory of a process (VmRSS), bytes; 0 when it is gone.
std::uint64_t resident_bytes(pid_t pid);

// Whether a process is stopped (SIGSTOP from outside: a run measured meanwhile measures nothing).
bool process_stopped(pid_t pid);

struct CommandOutput {
  int exit_code = -1;
  std::string out;  // stdout; stderr goes where ours goes
};
// Runs `freetoken <args>` to completion.
CommandOutput run_self(const std::vector<std::string>& args);

}  // namespace ft::cli

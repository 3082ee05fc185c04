// `serve` runs the engine as a child process (`freetoken engine`) and keeps it alive: if it dies,
// it is started again on the same port with the same flags and key (its checkpoints persist in
// the store). The engine requires a key `serve` makes at start, so only this proxy can use it. The child is killed with its parent (PR_SET_PDEATHSIG), so a killed `serve` never
// leaves an engine holding the store's lock.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ft/common/result.h"

namespace ft::cli {

class EngineSupervisor {
 public:
  // Starts `freetoken engine <engine_args> --port 0 --port-file ...` and waits (up to
  // ready_timeout_s) until it listens. kUnavailable when it exits or does not come up.
  static Result<std::unique_ptr<EngineSupervisor>> start(std::vector<std::string> engine_args, int ready_timeout_s);
  ~EngineSupervisor();  // SIGTERM, then SIGKILL after 10 s
  EngineSupervisor(const EngineSupervisor&) = delete;
  EngineSupervisor& operator=(const EngineSupervisor&) = delete;

  int port() const { return port_; }
  // The key the engine requires (fresh each `serve`, in a file only this user can read).
  const std::string& key() const { return key_; }
  int restarts() const { return restarts_.load(); }

 private:
  EngineSupervisor(std::vector<std::string> args, std::filesystem::path dir);
  pid_t spawn(int port);
  Status wait_ready(pid_t pid, int timeout_s);
  void watch();

  std::vector<std::string> args_;
  std::filesystem::path dir_;  // holds the port file and the key file (mkdtemp: owner-only)
  int port_ = 0;
  std::string key_;
  std::mutex mu_;
  pid_t child_ = -1;
  bool stopping_ = false;
  std::atomic<int> restarts_{0};
  std::thread watcher_;
};

}  // namespace ft::cli

// `serve` runs the engine as a child process (`freetoken engine`) and keeps it alive: if it dies,
// or stops answering its status route for `liveness_timeout_s` (hung: killed), it is started again
// with the same flags and key (its checkpoints persist in the store) on a fresh port, which the
// proxy follows (port_source): a port given up is never re-bound, so no other process waiting for
// it gets the proxy's traffic. Restarts back off (0.25 s doubling to 8 s); after
// `max_failures` engines in a row that did not come up, or died or hung within `crash_window_s`
// of coming up, it gives up and calls `on_give_up`. The engine requires a key `serve` makes at
// start, so only this proxy can use it. The child is killed with its parent (PR_SET_PDEATHSIG), so
// a killed `serve` never leaves an engine holding the store's lock.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
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
  struct Options {
    int ready_timeout_s = 600;     // for the engine to load its model and listen
    int liveness_timeout_s = 60;   // no answer from its status route this long: hung (0: never)
    int max_failures = 5;          // engines in a row that died or hung soon after coming up
    int crash_window_s = 30;       // "soon": before serving this long
    std::function<void(const std::string& why)> on_give_up = nullptr;
  };
  // Starts `freetoken engine <engine_args> --port 0 --port-file ...` and waits until it listens.
  // kUnavailable when it exits or does not come up.
  static Result<std::unique_ptr<EngineSupervisor>> start(std::vector<std::string> engine_args, Options options);
  ~EngineSupervisor();  // SIGTERM, then SIGKILL after 10 s
  EngineSupervisor(const EngineSupervisor&) = delete;
  EngineSupervisor& operator=(const EngineSupervisor&) = delete;

  int port() const { return port_->load(); }
  // The engine's current port, for a proxy that follows restarts.
  std::shared_ptr<const std::atomic<int>> port_source() const { return port_; }
  // The key the engine requires (fresh each `serve`, in a file only this user can read).
  const std::string& key() const { return key_; }
  int restarts() const { return restarts_.load(); }

 private:
  EngineSupervisor(std::vector<std::string> args, std::filesystem::path dir, Options options);
  pid_t spawn();
  Status wait_ready(pid_t pid, int timeout_s);
  void watch();
  void probe();
  bool answers(int timeout_s) const;

  std::vector<std::string> args_;
  std::filesystem::path dir_;  // holds the port file and the key file (mkdtemp: owner-only)
  Options options_;
  std::shared_ptr<std::atomic<int>> port_ = std::make_shared<std::atomic<int>>(0);
  std::string key_;
  std::mutex mu_;
  pid_t child_ = -1;
  bool stopping_ = false;
  std::atomic<int> restarts_{0};
  std::atomic<bool> ready_{false};  // the current engine listens (the prober checks it then)
  std::condition_variable stop_cv_;
  std::thread watcher_;
  std::thread prober_;
};

}  // namespace ft::cli

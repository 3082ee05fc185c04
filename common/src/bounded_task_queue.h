// httplib's connection queue with a bound. httplib::ThreadPool queues every accepted connection
// without limit: once all workers are busy, each new client waits, unanswered, for as long as the
// busy ones take. This one lets a few wait and hands the rest back at once to be refused.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ft {

class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  // `overflow` runs, on the enqueuing thread, each job that found `max_waiting` jobs already
  // waiting for a worker. It must be quick: that thread is the server's accept loop.
  BoundedTaskQueue(size_t threads, size_t max_waiting, std::function<void(std::function<void()>)> overflow);
  ~BoundedTaskQueue() override;
  BoundedTaskQueue(const BoundedTaskQueue&) = delete;
  BoundedTaskQueue& operator=(const BoundedTaskQueue&) = delete;

  void enqueue(std::function<void()> job) override;
  // Runs the jobs still queued, then joins the workers (as httplib::ThreadPool does).
  void shutdown() override;

 private:
  void work();

  const size_t max_waiting_;
  const std::function<void(std::function<void()>)> overflow_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  size_t idle_;  // workers not running a job: queued jobs they are about to take are not waiting
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace ft

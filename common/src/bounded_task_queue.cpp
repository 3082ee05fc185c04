#include "bounded_task_queue.h"

namespace ft {

BoundedTaskQueue::BoundedTaskQueue(size_t threads, size_t max_waiting,
                                   std::function<void(std::function<void()>)> overflow)
    : max_waiting_(max_waiting), overflow_(std::move(overflow)), idle_(threads) {
  // Idle from the start: a worker thread not yet scheduled is still a free worker, and counting it
  // only once it ran refused the second connection to a server started an instant before.
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

BoundedTaskQueue::~BoundedTaskQueue() { shutdown(); }

void BoundedTaskQueue::enqueue(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (jobs_.size() < idle_ + max_waiting_) {
      jobs_.push_back(std::move(job));
      ready_.notify_one();
      return;
    }
  }
  overflow_(std::move(job));
}

void BoundedTaskQueue::shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
}

void BoundedTaskQueue::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left to run
      --idle_;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
    std::lock_guard lock(mu_);
    ++idle_;
  }
}

}  // namespace ft

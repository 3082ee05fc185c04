#include "write_behind.h"

#include <algorithm>

namespace ft::store {

WriteBehind::WriteBehind(std::size_t max_jobs, std::uint64_t max_bytes, Writer writer)
    : max_jobs_(std::max<std::size_t>(max_jobs, 1)), max_bytes_(max_bytes), writer_(std::move(writer)),
      thread_([this] { run(); }) {}

WriteBehind::~WriteBehind() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

bool WriteBehind::drop_oldest_unpinned_locked() {
  auto it = std::find_if(queue_.begin(), queue_.end(), [](const Job& j) { return !j.pinned; });
  if (it == queue_.end()) return false;
  queued_bytes_ -= it->bytes;
  queue_.erase(it);
  ++dropped_;
  return true;
}

void WriteBehind::push(Job job) {
  {
    std::lock_guard lock(mu_);
    auto same = std::find_if(queue_.begin(), queue_.end(), [&](const Job& j) { return j.id == job.id; });
    if (same != queue_.end()) {  // superseded, not lost: not counted as a drop
      job.pinned = job.pinned || same->pinned;
      queued_bytes_ -= same->bytes;
      queue_.erase(same);
    }
    auto full = [&] { return queue_.size() >= max_jobs_ || queued_bytes_ + job.bytes > max_bytes_; };
    while (full() && drop_oldest_unpinned_locked()) {
    }
    if (full() && !job.pinned) {  // everything pending is pinned: the newcomer is the one to lose
      ++dropped_;
      return;
    }
    queued_bytes_ += job.bytes;
    queue_.push_back(std::move(job));
  }
  work_cv_.notify_one();
}

void WriteBehind::flush() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

std::uint64_t WriteBehind::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void WriteBehind::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop_ and drained
    Job job = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= job.bytes;
    busy_ = true;
    lock.unlock();
    writer_(job);
    job.state.reset();  // free the payload before taking the lock again
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

}  // namespace ft::store

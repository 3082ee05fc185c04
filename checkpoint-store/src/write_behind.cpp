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

void WriteBehind::add_locked(Queued q) {
  queued_bytes_.add(q.footprint);
  queue_.push_back(std::move(q));
}

WriteBehind::Job WriteBehind::remove_locked(std::deque<Queued>::iterator it) {
  queued_bytes_.remove(it->footprint);
  Job job = std::move(it->job);
  queue_.erase(it);
  return job;
}

bool WriteBehind::drop_oldest_unpinned_locked() {
  auto it = std::find_if(queue_.begin(), queue_.end(), [](const Queued& q) { return !q.job.pinned; });
  if (it == queue_.end()) return false;
  remove_locked(it);
  ++dropped_;
  return true;
}

void WriteBehind::push(Job job) {
  StateFootprint footprint = StateFootprint::of(*job.state);  // by address: waits for no bytes
  Queued q{std::move(job), std::move(footprint)};
  {
    std::lock_guard lock(mu_);
    auto same = std::find_if(queue_.begin(), queue_.end(), [&](const Queued& j) { return j.job.id == q.job.id; });
    if (same != queue_.end()) {  // superseded, not lost: not counted as a drop
      q.job.pinned = q.job.pinned || same->job.pinned;
      remove_locked(same);
    }
    auto full = [&] {
      return queue_.size() >= max_jobs_ || queued_bytes_.bytes() + queued_bytes_.added_by(q.footprint) > max_bytes_;
    };
    while (full() && drop_oldest_unpinned_locked()) {
    }
    if (full() && !q.job.pinned) {  // everything pending is pinned: the newcomer is the one to lose
      ++dropped_;
      return;
    }
    add_locked(std::move(q));
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
    Job job = remove_locked(queue_.begin());
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

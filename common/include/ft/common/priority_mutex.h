#pragma once
// A mutex whose urgent lockers go before its ordinary ones. std::mutex is not fair: a thread that
// unlocks and locks again at once (a scheduler starting the next forward pass as soon as one ends)
// can hold off another waiter for many rounds. Here a thread waiting in lock_urgent() blocks every
// later lock() until it has had its turn, so it waits for the pass that runs now and no longer.
// Meets Lockable for lock()/unlock(); UrgentLock is the RAII guard of lock_urgent().

#include <condition_variable>
#include <mutex>

namespace ft {

class PriorityMutex {
 public:
  void lock();
  bool try_lock();
  void lock_urgent();
  void unlock();
  int urgent_waiters() const;  // for tests: urgent lockers now waiting

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool held_ = false;
  int urgent_ = 0;
};

class UrgentLock {
 public:
  explicit UrgentLock(PriorityMutex& m) : m_(m) { m_.lock_urgent(); }
  ~UrgentLock() { m_.unlock(); }
  UrgentLock(const UrgentLock&) = delete;
  UrgentLock& operator=(const UrgentLock&) = delete;

 private:
  PriorityMutex& m_;
};

}  // namespace ft

#include "ft/common/priority_mutex.h"

namespace ft {

void PriorityMutex::lock() {
  std::unique_lock l(m_);
  cv_.wait(l, [&] { return !held_ && urgent_ == 0; });
  held_ = true;
}

bool PriorityMutex::try_lock() {
  std::lock_guard l(m_);
  if (held_ || urgent_ > 0) return false;
  held_ = true;
  return true;
}

void PriorityMutex::lock_urgent() {
  std::unique_lock l(m_);
  ++urgent_;
  cv_.wait(l, [&] { return !held_; });
  --urgent_;
  held_ = true;
}

void PriorityMutex::unlock() {
  {
    std::lock_guard l(m_);
    held_ = false;
  }
  cv_.notify_all();
}

int PriorityMutex::urgent_waiters() const {
  std::lock_guard l(m_);
  return urgent_;
}

}  // namespace ft

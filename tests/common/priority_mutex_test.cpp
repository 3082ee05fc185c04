#include "ft/common/priority_mutex.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace ft {
namespace {

TEST(PriorityMutex, AnUrgentWaiterGoesBeforeOrdinaryOnesThatCameFirst) {
  PriorityMutex m;
  std::mutex order_mu;
  std::vector<char> order;
  const auto record = [&](char c) {
    std::lock_guard l(order_mu);
    order.push_back(c);
  };
  m.lock();
  std::atomic<int> started{0};
  std::vector<std::thread> ordinary;
  for (int i = 0; i < 8; ++i) {
    ordinary.emplace_back([&] {
      ++started;
      std::lock_guard l(m);
      record('o');
    });
  }
  while (started < 8) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // they are (most likely) waiting already
  std::thread urgent([&] {
    UrgentLock l(m);
    record('u');
  });
  while (m.urgent_waiters() == 0) std::this_thread::yield();
  m.unlock();
  urgent.join();
  for (std::thread& t : ordinary) t.join();
  ASSERT_EQ(order.size(), 9u);
  EXPECT_EQ(order.front(), 'u');
}

TEST(PriorityMutex, AnUrgentLockerWaitsOutOnlyThePassThatRunsNow) {
  // One thread locks and unlocks in a tight loop, as a scheduler starts pass after pass; an urgent
  // locker must get in after the pass that was running, not after an unbounded number of them.
  PriorityMutex m;
  std::atomic<bool> stop{false};
  std::atomic<long> passes{0};
  std::thread scheduler([&] {
    while (!stop) {
      std::lock_guard l(m);
      ++passes;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  while (passes < 10) std::this_thread::yield();
  std::vector<long> waited;
  for (int i = 0; i < 21; ++i) {
    const long before = passes.load();
    UrgentLock l(m);
    waited.push_back(passes.load() - before);
  }
  stop = true;
  scheduler.join();
  // The median: a round in which this thread was descheduled between its two reads may count more.
  std::nth_element(waited.begin(), waited.begin() + 10, waited.end());
  EXPECT_LE(waited[10], 1);
}

TEST(PriorityMutex, TryLockDefersToAnUrgentWaiter) {
  PriorityMutex m;
  m.lock();
  EXPECT_FALSE(m.try_lock());
  std::thread urgent([&] { UrgentLock l(m); });
  while (m.urgent_waiters() == 0) std::this_thread::yield();
  m.unlock();
  urgent.join();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

}  // namespace
}  // namespace ft

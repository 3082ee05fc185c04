// The HTTP server's connection queue: a bounded number of connections wait for a worker, the rest
// are handed back at once, and a worker counts as free from the queue's first instant.
#include "bounded_task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

namespace ft {
namespace {

using namespace std::chrono_literals;

// One worker and one waiting place, used the instant the queue exists (a server's first
// connections arrive before its worker threads have run): the first job goes to the worker, the
// second waits, the third is handed back; every accepted job runs.
TEST(BoundedTaskQueue, OneRunsOneWaitsTheNextIsHandedBackFromTheFirstInstant) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> overflowed{0}, ran{0};
    std::atomic<bool> first_running{false};
    std::latch release(1);
    {
      BoundedTaskQueue queue(1, 1, [&](std::function<void()>) { ++overflowed; });
      queue.enqueue([&] {
        first_running = true;
        release.wait();
        ++ran;
      });
      queue.enqueue([&] { ++ran; });
      EXPECT_EQ(overflowed.load(), 0) << "round " << round << ": a waiting place was refused";
      while (!first_running) std::this_thread::sleep_for(1ms);
      queue.enqueue([&] { ++ran; });
      release.count_down();  // before any check that returns: the queue joins the worker
      EXPECT_EQ(overflowed.load(), 1) << "round " << round << ": a job past the bound was queued";
      queue.shutdown();
    }
    EXPECT_EQ(ran.load(), 2);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace ft

// The spinning team of ops/cpu/team.h that runs an offloaded layer's CPU experts: every item once,
// on several threads, nested loops inline, and workers that went to sleep wake for the next job.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/team.h"

namespace ft::engine::cpu {
namespace {

using namespace std::chrono_literals;

TEST(CpuTeam, RunsEveryItemOnceInEveryJob) {
  Team team(3);
  EXPECT_EQ(team.size(), 4);
  Team::Scope scope(team);
  for (std::size_t n : {1u, 2u, 7u, 64u, 1000u}) {
    for (int job = 0; job < 50; ++job) {
      std::vector<std::atomic<int>> runs(n);
      parallel_items(n, [&](std::size_t i) { runs[i].fetch_add(1); });
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "n " << n << " job " << job << " item " << i;
    }
  }
}

TEST(CpuTeam, ItemsRunOnTheWorkersBesideTheCaller) {
  Team team(2);
  Team::Scope scope(team);
  // Item 0 holds its thread until another item has started elsewhere: only a second thread of the
  // team can let it go (bounded, so a broken team fails instead of hanging).
  std::atomic<bool> other_started{false};
  std::mutex mu;
  std::set<std::thread::id> threads;
  parallel_items(8, [&](std::size_t i) {
    {
      std::lock_guard lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    if (i == 0) {
      const auto until = std::chrono::steady_clock::now() + 5s;
      while (!other_started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    } else {
      other_started = true;
    }
  });
  EXPECT_TRUE(other_started);
  EXPECT_GE(threads.size(), 2u);
}

TEST(CpuTeam, ANestedLoopRunsInlineOnTheItemsThread) {
  Team team(2);
  Team::Scope scope(team);
  std::atomic<int> inner{0}, foreign{0};
  parallel_items(6, [&](std::size_t) {
    const auto me = std::this_thread::get_id();
    EXPECT_TRUE(Team::in_item());
    parallel_items(5, [&](std::size_t) {
      inner.fetch_add(1);
      if (std::this_thread::get_id() != me) foreign.fetch_add(1);
    });
  });
  EXPECT_EQ(inner.load(), 30);
  EXPECT_EQ(foreign.load(), 0);
  EXPECT_FALSE(Team::in_item());
  EXPECT_EQ(Team::current(), &team);
}

TEST(CpuTeam, WorkersThatFellAsleepWakeForTheNextJob) {
  Team team(2, 1ms);  // they sleep 1 ms after a job
  Team::Scope scope(team);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(20ms);
    std::atomic<bool> other_started{false};
    std::atomic<int> runs{0};
    parallel_items(4, [&](std::size_t i) {
      runs.fetch_add(1);
      if (i == 0) {
        const auto until = std::chrono::steady_clock::now() + 5s;
        while (!other_started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      } else {
        other_started = true;
      }
    });
    EXPECT_EQ(runs.load(), 4);
    EXPECT_TRUE(other_started) << "round " << round;
  }
}

TEST(CpuTeam, AnItemsExceptionReachesTheLeaderAfterTheJob) {
  Team team(2);
  Team::Scope scope(team);
  std::atomic<int> runs{0};
  EXPECT_THROW(parallel_items(64,
                              [&](std::size_t i) {
                                runs.fetch_add(1);
                                if (i % 16 == 5) throw std::runtime_error("item " + std::to_string(i));
                              }),
               std::runtime_error);
  EXPECT_EQ(runs.load(), 64);  // every item ran: the job ended before the leader left it
  std::atomic<int> again{0};
  parallel_items(10, [&](std::size_t) { again.fetch_add(1); });  // the team still works
  EXPECT_EQ(again.load(), 10);
}

TEST(CpuTeam, WithoutATeamTheLoopRunsOnTbb) {
  EXPECT_EQ(Team::current(), nullptr);
  std::vector<std::atomic<int>> runs(500);
  parallel_items(runs.size(), [&](std::size_t i) { runs[i].fetch_add(1); });
  for (auto& r : runs) ASSERT_EQ(r.load(), 1);
  {
    Team team(1);
    Team::Scope scope(team);
    EXPECT_EQ(Team::current(), &team);
  }
  EXPECT_EQ(Team::current(), nullptr);
}

}  // namespace
}  // namespace ft::engine::cpu

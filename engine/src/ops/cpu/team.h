// A team of threads that spin between jobs, for CPU work that comes in short bursts with gaps too
// short to sleep through: an offloaded layer's CPU share is ~100-300 us of expert products every
// layer, with the GPU's dense work (~50 us) between two layers. tbb::parallel_for's workers sleep
// once they find nothing to do, and each burst then pays their wake-up; a team's threads keep
// spinning for `spin` after their last job and only then sleep. Internal to ft_engine.
#pragma once

#include <tbb/parallel_for.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ft::engine::cpu {

class Team {
 public:
  using ItemFn = void (*)(void* ctx, std::size_t i);

  // workers: threads besides the caller of run(), which always takes part in its jobs.
  explicit Team(int workers, std::chrono::microseconds spin = std::chrono::milliseconds(2));
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const { return int(threads_.size()) + 1; }
  // fn(ctx, i) for every i in [0, n), each once, on the caller and the workers; returns when all
  // are done, rethrowing the first exception an item threw. One job at a time: the team has one
  // leader (the thread that owns it).
  void run(std::size_t n, ItemFn fn, void* ctx);

  // While a Scope lives, parallel_items() on its thread runs on `team`.
  class Scope {
   public:
    explicit Scope(Team& team);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Team* previous_;
  };
  // The team this thread leads now (a Scope's), or null.
  static Team* current();
  // Whether this thread is running one of a team's items (a nested parallel loop runs inline).
  static bool in_item();

 private:
  void work(std::stop_token stop);
  // Takes items of job `gen` until none is left (or another job began).
  void take_items(std::uint32_t gen);
  bool job_changed(std::uint32_t seen) const { return std::uint32_t(ticket_.load() >> 32) != seen; }

  static constexpr std::uint32_t kClosed = 0xffffffffu;  // a ticket's item past every job's n

  std::chrono::microseconds spin_;
  // The job now: its generation (high 32 bits) and the next item to take (low 32; kClosed once the
  // job is over).
  std::atomic<std::uint64_t> ticket_{kClosed};
  std::atomic<std::size_t> n_{0}, done_{0};
  std::atomic<ItemFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::uint32_t gen_ = 0;
  std::mutex mu_;  // with cv_: the wake-up of workers that stopped spinning
  std::condition_variable_any cv_;
  std::atomic<int> sleeping_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;  // the job's first, for the leader
  std::vector<std::jthread> threads_;
};

// fn(i) for every i in [0, n): on the team this thread leads (Team::Scope), inline inside a team's
// item, else on TBB's workers. Items may run in any order and on any thread.
template <typename Fn>
void parallel_items(std::size_t n, Fn&& fn) {
  if (n == 1) return fn(std::size_t(0));
  if (Team* team = Team::current()) {
    using F = std::remove_reference_t<Fn>;
    team->run(
        n, [](void* ctx, std::size_t i) { (*static_cast<F*>(ctx))(i); },
        const_cast<void*>(static_cast<const void*>(&fn)));
    return;
  }
  if (Team::in_item()) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  tbb::parallel_for(std::size_t(0), n, fn);
}

}  // namespace ft::engine::cpu

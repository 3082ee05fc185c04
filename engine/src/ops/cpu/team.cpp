#include "ops/cpu/team.h"

#include <algorithm>
#include <exception>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ft::engine::cpu {
namespace {

thread_local Team* current_team = nullptr;
thread_local bool running_item = false;

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

Team::Team(int workers, std::chrono::microseconds spin) : spin_(spin) {
  threads_.reserve(std::size_t(std::max(workers, 0)));
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this](std::stop_token stop) { work(stop); });
}

Team::~Team() {
  for (std::jthread& t : threads_) t.request_stop();
  {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  threads_.clear();  // joins
}

Team::Scope::Scope(Team& team) : previous_(current_team) { current_team = &team; }
Team::Scope::~Scope() { current_team = previous_; }
Team* Team::current() { return current_team; }
bool Team::in_item() { return running_item; }

void Team::take_items(std::uint32_t gen) {
  // An item taken (the ticket moved while it still named job `gen`) keeps the job from ending, so
  // the job's fn and ctx read after taking one are that job's.
  for (;;) {
    std::uint64_t t = ticket_.load(std::memory_order_acquire);
    if (std::uint32_t(t >> 32) != gen) return;
    const std::size_t i = std::uint32_t(t);
    if (i >= n_.load(std::memory_order_acquire)) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    try {
      fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), i);
    } catch (...) {  // the leader rethrows it once every item is done (they may use its frame)
      std::lock_guard lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_release);
  }
}

void Team::run(std::size_t n, ItemFn fn, void* ctx) {
  if (n == 0) return;
  if (n >= kClosed) {  // more items than a ticket counts: in two jobs
    run(n / 2, fn, ctx);
    struct Offset {
      ItemFn fn;
      void* ctx;
      std::size_t first;
    } rest{fn, ctx, n / 2};
    return run(
        n - n / 2,
        [](void* c, std::size_t i) {
          const Offset& o = *static_cast<const Offset*>(c);
          o.fn(o.ctx, o.first + i);
        },
        &rest);
  }
  // Leader and workers run items with running_item set: a parallel loop inside one runs inline.
  const bool was_running = running_item;
  running_item = true;
  current_team = nullptr;  // (restored below) a nested loop must not start a job of its own
  fn_.store(fn, std::memory_order_relaxed);
  ctx_.store(ctx, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  ++gen_;
  ticket_.store(std::uint64_t(gen_) << 32);  // publishes the job (sequentially consistent: see work())
  if (sleeping_.load() > 0) {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  take_items(gen_);
  while (done_.load(std::memory_order_acquire) < n) relax();
  // Closed: a worker that read this job's ticket late cannot take an item of it once the next
  // job's n is stored.
  ticket_.store(std::uint64_t(gen_) << 32 | kClosed);
  current_team = this;
  running_item = was_running;
  std::exception_ptr error;
  {
    std::lock_guard lock(error_mu_);
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void Team::work(std::stop_token stop) {
  running_item = true;
  std::uint32_t seen = 0;
  while (!stop.stop_requested()) {
    // Spin for the next job; after `spin_` without one, sleep until a job or the stop comes. The
    // leader stores the ticket, then reads sleeping_; a worker counts itself sleeping, then reads
    // the ticket (both sequentially consistent): one of them sees the other.
    auto idle_since = std::chrono::steady_clock::now();
    for (unsigned spins = 1; !job_changed(seen) && !stop.stop_requested(); ++spins) {
      relax();
      if (spins % 256 != 0 || std::chrono::steady_clock::now() - idle_since < spin_) continue;
      std::unique_lock lock(mu_);
      sleeping_.fetch_add(1);
      cv_.wait(lock, stop, [&] { return job_changed(seen); });
      sleeping_.fetch_sub(1);
      idle_since = std::chrono::steady_clock::now();
    }
    if (stop.stop_requested()) return;
    seen = std::uint32_t(ticket_.load() >> 32);
    take_items(seen);
  }
}

}  // namespace ft::engine::cpu

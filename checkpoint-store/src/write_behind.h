// The background writer behind RocksDbStore::save_async: a bounded queue and one thread.
//
// The producer is the decode loop, which must never wait for a disk. So push() never blocks on IO:
// when the queue is full it drops the oldest pending unpinned save (a checkpoint is a cache entry;
// losing one costs a recompute later, stalling decode costs latency now). The byte bound counts a
// chunk that several pending states share (ChunkBytes::shared: one growing sequence's KV pages)
// once, as memory it is and as the store writes it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ft/store/checkpoint_format.h"
#include "ft/store/shared_bytes.h"
#include "ft/store/types.h"

namespace ft::store {

class WriteBehind {
 public:
  struct Job {
    std::string id;  // encoded StoreKey: a newer save of the same key replaces a pending one
    StoreKey key;
    std::shared_ptr<const ModelState> state;
    bool pinned = false;  // never dropped; may exceed the bounds (at most one per live session)
  };
  using Writer = std::function<void(const Job&)>;

  WriteBehind(std::size_t max_jobs, std::uint64_t max_bytes, Writer writer);
  ~WriteBehind();  // writes what is pending, then joins
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  void push(Job job);
  // Returns once every job pushed before the call has been written.
  void flush();
  std::uint64_t dropped() const;

 private:
  struct Queued {
    Job job;
    StateFootprint footprint;
  };
  void add_locked(Queued q);
  Job remove_locked(std::deque<Queued>::iterator it);
  void run();
  bool drop_oldest_unpinned_locked();

  const std::size_t max_jobs_;
  const std::uint64_t max_bytes_;
  const Writer writer_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Queued> queue_;
  SharedBytes queued_bytes_;  // of every pending job
  bool busy_ = false;
  bool stop_ = false;
  std::uint64_t dropped_ = 0;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace ft::store

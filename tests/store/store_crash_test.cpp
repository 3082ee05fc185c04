// Crash safety and disk faults, with real processes: a child is killed with SIGKILL in the middle of
// saving, or runs out of file size, and the store must reopen and never serve wrong data.
//
// Children re-execute this test binary with FT_STORE_CHILD set; the hook below runs them before
// gtest starts (a plain fork() would inherit a half-copied RocksDB thread pool from earlier tests).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>

#include "ft/store/rocksdb_store.h"
#include "raw_store_db.h"
#include "store_test_util.h"
#include "test_support.h"

namespace ft::store {
namespace {

using testing::key;
using testing::make_state;

constexpr std::uint64_t kKeySpace = 48;

// The state saved under prefix id `id` is always the same, so the parent knows what is right. Its
// first id % 5 KV pages are the same bytes in every state (as in the checkpoints of one growing
// sequence): a kill also lands between a page's write and its header, or its deletion.
ModelState expected_state(std::uint64_t id) {
  ModelState s = make_state(testing::model(1), id, {1 + (id * 7919) % (300u << 10), 4096, 1 + id}, id);
  testing::add_pages(s, id % 5, 80 << 10);
  return s;
}

StoreOptions crash_options(const std::filesystem::path& path) {
  StoreOptions o = testing::small_options(path);
  o.piece_bytes = 64 << 10;
  o.write_batch_bytes = 128 << 10;  // most saves span several batches
  o.byte_budget = 8ull << 20;       // evictions happen too
  return o;
}

[[noreturn]] void crash_writer(const char* dir, int ready_fd) {
  auto store = RocksDbStore::open(crash_options(dir));
  if (!store.is_ok()) _exit(2);
  std::mt19937_64 rng(static_cast<std::uint64_t>(getpid()));
  for (std::uint64_t n = 0;; ++n) {
    if (n == 1 && write(ready_fd, "r", 1) != 1) _exit(3);  // one save done: now kill me anywhere
    const std::uint64_t id = rng() % kKeySpace;
    const StoreKey k = key("t", 1, id);
    if (n % 4 == 3) {
      (void)(*store)->save_async(k, std::make_shared<const ModelState>(expected_state(id)));
    } else {
      (void)(*store)->save(k, expected_state(id));
    }
    if (n % 5 == 0) (void)(*store)->lookup_header(key("t", 1, rng() % kKeySpace));  // dirties last-use
  }
}

// Exit 0 when a write beyond RLIMIT_FSIZE degrades the store instead of failing the caller.
[[noreturn]] void file_size_child(const char* dir) {
  int rc = 0;
  {
    auto store = RocksDbStore::open(crash_options(dir));
    if (!store.is_ok()) _exit(2);
    signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    rlimit lim{1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(3);
    const StoreKey k = key("t", 1, 1);
    if (!(*store)->save(k, make_state(k.model, 1, {4u << 20}, 1)).is_ok()) rc = 4;
    else if (!(*store)->degraded() || !(*store)->stats().degraded) rc = 5;
    else if ((*store)->contains(k)) rc = 6;
    else if (!(*store)->save(key("t", 1, 2), make_state(k.model, 1, {10}, 2)).is_ok()) rc = 7;
    else if (!(*store)->save_async(key("t", 1, 3), std::make_shared<const ModelState>(make_state(k.model, 1, {10}, 3))).is_ok()) rc = 8;
  }
  _exit(rc);
}

const bool kChildHook = [] {
  const char* mode = std::getenv("FT_STORE_CHILD");
  const char* dir = std::getenv("FT_STORE_DIR");
  const char* ready_fd = std::getenv("FT_STORE_READY_FD");
  if (mode && dir && ready_fd && std::string(mode) == "crash_writer") crash_writer(dir, std::atoi(ready_fd));
  if (mode && dir && std::string(mode) == "file_size") file_size_child(dir);
  return true;
}();

// `ready_fd`: the write end of a pipe the child signals on (inherited across exec), or -1.
pid_t spawn_child(const std::string& mode, const std::filesystem::path& dir, int ready_fd = -1) {
  // Everything exec needs is built before fork: the parent has threads, so the child may only
  // call async-signal-safe functions.
  const std::string env_mode = "FT_STORE_CHILD=" + mode, env_dir = "FT_STORE_DIR=" + dir.string(),
                    env_fd = "FT_STORE_READY_FD=" + std::to_string(ready_fd);
  char* const argv[] = {const_cast<char*>("ft_store_tests"), nullptr};
  char* const envp[] = {const_cast<char*>(env_mode.c_str()), const_cast<char*>(env_dir.c_str()),
                        const_cast<char*>(env_fd.c_str()), nullptr};
  const pid_t pid = fork();
  if (pid == 0) {
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  return pid;
}

TEST(StoreCrash, SigkillDuringSavesNeverServesWrongData) {
  ASSERT_TRUE(kChildHook);
  test::TempDir dir;
  std::mt19937 rng(12345);
  // 20 rounds, or fewer (at least 6) once 3 s are spent: each child open costs ~10 fsyncs, which
  // take 15-30 ms each on a slow shared disk.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int rounds = 0, killed_while_running = 0;
  for (; rounds < 20 && (rounds < 6 || std::chrono::steady_clock::now() < deadline); ++rounds) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t pid = spawn_child("crash_writer", dir.path(), ready[1]);
    close(ready[1]);
    ASSERT_GT(pid, 0);
    // Opening takes ~100 ms of fsyncs on a slow disk; kill at a random moment after the child is
    // saving (some rounds kill right away, inside the first saves).
    pollfd p{ready[0], POLLIN, 0};
    const bool saving = poll(&p, 1, 5000) == 1;
    close(ready[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 40));
    kill(pid, SIGKILL);
    ASSERT_TRUE(saving) << "crash writer did not start";
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with " << WEXITSTATUS(status);
    killed_while_running += WTERMSIG(status) == SIGKILL;
  }
  EXPECT_EQ(killed_while_running, rounds);

  auto store = RocksDbStore::open(crash_options(dir.path()));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  int served = 0;
  std::uint64_t pages_held = 0;  // the shared pages the served checkpoints hold: 0 .. max(id % 5)
  for (std::uint64_t id = 0; id < kKeySpace; ++id) {
    const StoreKey k = key("t", 1, id);
    if (!(*store)->contains(k)) continue;
    auto back = testing::read_all(**store, k);
    ASSERT_TRUE(back.is_ok()) << "id " << id << ": " << back.status().to_string();
    EXPECT_TRUE(testing::same(*back, expected_state(id))) << "id " << id;
    ++served;
    pages_held = std::max<std::uint64_t>(pages_held, id % 5);
  }
  EXPECT_GT(served, 0);
  std::cout << "[   INFO   ] " << rounds << " SIGKILL rounds, " << served << " checkpoints served after recovery\n";
  const VerifyReport r = (*store)->verify_all();
  EXPECT_EQ(r.corrupt, 0u);
  EXPECT_EQ(r.ok, static_cast<std::uint64_t>(served));
  EXPECT_LE((*store)->stats().bytes, crash_options(dir.path()).byte_budget);
  store->reset();
  // No page outlives the checkpoints holding it: a kill between a page's write and its header
  // left pages that the recovery deleted.
  testing::RawStoreDb raw(dir.path());
  const std::uint64_t pieces = raw.keys("pages").size();
  EXPECT_EQ(pieces, 2 * pages_held);  // 80 KiB pages in 64 KiB pieces
}

TEST(StoreDegraded, WriteFailureDegradesInsteadOfFailing) {
  ASSERT_TRUE(kChildHook);
  test::TempDir dir;
  const pid_t pid = spawn_child("file_size", dir.path());
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the exit codes in file_size_child";
  // Without the limit the database opens again, and nothing half-written is served.
  auto store = RocksDbStore::open(crash_options(dir.path()));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ((*store)->verify_all().corrupt, 0u);
  EXPECT_FALSE((*store)->contains(key("t", 1, 1)));
}

}  // namespace
}  // namespace ft::store

// `freetoken ctl checkpoints ...` run as the real binary against a store filled through the library.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "../store/raw_store_db.h"
#include "../store/store_test_util.h"
#include "ft/store/rocksdb_store.h"
#include "ft/store/store_key.h"
#include "test_support.h"

namespace ft::test {
namespace {

using nlohmann::json;
using store::RocksDbStore;
using store::StoreKey;
using store::testing::key;
using store::testing::make_state;

std::unique_ptr<RocksDbStore> open_store(const std::filesystem::path& dir) {
  auto s = RocksDbStore::open(store::testing::small_options(dir));
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

// alice: model 1 prefixes 1, 2 and model 2 prefix 3; bob: model 1 prefix 4. tokens = 10 x prefix
// number, one 1000-byte and one 24-byte chunk each.
const std::vector<StoreKey>& fill_keys() {
  static const std::vector<StoreKey> k = {key("alice", 1, 1), key("alice", 1, 2), key("alice", 2, 3), key("bob", 1, 4)};
  return k;
}

void fill(const std::filesystem::path& dir) {
  auto st = open_store(dir);
  ASSERT_TRUE(st);
  for (const auto& k : fill_keys()) ASSERT_TRUE(st->save(k, make_state(k.model, 10 * k.prefix.lo, {1000, 24}, k.prefix.lo)).is_ok());
  st->flush();
}

std::vector<std::string> ctl(const std::string& action, const std::filesystem::path& dir) {
  return {"ctl", "checkpoints", action, "--store", dir.string()};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

json parse(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

// Flips one byte of the first blob piece of `k`, the way a disk fault would (store closed).
void flip_blob_byte(const std::filesystem::path& dir, const StoreKey& k) {
  store::testing::RawStoreDb raw(dir);
  ASSERT_TRUE(raw.ok());
  const std::string bk = store::blob_key(store::encode_store_key(k), 0, 0);
  std::string v;
  ASSERT_TRUE(raw.db().Get({}, raw.cf("blobs"), bk, &v).ok());
  v[v.size() / 2] = static_cast<char>(v[v.size() / 2] ^ 0x01);
  ASSERT_TRUE(raw.db().Put({}, raw.cf("blobs"), bk, v).ok());
}

TEST(CtlCli, ListPrintsOneLinePerCheckpoint) {
  TempDir dir;
  fill(dir.path());
  auto r = run_freetoken(ctl("list", dir.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& k : fill_keys()) {
    const auto line_at = r.out.find(k.prefix.to_hex());
    ASSERT_NE(line_at, std::string::npos) << r.out;
    const std::string line = r.out.substr(r.out.rfind('\n', line_at) + 1, r.out.find('\n', line_at) - r.out.rfind('\n', line_at) - 1);
    EXPECT_EQ(line.rfind(k.tenant, 0), 0u) << line;
    EXPECT_NE(line.find(k.model.to_hex()), std::string::npos) << line;
    EXPECT_NE(line.find(" " + std::to_string(10 * k.prefix.lo) + " "), std::string::npos) << line;
    EXPECT_NE(line.find("Z"), std::string::npos) << line;  // last use, UTC
  }
  EXPECT_NE(r.out.find("4 checkpoint(s)"), std::string::npos) << r.out;
}

TEST(CtlCli, ListJsonAndFilters) {
  TempDir dir;
  fill(dir.path());
  json all = parse(run_freetoken(ctl("list", dir.path()) + std::vector<std::string>{"--json"}));
  ASSERT_TRUE(all.contains("checkpoints")) << all;
  ASSERT_EQ(all["checkpoints"].size(), 4u);
  const json& first = all["checkpoints"][0];
  EXPECT_EQ(first["tenant"], "bob");  // key order: shorter tenant first (length byte)
  EXPECT_EQ(first["model"], store::testing::model(1).to_hex());
  EXPECT_EQ(first["prefix"], store::testing::prefix(4).to_hex());
  EXPECT_EQ(first["tokens"], 40);
  EXPECT_GT(first["bytes"].get<std::uint64_t>(), 1024u);
  EXPECT_GT(first["last_use_ms"].get<std::int64_t>(), 0);

  json alice = parse(run_freetoken(ctl("list", dir.path()) + std::vector<std::string>{"--json", "--tenant", "alice"}));
  EXPECT_EQ(alice["checkpoints"].size(), 3u);
  json m1 = parse(run_freetoken(ctl("list", dir.path()) +
                                std::vector<std::string>{"--json", "--model", store::testing::model(1).to_hex()}));
  EXPECT_EQ(m1["checkpoints"].size(), 3u);
}

TEST(CtlCli, UsageAndStats) {
  TempDir dir;
  fill(dir.path());
  json usage = parse(run_freetoken(ctl("usage", dir.path()) + std::vector<std::string>{"--json"}));
  ASSERT_EQ(usage["tenants"].size(), 2u) << usage;
  EXPECT_EQ(usage["tenants"][0]["tenant"], "bob");
  EXPECT_EQ(usage["tenants"][0]["entries"], 1);
  EXPECT_EQ(usage["tenants"][1]["tenant"], "alice");
  EXPECT_EQ(usage["tenants"][1]["entries"], 3);

  json stats = parse(run_freetoken(ctl("stats", dir.path()) + std::vector<std::string>{"--json"}));
  EXPECT_EQ(stats["entries"], 4);
  EXPECT_EQ(stats["bytes"].get<std::uint64_t>(),
            usage["tenants"][0]["bytes"].get<std::uint64_t>() + usage["tenants"][1]["bytes"].get<std::uint64_t>());
  EXPECT_GT(stats["disk_bytes"].get<std::uint64_t>(), 4000u);
  EXPECT_EQ(stats["degraded"], false);

  auto text = run_freetoken(ctl("usage", dir.path()));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("alice"), std::string::npos) << text.out;
  text = run_freetoken(ctl("stats", dir.path()));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("entries      4"), std::string::npos) << text.out;
}

TEST(CtlCli, DropByTenantByModelAndBoth) {
  TempDir dir;
  fill(dir.path());
  auto r = run_freetoken(ctl("drop", dir.path()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tenant"), std::string::npos) << r.err;

  json d = parse(run_freetoken(ctl("drop", dir.path()) +
                               std::vector<std::string>{"--json", "--tenant", "alice", "--model", store::testing::model(2).to_hex()}));
  EXPECT_EQ(d["dropped_entries"], 1);
  d = parse(run_freetoken(ctl("drop", dir.path()) + std::vector<std::string>{"--json", "--model", store::testing::model(1).to_hex()}));
  EXPECT_EQ(d["dropped_entries"], 3);  // alice's two and bob's one
  {
    auto st = open_store(dir.path());
    EXPECT_EQ(st->stats().entries, 0u);
    ASSERT_TRUE(st->save(key("carol", 1, 9), make_state(store::testing::model(1), 1, {10}, 1)).is_ok());
    ASSERT_TRUE(st->save(key("dave", 1, 9), make_state(store::testing::model(1), 1, {10}, 1)).is_ok());
  }
  r = run_freetoken(ctl("drop", dir.path()) + std::vector<std::string>{"--tenant", "carol"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dropped 1 checkpoint(s)"), std::string::npos) << r.out;
  auto st = open_store(dir.path());
  EXPECT_FALSE(st->contains(key("carol", 1, 9)));
  EXPECT_TRUE(st->contains(key("dave", 1, 9)));
}

TEST(CtlCli, VerifyCatchesAFlippedBlobByte) {
  TempDir dir;
  fill(dir.path());
  auto r = run_freetoken(ctl("verify", dir.path()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 ok, 0 corrupt"), std::string::npos) << r.out;

  flip_blob_byte(dir.path(), key("alice", 1, 2));
  r = run_freetoken(ctl("verify", dir.path()) + std::vector<std::string>{"--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // found (and removed) a corrupt checkpoint
  const json j = json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["checked"], 4);
  EXPECT_EQ(j["ok"], 3);
  EXPECT_EQ(j["corrupt"], 1);
  auto st = open_store(dir.path());
  EXPECT_FALSE(st->contains(key("alice", 1, 2)));
  EXPECT_EQ(st->stats().entries, 3u);
}

TEST(CtlCli, StoreHeldByAnotherProcessIsAClearError) {
  TempDir dir;
  fill(dir.path());
  auto held = open_store(dir.path());  // as a running server would
  ASSERT_TRUE(held);
  for (const char* action : {"list", "verify"}) {
    auto r = run_freetoken(ctl(action, dir.path()));
    EXPECT_EQ(r.exit_code, 2) << action;
    EXPECT_EQ(r.err, "freetoken ctl checkpoints: the store at " + dir.path().string() +
                         " is in use by a running freetoken server; stop it first\n");
  }
}

TEST(CtlCli, MissingOrForeignStoreDirIsAnErrorAndNothingIsCreated) {
  TempDir dir;
  const auto missing = dir.path() / "nope";
  auto r = run_freetoken(ctl("list", missing));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(missing));

  r = run_freetoken(ctl("stats", dir.path()));  // exists, but holds no database
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a checkpoint store"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(CtlCli, DefaultStoreDirFollowsXdgDataHome) {
  TempDir dir;
  fill(dir.path() / "freetoken/store");
  auto r = run_freetoken({"ctl", "checkpoints", "list"}, {{"XDG_DATA_HOME", dir.path().string()}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 checkpoint(s)"), std::string::npos) << r.out;
}

TEST(CtlCli, BadCommandLinesExitTwo) {
  TempDir dir;
  fill(dir.path());
  const std::vector<std::vector<std::string>> bad = {
      {"ctl"},
      {"ctl", "sessions"},
      {"ctl", "checkpoints"},
      ctl("frobnicate", dir.path()),
      ctl("list", dir.path()) + std::vector<std::string>{"--model", "xyz"},
      ctl("stats", dir.path()) + std::vector<std::string>{"--tenant", "alice"},
      ctl("verify", dir.path()) + std::vector<std::string>{"--model", store::testing::model(1).to_hex()},
  };
  for (const auto& args : bad) {
    auto r = run_freetoken(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.out;
    EXPECT_FALSE(r.err.empty());
  }
}

}  // namespace
}  // namespace ft::test

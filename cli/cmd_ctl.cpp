// `freetoken ctl checkpoints <list|stats|usage|drop|verify>`: operator access to the checkpoint
// store on disk (checkpoint-store/, RocksDbStore) while no server holds it.
//
// The store is opened with the library itself, so a listing shows exactly what a server would
// restore and verify uses the server's own checksums. RocksDB admits one process per database; a
// store held by a running server is reported, not waited for. ctl never creates a store: a
// mistyped --store must not leave an empty database behind.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.h"
#include "ctl_memory.h"
#include "data_dirs.h"
#include "ft/store/rocksdb_store.h"

namespace ft::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using store::RocksDbStore;

constexpr char kCmd[] = "ctl checkpoints";

// Tenants are arbitrary bytes: printable ASCII as is, anything else as \xNN (also in JSON, which
// must be UTF-8).
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// "2024-05-01T12:00:00Z", or "-" for a checkpoint whose use was never recorded.
std::string utc(std::int64_t ms) {
  if (ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::uint64_t disk_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

// Whether another process holds RocksDB's lock on the database (an fcntl write lock on DIR/LOCK,
// which RocksDB takes for as long as the database is open).
bool locked_by_other_process(const fs::path& dir) {
  const int fd = ::open((dir / "LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  const bool locked = ::fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  ::close(fd);
  return locked;
}

int in_use_error(const fs::path& dir) {
  return usage_error(kCmd, "the store at " + dir.string() + " is in use by a running freetoken server; stop it first");
}

// Opens an existing store for maintenance, or prints why not and sets *exit_code (2: wrong or
// busy directory, 1: the database failed to open).
std::unique_ptr<RocksDbStore> open_existing(const fs::path& dir, int* exit_code) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *exit_code = usage_error(kCmd, "no checkpoint store at " + dir.string() + ": the directory does not exist (pass --store DIR)");
    return nullptr;
  }
  if (!fs::exists(dir / "CURRENT", ec)) {
    *exit_code = usage_error(kCmd, dir.string() + " is not a checkpoint store (no RocksDB CURRENT file in it)");
    return nullptr;
  }
  if (locked_by_other_process(dir)) {
    *exit_code = in_use_error(dir);
    return nullptr;
  }
  store::StoreOptions opt;
  opt.path = dir;
  // Never evict on open: the budget is the server's setting, which ctl does not know.
  opt.byte_budget = std::numeric_limits<std::uint64_t>::max();
  auto opened = RocksDbStore::open(opt);
  if (!opened.is_ok()) {
    // A server that started between the probe and the open: RocksDB reports its lock.
    const std::string& msg = opened.status().message();
    if (msg.find("lock") != std::string::npos || msg.find("LOCK") != std::string::npos) {
      *exit_code = in_use_error(dir);
    } else {
      *exit_code = runtime_error(kCmd, opened.status().to_string());
    }
    return nullptr;
  }
  return std::move(opened).value();
}

void print_json(const json& j) { std::printf("%s\n", j.dump(2).c_str()); }

int do_list(RocksDbStore& st, const std::optional<std::string>& tenant,
            const std::optional<store::ModelFingerprint>& model, bool as_json) {
  json rows = json::array();
  std::uint64_t count = 0, bytes = 0;
  if (!as_json) std::printf("%-16s %-32s %-32s %8s %12s %s\n", "TENANT", "MODEL", "PREFIX", "TOKENS", "BYTES", "LAST USE");
  for (const store::EntryInfo& e : st.list(tenant)) {
    if (model && e.key.model != *model) continue;
    ++count;
    bytes += e.bytes;
    if (as_json) {
      rows.push_back({{"tenant", printable(e.key.tenant)}, {"model", e.key.model.to_hex()},
                      {"prefix", e.key.prefix.to_hex()}, {"tokens", e.tokens}, {"bytes", e.bytes},
                      {"last_use_ms", e.last_use_ms}, {"last_use", utc(e.last_use_ms)}});
    } else {
      std::printf("%-16s %s %s %8llu %12llu %s\n", printable(e.key.tenant).c_str(), e.key.model.to_hex().c_str(),
                  e.key.prefix.to_hex().c_str(), static_cast<unsigned long long>(e.tokens),
                  static_cast<unsigned long long>(e.bytes), utc(e.last_use_ms).c_str());
    }
  }
  if (as_json) print_json({{"checkpoints", rows}});
  else std::printf("%llu checkpoint(s), %llu bytes\n", static_cast<unsigned long long>(count), static_cast<unsigned long long>(bytes));
  return 0;
}

int do_stats(RocksDbStore& st, const fs::path& dir, bool as_json) {
  const store::TierStats s = st.stats();
  const std::uint64_t disk = disk_bytes(dir);
  if (as_json) {
    print_json({{"entries", s.entries},
                {"bytes", s.bytes},
                {"logical_bytes", s.logical_bytes},
                {"disk_bytes", disk},
                {"hits", s.hits},
                {"misses", s.misses},
                {"evictions", s.evictions},
                {"corruptions", s.corruptions},
                {"dropped_writes", s.dropped_writes},
                {"degraded", s.degraded}});
    return 0;
  }
  std::printf("store        %s\n", dir.string().c_str());
  std::printf("entries      %llu\n", static_cast<unsigned long long>(s.entries));
  std::printf("bytes        %llu (headers + payloads, each KV page once however many checkpoints hold it)\n",
              static_cast<unsigned long long>(s.bytes));
  std::printf("logical      %llu (every checkpoint's whole size: %.2fx what is stored)\n",
              static_cast<unsigned long long>(s.logical_bytes),
              s.bytes > 0 ? double(s.logical_bytes) / double(s.bytes) : 1.0);
  std::printf("disk bytes   %llu (all files in the directory)\n", static_cast<unsigned long long>(disk));
  // Counters are per process: these are what opening the store found (crash recovery).
  std::printf("since open   hits %llu, misses %llu, evictions %llu, corruptions %llu, dropped writes %llu%s\n",
              static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
              static_cast<unsigned long long>(s.evictions), static_cast<unsigned long long>(s.corruptions),
              static_cast<unsigned long long>(s.dropped_writes), s.degraded ? ", DEGRADED" : "");
  return 0;
}

int do_usage(RocksDbStore& st, const std::optional<std::string>& tenant, bool as_json) {
  json rows = json::array();
  if (!as_json) std::printf("%-16s %8s %14s\n", "TENANT", "ENTRIES", "BYTES");
  for (const store::TenantUsage& u : st.usage_by_tenant()) {
    if (tenant && u.tenant != *tenant) continue;
    if (as_json) {
      rows.push_back({{"tenant", printable(u.tenant)}, {"entries", u.entries}, {"bytes", u.bytes}});
    } else {
      std::printf("%-16s %8llu %14llu\n", printable(u.tenant).c_str(), static_cast<unsigned long long>(u.entries),
                  static_cast<unsigned long long>(u.bytes));
    }
  }
  if (as_json) print_json({{"tenants", rows}});
  return 0;
}

// --tenant: that tenant; --tenant --model: that model of that tenant; --model: that model in
// every tenant.
int do_drop(RocksDbStore& st, const std::optional<std::string>& tenant,
            const std::optional<store::ModelFingerprint>& model, bool as_json) {
  std::uint64_t entries = 0;
  std::vector<std::string> tenants;
  for (const store::EntryInfo& e : st.list(tenant)) {
    if (model && e.key.model != *model) continue;
    ++entries;
    if (tenants.empty() || tenants.back() != e.key.tenant) tenants.push_back(e.key.tenant);
  }
  const std::uint64_t held_before = st.stats().bytes;  // shared pages: not the sum of the entries' sizes
  for (const std::string& t : tenants) {
    const Status s = model ? st.drop_model(t, *model) : st.drop_tenant(t);
    if (!s.is_ok()) return runtime_error(kCmd, "drop: " + s.to_string());
  }
  st.flush();  // make the deletion durable before reporting it
  const std::uint64_t bytes = held_before - st.stats().bytes;
  if (as_json) {
    print_json({{"dropped_entries", entries}, {"dropped_bytes", bytes}});
  } else {
    std::printf("dropped %llu checkpoint(s), %llu bytes (disk space is reclaimed as RocksDB compacts)\n",
                static_cast<unsigned long long>(entries), static_cast<unsigned long long>(bytes));
  }
  return 0;
}

// Exit 1 when anything was corrupt (it has been removed), so scripts notice.
int do_verify(RocksDbStore& st, bool as_json) {
  const std::uint64_t at_open = st.stats().corruptions;  // bad headers crash recovery removed
  const store::VerifyReport r = st.verify_all();
  if (as_json) {
    print_json({{"checked", r.checked}, {"ok", r.ok}, {"corrupt", r.corrupt}, {"removed_at_open", at_open},
                {"bytes_read", r.bytes_read}});
  } else {
    std::printf("checked %llu checkpoint(s), %llu bytes: %llu ok, %llu corrupt (removed)",
                static_cast<unsigned long long>(r.checked), static_cast<unsigned long long>(r.bytes_read),
                static_cast<unsigned long long>(r.ok), static_cast<unsigned long long>(r.corrupt));
    if (at_open) std::printf("; %llu bad header(s) removed when opening", static_cast<unsigned long long>(at_open));
    std::printf("\n");
  }
  return r.corrupt + at_open == 0 ? 0 : 1;
}

int run_ctl(const Args& args) {
  const auto& pos = args.positional();
  if (!pos.empty() && pos[0] == "memory") {
    if (pos.size() > 1) return usage_error("ctl memory", "takes no action word, only flags (--gpu-mem GiB)");
    return run_ctl_memory(args);
  }
  if (pos.empty() || pos[0] != "checkpoints") {
    return usage_error("ctl", pos.empty() ? "what to operate on? one of: checkpoints, memory"
                                          : "unknown resource '" + pos[0] + "'; one of: checkpoints, memory");
  }
  const std::string actions = "list, stats, usage, drop, verify";
  if (pos.size() < 2) return usage_error(kCmd, "which action? one of: " + actions);
  const std::string& action = pos[1];

  std::optional<std::string> tenant;
  std::optional<store::ModelFingerprint> model;
  if (args.has("tenant")) {
    tenant = args.get("tenant");
    if (tenant->empty() || tenant->size() > store::kMaxTenantBytes) {
      return usage_error(kCmd, "--tenant must be 1.." + std::to_string(store::kMaxTenantBytes) + " bytes");
    }
  }
  if (args.has("model")) {
    model = store::ModelFingerprint::from_hex(args.get("model"));
    if (!model) return usage_error(kCmd, "--model must be 32 hex digits, got '" + args.get("model") + "'");
  }
  if (action != "list" && action != "stats" && action != "usage" && action != "drop" && action != "verify") {
    return usage_error(kCmd, "unknown action '" + action + "'; one of: " + actions);
  }
  const bool filters_ok = action == "list" || action == "drop" || (action == "usage" && !model);
  if ((tenant || model) && !filters_ok) {
    return usage_error(kCmd, action + " does not take " + (model ? "--model" : "--tenant") + " (it covers the whole store)");
  }
  if (action == "drop" && !tenant && !model) return usage_error(kCmd, "drop needs --tenant T and/or --model HEX32");

  const fs::path dir = args.has("store") ? fs::path(args.get("store")) : default_store_dir();
  int exit_code = 0;
  auto st = open_existing(dir, &exit_code);
  if (!st) return exit_code;
  const bool as_json = args.has("json");
  if (action == "list") return do_list(*st, tenant, model, as_json);
  if (action == "stats") return do_stats(*st, dir, as_json);
  if (action == "usage") return do_usage(*st, tenant, as_json);
  if (action == "drop") return do_drop(*st, tenant, model, as_json);
  return do_verify(*st, as_json);
}

}  // namespace

const Command kCtlCommand = {
    "ctl",
    "maintain a stopped server's data (ctl checkpoints list|stats|usage|drop|verify) or resize a running one's GPU "
    "memory (ctl memory --gpu-mem GiB)",
    "freetoken ctl checkpoints <list|stats|usage|drop|verify> [--store DIR] [--tenant T] [--model HEX32] [--json]\n\n"
    "  list    one line per checkpoint: tenant, model, prefix key, tokens, bytes, last use (UTC)\n"
    "  stats   entries, logical bytes, bytes on disk\n"
    "  usage   entries and bytes per tenant\n"
    "  drop    delete the checkpoints of --tenant, of --model, or of both together\n"
    "  verify  re-read every checkpoint and check its checksums; corrupt ones are removed (exit 1)\n\n"
    "The store must not be open in a running server (exit 2 if it is).\n\n"
    "freetoken ctl memory --gpu-mem GiB [--host 127.0.0.1] [--port 1919] [--api-key KEY] [--json]\n\n"
    "  resizes the running server's expert cache so the model takes at most GiB of GPU memory (experts in host RAM\n"
    "  only); the cache also gives way by itself when other processes need the GPU (serve's --gpu-mem-headroom).",
    {{"store", "DIR",
      "checkpoint store directory [default: $XDG_DATA_HOME/freetoken/store, else ~/.local/share/freetoken/store]", ""},
     {"tenant", "T", "only this tenant (list, usage, drop)", ""},
     {"model", "HEX32", "only this model fingerprint, 32 hex digits (list, drop)", ""},
     {"json", "", "machine-readable output (one JSON document on stdout)", ""},
     {"gpu-mem", "GiB", "memory: the GPU memory the running model may use", ""},
     {"host", "ADDR", "memory: address of the running freetoken serve", "127.0.0.1"},
     {"port", "N", "memory: its TCP port", "1919"},
     {"api-key", "KEY", "memory: serve's --api-key, when it has one", ""}},
    2,
    run_ctl,
};

}  // namespace ft::cli

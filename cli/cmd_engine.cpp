// `freetoken engine`: the engine process. Loads the model, opens the checkpoint store and serves
// the proxy<->engine protocol (protocol/ENGINE-PROTOCOL.md) on loopback until SIGINT/SIGTERM.
// `freetoken serve` starts and supervises one; run it by hand to put the proxy elsewhere.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "commands.h"
#include "data_dirs.h"
#include "demo_model.h"
#include "engine_flags.h"
#include "ft/common/loopback.h"
#include "ft/engine/engine_server.h"
#include "ft/engine/kv_page_tier.h"
#include "ft/engine/model.h"
#include "ft/engine/scheduler.h"
#include "ft/store/host_ram_tier.h"
#include "ft/store/tier_chain.h"
#include "ft/store/tiered_store.h"
#include "http_limit_flags.h"
#include "key_file.h"
#include "model_flags.h"
#include "proxy_flags.h"

namespace ft::cli {
namespace fs = std::filesystem;
namespace {

// Written atomically (rename) so a reader never sees half a number.
Status write_port_file(const fs::path& path, int port) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out) return io_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return ec ? io_error("cannot write " + path.string() + ": " + ec.message()) : Status::ok();
}

int run_engine(const Args& args) {
  // First, before any thread exists (TBB, RocksDB): threads inherit the mask, and a stop signal
  // delivered to one that does not block it would kill the process without flushing the store.
  block_stop_signals();
  std::string key;
  if (args.has("key-file")) {
    auto k = read_key_file(args.get("key-file"));
    if (!k) return usage_error("engine", k.status().message());
    key = std::move(k).value();
  }
  if (!loopback_host(args.get("host")) && key.empty() && !args.has("allow-remote"))
    return usage_error("engine", "--host " + args.get("host") +
                                     ": without --key-file the engine has no authentication and listens on loopback "
                                     "only (--allow-remote to expose it anyway)");
  const auto limits = http_limits_from(args);
  if (!limits) return usage_error("engine", limits.status().message());
  auto model_dir = model_dir_or_demo(args.get("model"), args.get("tokenizer-from"));
  if (!model_dir) return usage_error("engine", model_dir.status().message());
  auto options = load_options_from_flags(args);
  if (!options) return usage_error("engine", options.status().message());
  if (args.get_int("ctx") < 1) return usage_error("engine", "--ctx must be a positive number of tokens");
  options->context_tokens = args.get_int("ctx");  // the KV pool holds one whole context when it can
  auto model = engine::load_model(*model_dir, *options);
  if (!model) return usage_error("engine", model.status().message());
  std::printf("freetoken engine: %s", (*model)->placement().to_text().c_str());

  // Checkpoints: RocksDB with a RAM tier in front, or (--no-store) the RAM tier alone.
  const uint64_t ram_bytes = uint64_t(args.get_double("checkpoint-ram-gb") * double(1ull << 30));
  std::unique_ptr<store::StateTier> store;
  store::MemoryTier* ram = nullptr;
  if (args.has("no-store")) {
    auto only = std::make_unique<store::HostRamTier>(ram_bytes);
    ram = only.get();
    store = std::move(only);
  } else {
    store::StoreOptions so;
    so.path = args.has("store") ? fs::path(args.get("store")) : default_store_dir();
    so.ram_budget = ram_bytes;
    so.byte_budget = uint64_t(args.get_double("store-gb") * double(1ull << 30));
    auto opened = store::TieredStore::open(so);
    if (!opened) return runtime_error("engine", "checkpoint store at " + so.path.string() + ": " + opened.status().message());
    std::printf("freetoken engine: checkpoints in %s\n", so.path.c_str());
    ram = &(*opened)->ram();
    store = std::move(opened).value();
  }
  // A host pool's checkpoints in the RAM tier are its pages themselves: a sequence short of pages
  // takes them back (the checkpoints stay on disk).
  std::optional<engine::PoolReclaimer> ram_gives_pages;
  if (auto pool = (*model)->kv_pool(); pool && pool->memory().is_host()) ram_gives_pages.emplace(pool, *ram);

  // The hot tier in front: checkpoints whose KV pages stay in the GPU's KV pool (a host pool's
  // checkpoints hold their pages in the RAM tier already).
  if (const double gpu_gb = args.get_double("gpu-checkpoint-gb"); gpu_gb > 0) {
    const uint64_t gpu_bytes = uint64_t(gpu_gb * double(1ull << 30));
    std::shared_ptr<engine::KvPool> pool = (*model)->kv_pool();
    if (!pool || pool->memory().is_host()) {
      std::fprintf(stderr, "freetoken engine: --gpu-checkpoint-gb ignored: %s\n",
                   pool ? "the KV pages are in host memory (the RAM tier keeps them)" : "the model keeps no KV pages");
    } else if (auto gpu = engine::make_kv_page_tier(pool, gpu_bytes); !gpu) {
      return runtime_error("engine", gpu.status().message());
    } else {
      std::vector<std::unique_ptr<store::StateTier>> tiers;
      tiers.push_back(std::move(gpu).value());
      tiers.push_back(std::move(store));
      store = std::make_unique<store::TierChain>(std::move(tiers), std::vector<uint64_t>{gpu_bytes, 0});
      std::printf(
          "freetoken engine: checkpoints keep up to %.1f GB of KV pages on the GPU (given back to sequences that need "
          "them)\n",
          gpu_gb);
    }
  }

  engine::SchedulerOptions sched;
  sched.context_length = args.get_int("ctx");
  sched.max_running = args.get_int("max-running");
  sched.max_waiting = args.get_int("max-waiting");
  sched.step_tokens = args.get_int("step-tokens");
  if (sched.step_tokens < 0) return usage_error("engine", "--step-tokens must be 0 (the model's) or more");
  sched.max_decode_stall_ms = args.get_double("max-decode-stall-ms");

  engine::Scheduler scheduler(**model, store.get(), sched);
  // The expert cache gives GPU memory back to other processes and takes it again.
  std::unique_ptr<engine::ElasticGpuMemory> elastic;
  if ((*model)->placement().experts_on_host) {
    const double headroom = args.get_double("gpu-mem-headroom");
    if (!(headroom >= 0) || headroom > 1 << 20)
      return usage_error("engine", "--gpu-mem-headroom must be 0 or more GiB");
    elastic = std::make_unique<engine::ElasticGpuMemory>(
        **model,
        engine::ElasticGpuMemory::Options{uint64_t(headroom * double(1ull << 30)), std::chrono::milliseconds(200)});
  }
  engine::EngineServerOptions eo;
  eo.host = args.get("host");
  eo.port = args.get_int("port");
  eo.key = key;
  eo.max_queued_requests = limits->max_queued_requests;
  eo.request_read_timeout_s = limits->request_read_timeout_s;
  engine::EngineServer server(eo, scheduler, store.get(), elastic.get());
  if (Status s = server.start(); !s) return runtime_error("engine", s.message());
  if (args.has("port-file")) {
    if (Status s = write_port_file(args.get("port-file"), server.port()); !s) return runtime_error("engine", s.message());
  }
  std::printf("freetoken engine: %s listening on http://%s:%d (%s)\n", (*model)->fingerprint().c_str(),
              eo.host.c_str(), server.port(), engine::wire::kProtocolName);
  std::fflush(stdout);
  wait_for_stop_signal();
  server.stop();
  return 0;  // scheduler, then store (flushing its write-behind queue), then model
}

std::vector<Flag> engine_flags() {
  std::vector<Flag> flags = {
      {"model", "DIR", "HF checkpoint directory; default: the built-in demo model", "", false},
      {"host", "ADDR", "address to listen on (loopback unless --allow-remote)", "127.0.0.1", false},
      {"allow-remote", "", "listen on a non-loopback --host without a --key-file (no authentication)", "", false},
      {"key-file", "FILE", "require the key in FILE (mode 600) on every request, as Authorization: Bearer KEY", "",
       false},
      {"port", "N", "TCP port (0: any free port; see --port-file)", "0", false},
      {"port-file", "FILE", "write the port listened on here once serving", "", false},
      {"tokenizer-from", "DIR", "where the demo model's Qwen3 tokenizer files come from", "", false}};
  for (Flag& f : http_limit_flags(engine::EngineServerOptions{}.max_queued_requests)) flags.push_back(std::move(f));
  for (Flag& f : engine_runtime_flags()) flags.push_back(std::move(f));
  return flags;
}

}  // namespace

const Command kEngineCommand = {
    "engine",
    "run the engine process (model, scheduler, checkpoints) that `freetoken proxy` talks to",
    "freetoken engine [--model DIR] [--host 127.0.0.1] [--port N] [--store DIR | --no-store]",
    engine_flags(),
    0,
    run_engine,
};

}  // namespace ft::cli

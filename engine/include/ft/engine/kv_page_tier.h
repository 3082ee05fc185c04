// The hot checkpoint tier: checkpoints whose KV pages stay in the model's own KV pool (on a GPU,
// in VRAM), in front of host RAM and disk. A checkpoint's KV chunks are host copies of pool pages
// (KvPageMirror) or, on the host, the pages themselves: the tier holds those pages, so they are not
// freed when their sequence ends, and a restore adopts them (restore_from_model_state) without
// copying a byte. A checkpoint whose pages are gone (read from a slower tier) is copied into free
// pages of the pool once, when it arrives; one the pool has no free page for keeps those chunks in
// host memory only (a restore copies them). The linear-attention states stay in host memory: they
// are small and every restore writes them anyway.
//
// The pages are the pool's: the tier's budget bounds how many it keeps, and when a sequence finds
// no free page the pool asks the tier to let go of its least recently used checkpoints
// (KvPool::set_reclaimer), so kept pages never refuse a running request. The budget counts the
// checkpoints' host bytes (each page once), which is one page per page kept plus the linear states.
#pragma once

#include <cstdint>
#include <memory>

#include "ft/common/result.h"
#include "ft/engine/kv_pool.h"
#include "ft/store/memory_tier.h"

namespace ft::engine {

// A tier named "gpu" (the pool in VRAM) or "kv-pages" (on the host). kInvalidArgument without a pool.
Result<std::unique_ptr<store::MemoryTier>> make_kv_page_tier(std::shared_ptr<KvPool> pool, std::uint64_t byte_budget);

// While it lives, `pool` takes pages back from `tier` when a sequence finds none free: the tier
// lets go of its least recently used checkpoints (unpinned first) until a page is free or it holds
// nothing. For any tier whose checkpoints hold pages of the pool: the one above, and on the host
// the RAM tier (a host pool's checkpoints are its pages themselves). One per pool.
class PoolReclaimer {
 public:
  PoolReclaimer(std::shared_ptr<KvPool> pool, store::MemoryTier& tier);
  ~PoolReclaimer();  // waits for a reclaim in progress
  PoolReclaimer(const PoolReclaimer&) = delete;
  PoolReclaimer& operator=(const PoolReclaimer&) = delete;

 private:
  std::shared_ptr<KvPool> pool_;
};

}  // namespace ft::engine

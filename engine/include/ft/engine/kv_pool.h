// Paged attention KV. A page holds the K and V of `page_tokens` consecutive positions of every
// attention layer; a sequence holds a list of pages (its page table). Pages are reference counted:
// a snapshot of a sequence is its page list plus a copy of the small recurrent state, so the
// snapshots of one growing sequence share their prefix pages instead of each copying [0, N), and a
// restore from host RAM adopts the pages instead of copying them back. A page that a snapshot
// still holds is never written again: the sequence copies it first (copy on write).
//
// Pages come from a budgeted pool (`--kv-budget`) in the backend's memory (host RAM or VRAM), in
// chunks of about 1 GiB, lowest free page first, so that the top chunks are the ones left free and
// the pool can give them back (set_capacity: elastic VRAM) and take them again. On the host,
// address space is reserved and memory is committed as pages are first used, so an unused budget
// costs nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/memory.h"
#include "ft/store/checkpoint_format.h"

namespace ft::engine {

enum class KvDType : std::uint8_t {
  kBf16,  // the runtime's KV (what the fast backends read)
  kF32,   // the reference backend's, so golden tests compare fp32 math end to end
};
const char* kv_dtype_name(KvDType dtype);  // "bf16", "f32"

// One attention layer's shape in the pages, where layers differ.
struct KvLayerShape {
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  bool operator==(const KvLayerShape&) const = default;
};

// Page layout, all attention layers together:  page = [layer][K | V][kv_head][block]
//   K block: [page_tokens][head_dim]  (a key per row: the A operand of q.k on AMX, rows for AVX-512)
//   V block: [head_dim][page_tokens]  (a dimension per row: the A operand of p.v on AMX)
// Head-major inside a page: one kv head's keys (values) of a page are one contiguous block, which
// is what attention streams (each kv head read once for its whole query group). Layers may differ
// in kv_heads and head_dim (Gemma 4's full-attention layers have wider heads and fewer of them):
// each takes its own shape's bytes, so no layer pays for another's width.
struct KvLayout {
  int64_t layers = 0;  // attention layers (numbered 0.. in model order)
  int64_t kv_heads = 0;  // every layer's, unless per_layer is set
  int64_t head_dim = 0;
  int64_t page_tokens = 64;
  KvDType dtype = KvDType::kBf16;
  // Each layer's shape when they differ; empty: every layer is kv_heads x head_dim.
  std::vector<KvLayerShape> per_layer;

  bool uniform() const { return per_layer.empty(); }
  int64_t kv_heads_at(int64_t layer) const { return uniform() ? kv_heads : per_layer[std::size_t(layer)].kv_heads; }
  int64_t head_dim_at(int64_t layer) const { return uniform() ? head_dim : per_layer[std::size_t(layer)].head_dim; }
  std::size_t elem_bytes() const { return dtype == KvDType::kBf16 ? 2 : 4; }
  // One kv head's K (or V) of `layer` in one page.
  std::size_t block_bytes(int64_t layer) const { return std::size_t(page_tokens * head_dim_at(layer)) * elem_bytes(); }
  std::size_t layer_bytes(int64_t layer) const { return 2 * std::size_t(kv_heads_at(layer)) * block_bytes(layer); }
  // Where `layer` starts in a page (layer == layers: the page's size).
  std::size_t layer_offset(int64_t layer) const {
    if (uniform()) return std::size_t(layer) * 2 * std::size_t(kv_heads) * block_bytes(0);
    std::size_t at = 0;
    for (int64_t l = 0; l < layer; ++l) at += layer_bytes(l);
    return at;
  }
  std::size_t page_bytes() const { return layer_offset(layers); }
  std::size_t k_offset(int64_t layer, int64_t head) const {
    return layer_offset(layer) + std::size_t(head) * block_bytes(layer);
  }
  std::size_t v_offset(int64_t layer, int64_t head) const {
    return layer_offset(layer) + std::size_t(kv_heads_at(layer) + head) * block_bytes(layer);
  }
  int64_t pages_for(int64_t tokens) const { return (tokens + page_tokens - 1) / page_tokens; }
  // Bumped whenever the bytes of a page mean something else (checkpoints of another layout are misses).
  static constexpr int kLayoutVersion = 2;
  // KV bytes one token adds across all layers (the budget's unit of account in messages).
  std::size_t token_bytes() const { return page_bytes() / std::size_t(page_tokens); }
};

class KvPool;
class KvPage;
// Host bytes that an asynchronous copy may still be writing (`arriving`, null: already in place):
// the owner of a checkpoint chunk's bytes. Readers wait through wait_ready() (ChunkBytes::data()),
// and so does the destructor, before the bytes go back (to a free list, or freed) — which is why
// the bytes are held here, destroyed after the wait, and not by a subclass.
class ArrivingBytes : public store::ChunkOwner {
 public:
  ArrivingBytes(std::shared_ptr<std::byte> data, std::size_t size, std::shared_ptr<const CopyFence> arriving)
      : data_(std::move(data)), size_(size), arriving_(std::move(arriving)) {}
  ~ArrivingBytes() override { wait_ready(); }
  ArrivingBytes(const ArrivingBytes&) = delete;
  ArrivingBytes& operator=(const ArrivingBytes&) = delete;
  std::span<const std::byte> bytes() const { return {data_.get(), size_}; }
  void wait_ready() const final {
    if (arriving_) arriving_->wait();
  }

 private:
  std::shared_ptr<std::byte> data_;
  std::size_t size_;
  std::shared_ptr<const CopyFence> arriving_;
};

class MirrorBuffers;  // src/state/mirror_buffers.h

// A page's bytes copied to host memory, for checkpoints of a page that lives where the host cannot
// read it (VRAM): its first `tokens` positions are valid. A position once written never changes in
// any page (sequences write only at their end, and copy a shared page first), so a mirror stays
// true for its tokens for the page's whole life: checkpoints of a growing sequence share the
// mirrors of its full pages and copy only the page they end in. The mirror is the owner of the
// bytes those checkpoints hold, and it remembers its page, so that a restore into the same pool
// can take the page itself while it lives instead of copying the bytes back.
class KvPageMirror final : public ArrivingBytes {
 public:
  // `data`: the page's bytes on the host (a KvPool::mirror_buffer, or any host buffer), in place
  // once `arriving` (an asynchronous copy's fence; null: already) is passed. Readers of the bytes
  // wait for it through ChunkBytes::data(); until then the positions from `tokens` on may hold
  // either zeros or the same sequence's later keys (it goes on writing its last page), never
  // another's, and no checkpoint reads them.
  KvPageMirror(std::shared_ptr<std::byte> data, std::size_t size, int64_t tokens, std::weak_ptr<KvPage> page,
               std::shared_ptr<const CopyFence> arriving = nullptr)
      : ArrivingBytes(std::move(data), size, std::move(arriving)), tokens_(tokens), page_(std::move(page)) {}
  int64_t tokens() const { return tokens_; }
  std::shared_ptr<KvPage> page() const { return page_.lock(); }  // null once the page is gone

 private:
  int64_t tokens_;
  std::weak_ptr<KvPage> page_;
};

// One page. Its memory goes back to the pool when the last holder lets go; holders are the
// sequences using it and the checkpoints sharing it (hence a store::ChunkOwner: a restore can tell
// a page of its own pool from other memory and adopt it).
class KvPage final : public store::ChunkOwner {
 public:
  class Key {  // only the pool makes pages
    friend class KvPool;
    Key() = default;
  };
  KvPage(const Key&, std::shared_ptr<KvPool> pool, std::uint32_t index, std::byte* data);
  ~KvPage() override;
  KvPage(const KvPage&) = delete;
  KvPage& operator=(const KvPage&) = delete;

  std::byte* data() const { return data_; }
  std::uint32_t index() const { return index_; }  // the page's number in its pool
  const KvPool* pool() const { return pool_.get(); }
  // The newest host copy of this page's bytes, if one was made (see KvPageMirror).
  std::shared_ptr<const KvPageMirror> mirror() const;
  void set_mirror(std::shared_ptr<const KvPageMirror> mirror);

 private:
  std::shared_ptr<KvPool> pool_;  // the pool outlives every page (a checkpoint may hold one late)
  std::uint32_t index_;
  std::byte* data_;
  mutable std::mutex mirror_mu_;
  std::shared_ptr<const KvPageMirror> mirror_;
};
using KvPageRef = std::shared_ptr<KvPage>;

struct KvPoolStats {
  std::uint64_t page_bytes = 0;
  std::uint64_t pages_total = 0;  // pages the pool holds now (the budget, unless set_capacity lowered it)
  std::uint64_t pages_max = 0;    // the budget in pages
  std::uint64_t pages_used = 0;   // held by sequences or checkpoints
  std::uint64_t pages_touched = 0;  // ever used: memory committed
  std::uint64_t copies = 0;       // copy-on-write page copies
  std::uint64_t mirrored = 0;     // pages copied to the host for checkpoints (pools off the host)
  std::uint64_t exhausted = 0;    // allocations refused for want of budget
};

class KvPool : public std::enable_shared_from_this<KvPool> {
 public:
  // Room for budget_bytes / page_bytes pages (at least one must fit) in `memory`, allocated in
  // chunks of about `chunk_bytes` (whole pages, at least one). 256 MiB: elastic VRAM gives the
  // free chunks back and keeps the first, so its size is what a shrunk pool holds at least (with
  // 1 GiB chunks a server at 8 GiB could give another process 4.4 of the 4.8 GiB it asked for).
  static constexpr std::uint64_t kChunkBytes = std::uint64_t(256) << 20;
  static Result<std::shared_ptr<KvPool>> create(const KvLayout& layout, std::uint64_t budget_bytes,
                                                std::shared_ptr<Memory> memory = host_memory(),
                                                std::uint64_t chunk_bytes = kChunkBytes);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvLayout& layout() const { return layout_; }
  // Where the pages live (page data() pointers are in this memory).
  Memory& memory() const { return *memory_; }
  // A zero-filled page; kUnavailable when every page of the budget is in use and the reclaimer
  // (kReclaim) freed none.
  enum class Reclaim { kYes, kNo };
  Result<KvPageRef> allocate(Reclaim reclaim = Reclaim::kYes);
  // Who gives pages back when every page is in use: a holder of pages that sequences need more (a
  // checkpoint tier keeping pages), called without the pool's lock, lets go of some and returns
  // true, or false when it holds nothing more. allocate() asks again while no page is free and it
  // returns true. Null: none. The holder clears it before it goes.
  void set_reclaimer(std::function<bool()> reclaimer);
  // A new page with the bytes of `page` (copy on write).
  Result<KvPageRef> copy_of(const KvPage& page);
  // The page of this pool that a checkpoint chunk's bytes are: the page itself (a host pool's
  // checkpoints share their pages) or a host copy of one that still lives (KvPageMirror). Null
  // otherwise: other memory, another pool's page, or a page gone since.
  KvPageRef page_of(const store::ChunkBytes& bytes) const;
  KvPoolStats stats() const;
  // Moves the pool's size toward `pages` (1 .. the budget) a whole chunk at a time, never above it
  // where it can help, and returns the pages it holds now. Smaller: the chunks from the top whose
  // pages are all free go back to the memory (the first chunk, and one holding a page in use,
  // stay: pages never move; the reclaimer is asked for pages a top chunk holds). Larger: whole
  // chunks that fit in `pages` are allocated again, as far as the memory allows; their pages are new.
  std::uint64_t set_capacity(std::uint64_t pages);
  std::uint64_t chunk_pages() const { return chunk_pages_; }
  // Counts a page copied to the host for a checkpoint.
  void count_mirror();
  // A page-sized host buffer for a mirror, in the memory's staging memory (host RAM for VRAM),
  // reused: a buffer goes back to the pool's free list when its last holder lets go, and the free
  // list lives until the pool and every buffer are gone (it only grows to the most mirrors held at
  // once). Null when the memory has no staging memory (the host's) or it cannot be allocated.
  std::shared_ptr<std::byte> mirror_buffer();
  std::uint64_t mirror_buffers() const;  // allocated so far (reuse keeps this flat)
  // `count` mirror buffers allocated (and touched) now, in one block, taken before any other (no-op
  // without staging memory, or twice).
  Status reserve_mirror_buffers(std::size_t count);
  std::size_t free_mirror_buffers() const;

  class Key {  // only create() makes pools
    friend class KvPool;
    Key() = default;
  };
  KvPool(const Key&, const KvLayout& layout, std::shared_ptr<Memory> memory, std::vector<MemoryBlock> chunks,
         std::uint64_t pages, std::uint64_t chunk_pages);

 private:
  friend class KvPage;
  void release(std::uint32_t index);
  bool reclaim();                                       // asks the reclaimer for pages; takes reclaimer_mu_, not mu_
  std::uint64_t resize(std::uint64_t pages);            // set_capacity without asking for pages back
  bool chunks_blocked(std::uint64_t pages) const;       // above `pages` only because the top chunk is in use
  std::shared_ptr<MirrorBuffers> mirror_buffer_pool();  // made on first use; takes mu_

  // Chunk c's pages: [c * chunk_pages_, min((c + 1) * chunk_pages_, max_pages_)).
  std::uint64_t chunk_end(std::size_t c) const { return std::min<std::uint64_t>((c + 1) * chunk_pages_, max_pages_); }

  const KvLayout layout_;
  const std::shared_ptr<Memory> memory_;
  const std::uint64_t max_pages_;    // the budget
  const std::uint64_t chunk_pages_;  // pages of one allocation
  mutable std::mutex mu_;
  std::vector<MemoryBlock> chunks_;         // the pool's chunks now, lowest pages first
  std::vector<std::uint32_t> chunk_used_;   // pages in use in each
  std::uint64_t capacity_ = 0;              // pages the chunks hold
  std::set<std::uint32_t> free_;            // released pages, lowest first (need zeroing before reuse)
  std::shared_ptr<MirrorBuffers> mirrors_;  // made on the first mirror_buffer()
  std::uint64_t high_water_ = 0;            // pages [0, high_water_) have been handed out before
  std::mutex reclaimer_mu_;                 // held while the reclaimer runs: set_reclaimer(null) waits for it
  std::function<bool()> reclaimer_;
  KvPoolStats counters_;
};

}  // namespace ft::engine

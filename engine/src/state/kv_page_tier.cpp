#include "ft/engine/kv_page_tier.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace ft::engine {
namespace {

using store::ChunkBytes;
using store::ModelState;

// A checkpoint as the RAM tier keeps it (the state: its host bytes) plus the pool pages its KV
// chunks are, held so they outlive their sequence.
class KeptPages final : public store::MemoryTier::StatePayload {
 public:
  KeptPages(std::shared_ptr<const ModelState> state, std::vector<KvPageRef> pages)
      : StatePayload(std::move(state)), pages_(std::move(pages)) {}

 private:
  std::vector<KvPageRef> pages_;
};

// Keeps a state's bytes alive for views into it.
struct StateBytes final : store::ChunkOwner {
  explicit StateBytes(std::shared_ptr<const ModelState> s) : state(std::move(s)) {}
  std::shared_ptr<const ModelState> state;
};

// `state` with the KV chunks in `copied` (chunk index, the pool page now holding its bytes) as
// host copies of those pages (KvPageMirror), so that a restore adopts the pages. No chunk's bytes
// are copied: every chunk is a view of the bytes `state` already holds.
std::shared_ptr<const ModelState> with_mirrors(std::shared_ptr<const ModelState> state,
                                               const std::vector<std::pair<std::size_t, KvPageRef>>& copied,
                                               const KvLayout& layout) {
  auto holder = std::make_shared<const StateBytes>(state);
  auto out = std::make_shared<ModelState>();
  out->tokens = state->tokens;
  out->model = state->model;
  out->chunks.reserve(state->chunks.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i < state->chunks.size(); ++i) {
    const store::StateChunk& c = state->chunks[i];
    store::StateChunk chunk{c.layer, c.kind, c.dtype, c.shape, {}};
    if (next < copied.size() && copied[next].first == i) {
      const KvPageRef& page = copied[next++].second;
      // The same bytes (in place: the copy into the page read them), kept alive by their owner
      // or by the state that owns them.
      const std::shared_ptr<const void> keeper =
          c.data.owner() ? std::shared_ptr<const void>(c.data.owner()) : std::shared_ptr<const void>(holder);
      const int64_t tokens =
          std::min<int64_t>(layout.page_tokens, int64_t(state->tokens) - int64_t(c.layer) * layout.page_tokens);
      auto mirror = std::make_shared<const KvPageMirror>(
          std::shared_ptr<std::byte>(keeper, const_cast<std::byte*>(c.data.data())), c.data.size(), tokens, page);
      page->set_mirror(mirror);
      chunk.data = ChunkBytes::shared(mirror->bytes(), mirror);
    } else if (c.data.owner()) {
      chunk.data = c.data;  // a view already (it may still be arriving): shares its owner
    } else {
      chunk.data = ChunkBytes::shared(c.data.span(), holder);
    }
    out->chunks.push_back(std::move(chunk));
  }
  return out;
}

// The pages a checkpoint's KV chunks are, or free pages its bytes are copied into (never taking a
// page from anyone: no reclaim). A chunk the pool has no page for stays in host memory only.
std::shared_ptr<const store::MemoryTier::Payload> keep(KvPool& pool, std::shared_ptr<const ModelState> state) {
  const KvLayout& layout = pool.layout();
  std::vector<KvPageRef> pages;
  std::vector<std::pair<std::size_t, KvPageRef>> copied;
  for (std::size_t i = 0; i < state->chunks.size(); ++i) {
    const store::StateChunk& c = state->chunks[i];
    if (c.kind != store::ChunkKind::kKvPage || c.data.size() != layout.page_bytes()) continue;
    if (KvPageRef page = pool.page_of(c.data)) {
      pages.push_back(std::move(page));
      continue;
    }
    auto page = pool.allocate(KvPool::Reclaim::kNo);
    if (!page) continue;
    pool.memory().from_host((*page)->data(), c.data.data(), c.data.size());
    pages.push_back(*page);
    copied.emplace_back(i, std::move(page).value());
  }
  if (!copied.empty()) state = with_mirrors(std::move(state), copied, layout);
  return std::make_shared<const KeptPages>(std::move(state), std::move(pages));
}

class KvPageTier final : public store::MemoryTier {
 public:
  KvPageTier(std::shared_ptr<KvPool> pool, std::uint64_t byte_budget)
      : MemoryTier(pool->memory().is_host() ? "kv-pages" : "gpu", byte_budget,
                   [pool](std::shared_ptr<const ModelState> state) {
                     return Result<std::shared_ptr<const Payload>>(keep(*pool, std::move(state)));
                   }),
        reclaimer_(std::move(pool), *this) {}

 private:
  PoolReclaimer reclaimer_;  // first to go: no reclaim runs while the entries are destroyed
};

}  // namespace

PoolReclaimer::PoolReclaimer(std::shared_ptr<KvPool> pool, store::MemoryTier& tier) : pool_(std::move(pool)) {
  pool_->set_reclaimer([&tier] { return tier.evict_least_recent(); });
}

PoolReclaimer::~PoolReclaimer() { pool_->set_reclaimer(nullptr); }

Result<std::unique_ptr<store::MemoryTier>> make_kv_page_tier(std::shared_ptr<KvPool> pool, std::uint64_t byte_budget) {
  if (!pool) return invalid_argument("no KV pool to keep checkpoint pages in (a model without attention layers)");
  return std::unique_ptr<store::MemoryTier>(std::make_unique<KvPageTier>(std::move(pool), byte_budget));
}

}  // namespace ft::engine

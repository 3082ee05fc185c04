#include "ft/store/memory_tier.h"

#include <algorithm>

#include "ft/store/store_key.h"

namespace ft::store {

MemoryTier::MemoryTier(const char* name, std::uint64_t byte_budget, PayloadFactory make_payload)
    : name_(name), budget_(byte_budget), make_payload_(std::move(make_payload)) {}

Status MemoryTier::StatePayload::read(const ModelStateHeader&, const ChunkSink& sink) const {
  for (std::size_t i = 0; i < state_->chunks.size(); ++i) {
    const auto& data = state_->chunks[i].data;
    if (!data.empty()) FT_RETURN_IF_ERROR(sink({i, 0, data}));
  }
  return Status::ok();
}

Status MemoryTier::save(const StoreKey& key, const ModelState& state) {
  FT_RETURN_IF_ERROR(validate_state(state));  // before copying
  return save_shared(key, std::make_shared<const ModelState>(state));
}

Status MemoryTier::save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) {
  if (!state) return invalid_argument(std::string(name_) + " tier: null state");
  FT_RETURN_IF_ERROR(validate_store_key(key));
  FT_RETURN_IF_ERROR(validate_state(*state));
  if (state->model != key.model) return invalid_argument("state model fingerprint differs from the key's");
  // Checksums let readers detect a replaced entry (EntryHeader: made when first asked for).
  auto header = std::make_shared<const EntryHeader>(state);
  const std::uint64_t bytes = state->payload_bytes();
  StateFootprint footprint = StateFootprint::of(*state);
  const std::string k = encode_store_key(key);
  std::unique_lock lock(mu_);
  if (auto it = entries_.find(k); it != entries_.end()) erase_locked(it);
  const std::uint64_t incoming = bytes_.added_by(footprint);
  if (incoming > budget_) return Status::ok();  // would evict everything for one entry: not cached
  evict_locked(incoming);                       // make room first: a GPU payload allocates device memory
  // Outside the lock: making a payload may copy gigabytes (to the GPU, say).
  lock.unlock();
  auto payload = make_payload_(std::move(state));
  if (!payload.is_ok()) return payload.status().code() == ErrorCode::kUnavailable ? Status::ok() : payload.status();
  if (!(*payload)->state()) header->get();  // a copy: the bytes were read already
  lock.lock();
  if (auto it = entries_.find(k); it != entries_.end()) erase_locked(it);  // a concurrent save of the same key
  lru_.push_front(k);
  bytes_.add(footprint);
  logical_bytes_ += bytes;
  entries_[k] = Entry{std::move(payload).value(), std::move(header), bytes, std::move(footprint), lru_.begin()};
  evict_locked();
  return Status::ok();
}

void MemoryTier::erase_locked(std::map<std::string, Entry>::iterator it) {
  bytes_.remove(it->second.footprint);
  logical_bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void MemoryTier::evict_locked(std::uint64_t incoming) {
  for (auto it = lru_.end(); bytes_.bytes() + incoming > budget_ && it != lru_.begin();) {
    --it;
    if (pins_.count(*it)) continue;
    auto victim = entries_.find(*it);
    it = std::next(it);  // erase_locked invalidates the victim's list node, not its successor
    erase_locked(victim);
    ++counters_.evictions;
  }
  if (bytes_.bytes() + incoming <= budget_) return;
  // Only pinned entries are left to make room. Pins are honoured up to half the budget: beyond
  // that, pins a client never released (a session abandoned, keys cycled) would hold the tier
  // forever, so the least recently used pinned entries go too.
  // (Every entry left is pinned, so what they hold is bytes_.)
  for (auto it = lru_.end();
       bytes_.bytes() + incoming > budget_ && bytes_.bytes() > budget_ / 2 && it != lru_.begin();) {
    --it;
    auto victim = entries_.find(*it);
    if (!pins_.count(*it)) continue;
    it = std::next(it);
    pins_.erase(victim->first);
    erase_locked(victim);
    ++counters_.evictions;
  }
}

bool MemoryTier::evict_least_recent() {
  std::lock_guard lock(mu_);
  if (lru_.empty()) return false;
  auto victim = std::find_if(lru_.rbegin(), lru_.rend(), [&](const std::string& k) { return !pins_.count(k); });
  const std::string k = victim != lru_.rend() ? *victim : lru_.back();
  pins_.erase(k);
  erase_locked(entries_.find(k));
  ++counters_.evictions;
  return true;
}

const ModelStateHeader& MemoryTier::EntryHeader::get() const {
  std::call_once(once_, [this] {
    header_ = make_header(*state_);
    state_.reset();
  });
  return header_;
}

Result<ModelStateHeader> MemoryTier::lookup_header(const StoreKey& key) {
  std::shared_ptr<const EntryHeader> header;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(encode_store_key(key));
    if (it == entries_.end()) {
      ++counters_.misses;
      return not_found(std::string("not in ") + name_);
    }
    ++counters_.hits;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    header = it->second.header;
  }
  return header->get();  // outside the lock: the first call reads the bytes
}

Status MemoryTier::read_chunks(const StoreKey& key, const ModelStateHeader& header, const ChunkSink& sink) {
  std::shared_ptr<const Payload> payload;
  std::shared_ptr<const EntryHeader> held;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(encode_store_key(key));
    if (it == entries_.end()) return not_found(std::string("not in ") + name_);
    payload = it->second.payload;  // keeps the bytes alive after the lock is released
    held = it->second.header;
  }
  if (!same_state(held->get(), header)) return not_found("replaced since it was looked up");
  return payload->read(header, sink);
}

std::shared_ptr<const ModelState> MemoryTier::find_shared(const StoreKey& key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(encode_store_key(key));
  if (it == entries_.end()) return nullptr;
  auto state = it->second.payload->state();
  if (!state) return nullptr;
  ++counters_.hits;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return state;
}

bool MemoryTier::contains(const StoreKey& key) const {
  std::lock_guard lock(mu_);
  return entries_.count(encode_store_key(key)) != 0;
}

Result<std::optional<DeepestMatch>> MemoryTier::deepest(const TenantId& tenant, const ModelFingerprint& model,
                                                         std::span<const PrefixKey> keys_in_order) {
  auto found = probe_deepest(*this, tenant, model, keys_in_order);
  if (found.is_ok() && !found->has_value()) {
    std::lock_guard lock(mu_);
    ++counters_.misses;
  }
  return found;
}

Status MemoryTier::erase(const StoreKey& key) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(encode_store_key(key)); it != entries_.end()) erase_locked(it);
  return Status::ok();
}

void MemoryTier::pin(const StoreKey& key) {
  std::lock_guard lock(mu_);
  // Pins of keys no longer held mean nothing; past a bound they are forgotten, so a client that
  // pins and never unpins cannot grow the set without end.
  constexpr std::size_t kMaxPins = 1 << 16;
  if (pins_.size() >= kMaxPins)
    std::erase_if(pins_, [&](const std::string& k) { return !entries_.count(k); });
  pins_.insert(encode_store_key(key));
}

void MemoryTier::unpin(const StoreKey& key) {
  std::lock_guard lock(mu_);
  pins_.erase(encode_store_key(key));
  evict_locked();  // pins may have held the tier above its budget
}

void MemoryTier::drop_prefix_locked(const std::string& prefix) {
  auto it = entries_.lower_bound(prefix);
  while (it != entries_.end() && std::string_view(it->first).starts_with(prefix)) erase_locked(it++);
}

Status MemoryTier::drop_tenant(const TenantId& tenant) {
  std::lock_guard lock(mu_);
  drop_prefix_locked(tenant_prefix(tenant));
  return Status::ok();
}

Status MemoryTier::drop_model(const TenantId& tenant, const ModelFingerprint& model) {
  std::lock_guard lock(mu_);
  drop_prefix_locked(tenant_model_prefix(tenant, model));
  return Status::ok();
}

std::vector<TenantUsage> MemoryTier::usage_by_tenant() const {
  std::vector<TenantUsage> out;
  std::lock_guard lock(mu_);
  // A shared chunk is counted in the tenant of the first entry (in key order) holding it: one
  // sequence's checkpoints share chunks, and a sequence is one tenant's.
  SharedBytes counted;
  for (const auto& [k, e] : entries_) {
    const std::string tenant = k.substr(1, static_cast<unsigned char>(k[0]));
    if (out.empty() || out.back().tenant != tenant) out.push_back({tenant, 0, 0});
    out.back().entries += 1;
    out.back().bytes += counted.added_by(e.footprint);
    counted.add(e.footprint);
  }
  return out;
}

TierStats MemoryTier::stats() const {
  std::lock_guard lock(mu_);
  TierStats s = counters_;
  s.entries = entries_.size();
  s.bytes = bytes_.bytes();
  s.logical_bytes = logical_bytes_;
  return s;
}

}  // namespace ft::store

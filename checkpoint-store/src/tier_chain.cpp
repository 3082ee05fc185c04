#include "ft/store/tier_chain.h"

#include <cstring>

namespace ft::store {

TierChain::TierChain(std::vector<std::unique_ptr<StateTier>> tiers, std::vector<std::uint64_t> budgets)
    : tiers_(std::move(tiers)), budgets_(std::move(budgets)) {
  budgets_.resize(tiers_.size(), 0);
}

Status TierChain::save(const StoreKey& key, const ModelState& state) {
  FT_RETURN_IF_ERROR(validate_state(state));  // before copying
  return save_shared(key, std::make_shared<const ModelState>(state));
}

Status TierChain::save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) {
  for (auto& t : tiers_) FT_RETURN_IF_ERROR(t->save_shared(key, state));  // one copy, shared by the RAM tiers
  return Status::ok();
}

Status TierChain::save_deferred(const StoreKey& key, std::shared_ptr<const ModelState> state) {
  for (std::size_t i = 0; i + 1 < tiers_.size(); ++i) FT_RETURN_IF_ERROR(tiers_[i]->save_shared(key, state));
  return tiers_.back()->save_deferred(key, std::move(state));
}

Result<ModelStateHeader> TierChain::lookup_header(const StoreKey& key) {
  Result<ModelStateHeader> header = not_found("no tier holds the checkpoint");
  for (auto& t : tiers_) {
    header = t->lookup_header(key);
    if (header.is_ok()) break;
  }
  (header.is_ok() ? hits_ : misses_).fetch_add(1);
  return header;
}

std::vector<std::size_t> TierChain::promotions(std::size_t i, std::uint64_t payload_bytes) const {
  std::vector<std::size_t> promote;
  for (std::size_t j = 0; j < i; ++j)
    if (budgets_[j] == 0 || payload_bytes <= budgets_[j]) promote.push_back(j);
  return promote;
}

Result<std::shared_ptr<const ModelState>> TierChain::read_and_promote(std::size_t i, const StoreKey& key,
                                                                      const ModelStateHeader& header,
                                                                      const std::vector<std::size_t>& promote,
                                                                      const ChunkSink& sink) {
  auto copy = std::make_shared<ModelState>();
  copy->tokens = header.tokens;
  copy->model = header.model;
  for (const ChunkDesc& c : header.chunks)
    copy->chunks.push_back({c.layer, c.kind, c.dtype, c.shape, std::vector<std::byte>(c.bytes)});
  FT_RETURN_IF_ERROR(tiers_[i]->read_chunks(key, header, [&](const ChunkPiece& piece) -> Status {
    auto& dst = copy->chunks.at(piece.chunk_index).data;
    if (piece.offset + piece.bytes.size() > dst.size()) return internal_error("piece beyond its chunk");
    std::memcpy(dst.mutable_data() + piece.offset, piece.bytes.data(), piece.bytes.size());
    return sink ? sink(piece) : Status::ok();
  }));
  // Verified by the source tier's checksums by now; a failed promotion only costs a later read.
  for (std::size_t j : promote) (void)tiers_[j]->save_shared(key, copy);
  return std::shared_ptr<const ModelState>(std::move(copy));
}

Status TierChain::read_chunks(const StoreKey& key, const ModelStateHeader& header, const ChunkSink& sink) {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (!tiers_[i]->contains(key)) continue;
    // Faster tiers it fits in get a copy on the way (teed while streaming to the caller).
    const std::vector<std::size_t> promote = promotions(i, header.payload_bytes());
    Status s = promote.empty() ? tiers_[i]->read_chunks(key, header, sink)
                               : read_and_promote(i, key, header, promote, sink).status();
    if (s.code() == ErrorCode::kNotFound) continue;  // evicted or replaced meanwhile: next tier
    return s;
  }
  return not_found("no tier holds the checkpoint");
}

std::shared_ptr<const ModelState> TierChain::load_shared(const StoreKey& key) {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (!tiers_[i]->contains(key)) continue;
    std::shared_ptr<const ModelState> state = tiers_[i]->find_shared(key);  // held in memory there
    std::vector<std::size_t> promote;
    if (state) {
      promote = promotions(i, state->payload_bytes());
      for (std::size_t j : promote) (void)tiers_[j]->save_shared(key, state);
    } else {
      Result<ModelStateHeader> header = tiers_[i]->lookup_header(key);
      if (!header) continue;
      promote = promotions(i, header->payload_bytes());
      if (promote.empty()) return nullptr;  // nothing faster takes it: streaming it serves best
      Result<std::shared_ptr<const ModelState>> copy = read_and_promote(i, key, *header, promote, nullptr);
      if (!copy) continue;
      state = *std::move(copy);
    }
    hits_.fetch_add(1);
    // The fastest tier's own state: a GPU tier's is its pool pages.
    for (std::size_t j : promote)
      if (auto own = tiers_[j]->find_shared(key)) return own;
    return state;
  }
  return nullptr;
}

std::shared_ptr<const ModelState> TierChain::find_shared(const StoreKey& key) {
  for (const auto& t : tiers_) {
    if (auto state = t->find_shared(key)) {
      hits_.fetch_add(1);
      return state;
    }
  }
  return nullptr;
}

bool TierChain::contains(const StoreKey& key) const {
  for (const auto& t : tiers_)
    if (t->contains(key)) return true;
  return false;
}

Result<std::optional<DeepestMatch>> TierChain::deepest(const TenantId& tenant, const ModelFingerprint& model,
                                                       std::span<const PrefixKey> keys_in_order) {
  std::optional<DeepestMatch> best;
  for (auto& t : tiers_) {
    FT_ASSIGN_OR_RETURN(auto found, t->deepest(tenant, model, keys_in_order));
    if (found && (!best || found->index > best->index)) best = std::move(found);
  }
  if (!best) misses_.fetch_add(1);
  return best;
}

Status TierChain::erase(const StoreKey& key) {
  for (auto& t : tiers_) FT_RETURN_IF_ERROR(t->erase(key));
  return Status::ok();
}

void TierChain::pin(const StoreKey& key) {
  for (auto& t : tiers_) t->pin(key);
}

void TierChain::unpin(const StoreKey& key) {
  for (auto& t : tiers_) t->unpin(key);
}

Status TierChain::drop_tenant(const TenantId& tenant) {
  for (auto& t : tiers_) FT_RETURN_IF_ERROR(t->drop_tenant(tenant));
  return Status::ok();
}

Status TierChain::drop_model(const TenantId& tenant, const ModelFingerprint& model) {
  for (auto& t : tiers_) FT_RETURN_IF_ERROR(t->drop_model(tenant, model));
  return Status::ok();
}

std::vector<TenantUsage> TierChain::usage_by_tenant() const { return tiers_.back()->usage_by_tenant(); }

TierStats TierChain::stats() const {
  TierStats s = tiers_.back()->stats();
  s.hits = hits_.load();
  s.misses = misses_.load();
  return s;
}

}  // namespace ft::store

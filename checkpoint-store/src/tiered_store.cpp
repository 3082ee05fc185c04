#include "ft/store/tiered_store.h"

#include <cstring>

namespace ft::store {

Result<std::unique_ptr<TieredStore>> TieredStore::open(StoreOptions options) {
  auto ram = std::make_unique<HostRamTier>(options.ram_budget);
  FT_ASSIGN_OR_RETURN(auto disk, RocksDbStore::open(std::move(options)));
  return std::unique_ptr<TieredStore>(new TieredStore(std::move(ram), std::move(disk)));
}

TieredStore::TieredStore(std::unique_ptr<HostRamTier> ram, std::unique_ptr<RocksDbStore> disk)
    : ram_(std::move(ram)), disk_(std::move(disk)) {}

Status TieredStore::save(const StoreKey& key, const ModelState& state) {
  FT_RETURN_IF_ERROR(validate_state(state));  // before copying
  return save_shared(key, std::make_shared<const ModelState>(state));
}

Status TieredStore::save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) {
  FT_RETURN_IF_ERROR(ram_->save_shared(key, state));
  return disk_->save(key, *state);
}

Status TieredStore::save_deferred(const StoreKey& key, std::shared_ptr<const ModelState> state) {
  FT_RETURN_IF_ERROR(ram_->save_shared(key, state));  // RAM and the queue share one copy
  return disk_->save_async(key, std::move(state));
}

Result<ModelStateHeader> TieredStore::lookup_header(const StoreKey& key) {
  auto header = ram_->lookup_header(key);
  if (!header.is_ok()) header = disk_->lookup_header(key);
  (header.is_ok() ? hits_ : misses_).fetch_add(1);
  return header;
}

Status TieredStore::read_chunks(const StoreKey& key, const ModelStateHeader& header, const ChunkSink& sink) {
  if (ram_->contains(key)) {
    Status s = ram_->read_chunks(key, header, sink);
    if (s.code() != ErrorCode::kNotFound) return s;  // else evicted or replaced meanwhile: try disk
  }
  if (header.payload_bytes() > ram_->byte_budget()) return disk_->read_chunks(key, header, sink);

  // Promotion: tee the pieces into a ModelState while streaming them to the caller, so a disk hit
  // is read once.
  auto copy = std::make_shared<ModelState>();
  copy->tokens = header.tokens;
  copy->model = header.model;
  for (const ChunkDesc& c : header.chunks) {
    copy->chunks.push_back({c.layer, c.kind, c.dtype, c.shape, std::vector<std::byte>(c.bytes)});
  }
  FT_RETURN_IF_ERROR(disk_->read_chunks(key, header, [&](const ChunkPiece& piece) -> Status {
    auto& dst = copy->chunks.at(piece.chunk_index).data;
    if (piece.offset + piece.bytes.size() > dst.size()) return internal_error("piece beyond its chunk");
    std::memcpy(dst.data() + piece.offset, piece.bytes.data(), piece.bytes.size());
    return sink(piece);
  }));
  // Verified by the disk tier's checksums by now; a failed promotion only costs a later disk read.
  (void)ram_->save_shared(key, std::move(copy));
  return Status::ok();
}

bool TieredStore::contains(const StoreKey& key) const { return ram_->contains(key) || disk_->contains(key); }

Result<std::optional<DeepestMatch>> TieredStore::deepest(const TenantId& tenant, const ModelFingerprint& model,
                                                         std::span<const PrefixKey> keys_in_order) {
  auto found = probe_deepest(*this, tenant, model, keys_in_order);
  if (found.is_ok() && !found->has_value()) misses_.fetch_add(1);
  return found;
}

Status TieredStore::erase(const StoreKey& key) {
  FT_RETURN_IF_ERROR(ram_->erase(key));
  return disk_->erase(key);
}

void TieredStore::pin(const StoreKey& key) {
  ram_->pin(key);
  disk_->pin(key);
}

void TieredStore::unpin(const StoreKey& key) {
  ram_->unpin(key);
  disk_->unpin(key);
}

Status TieredStore::drop_tenant(const TenantId& tenant) {
  FT_RETURN_IF_ERROR(ram_->drop_tenant(tenant));
  return disk_->drop_tenant(tenant);
}

Status TieredStore::drop_model(const TenantId& tenant, const ModelFingerprint& model) {
  FT_RETURN_IF_ERROR(ram_->drop_model(tenant, model));
  return disk_->drop_model(tenant, model);
}

std::vector<TenantUsage> TieredStore::usage_by_tenant() const { return disk_->usage_by_tenant(); }

TierStats TieredStore::stats() const {
  TierStats s = disk_->stats();
  s.hits = hits_.load();
  s.misses = misses_.load();
  return s;
}

}  // namespace ft::store

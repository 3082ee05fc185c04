// Byte encoding of StoreKey for RocksDB. Ordered so that one tenant, or one (tenant, model), is a
// contiguous key range: usage and drop are prefix scans / range deletes.
//
//   store key = u8 tenant_len | tenant bytes | model (hi BE, lo BE) | prefix (hi BE, lo BE)
//   blob key  = store key | u32 BE chunk index | u32 BE piece index
//   page name = store key without its prefix | XXH3-128 (lo BE, hi BE) | u64 BE bytes | u32 BE piece bytes
//   page piece key = page name | u32 BE piece index
//
// A KV page is named by the tenant and model of the checkpoints holding it (a drop of either is one
// key range), then by what it is: its content hash, its size and how it is cut into pieces.
//
// The length byte makes every tenant prefix self-delimiting ("ab" never matches tenant "abc").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ft/common/result.h"
#include "ft/store/types.h"

namespace ft::store {

// Precondition: 1 <= key.tenant.size() <= kMaxTenantBytes (see validate_store_key).
std::string encode_store_key(const StoreKey& key);
Result<StoreKey> decode_store_key(std::string_view bytes);
Status validate_store_key(const StoreKey& key);

std::string tenant_prefix(const TenantId& tenant);
std::string tenant_model_prefix(const TenantId& tenant, const ModelFingerprint& model);
std::string blob_key(std::string_view encoded_store_key, std::uint32_t chunk, std::uint32_t piece);

struct ChunkDesc;
std::string page_name(std::string_view encoded_store_key, const ChunkDesc& chunk, std::uint32_t piece_bytes);
std::uint32_t page_pieces(std::string_view page_name);  // 0 for a name too short to be one
std::string page_piece_key(std::string_view page_name, std::uint32_t piece);

// Smallest string greater than every string starting with `prefix` (the end of a range delete).
std::string prefix_end(std::string_view prefix);

}  // namespace ft::store

#include "ft/store/store_key.h"

#include "ft/store/checkpoint_format.h"

namespace ft::store {
namespace {

void put_be64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
void put_be32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
std::uint64_t get_be64(std::string_view in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

std::uint32_t get_be32(std::string_view in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

}  // namespace

Status validate_store_key(const StoreKey& key) {
  if (key.tenant.empty() || key.tenant.size() > kMaxTenantBytes) {
    return invalid_argument("tenant id must be 1.." + std::to_string(kMaxTenantBytes) +
                            " bytes, got " + std::to_string(key.tenant.size()));
  }
  return Status::ok();
}

std::string tenant_prefix(const TenantId& tenant) {
  std::string out;
  out.push_back(static_cast<char>(tenant.size()));
  out += tenant;
  return out;
}

std::string tenant_model_prefix(const TenantId& tenant, const ModelFingerprint& model) {
  std::string out = tenant_prefix(tenant);
  put_be64(out, model.hi);
  put_be64(out, model.lo);
  return out;
}

std::string encode_store_key(const StoreKey& key) {
  std::string out = tenant_model_prefix(key.tenant, key.model);
  put_be64(out, key.prefix.hi);
  put_be64(out, key.prefix.lo);
  return out;
}

Result<StoreKey> decode_store_key(std::string_view bytes) {
  if (bytes.empty()) return corrupt("empty store key");
  const std::size_t tenant_len = static_cast<unsigned char>(bytes[0]);
  if (tenant_len == 0 || bytes.size() != 1 + tenant_len + 32) {
    return corrupt("store key of " + std::to_string(bytes.size()) + " bytes");
  }
  StoreKey key;
  key.tenant = std::string(bytes.substr(1, tenant_len));
  std::string_view rest = bytes.substr(1 + tenant_len);
  key.model = {get_be64(rest), get_be64(rest.substr(8))};
  key.prefix = {get_be64(rest.substr(16)), get_be64(rest.substr(24))};
  return key;
}

std::string blob_key(std::string_view encoded_store_key, std::uint32_t chunk, std::uint32_t piece) {
  std::string out(encoded_store_key);
  put_be32(out, chunk);
  put_be32(out, piece);
  return out;
}

std::string page_name(std::string_view encoded_store_key, const ChunkDesc& chunk, std::uint32_t piece_bytes) {
  std::string out(encoded_store_key.substr(0, encoded_store_key.size() - 16));  // without the prefix hash
  put_be64(out, chunk.checksum.lo);
  put_be64(out, chunk.checksum.hi);
  put_be64(out, chunk.bytes);
  put_be32(out, piece_bytes);
  return out;
}

std::uint32_t page_pieces(std::string_view name) {
  constexpr std::size_t kTail = 28;  // hash, bytes, piece bytes
  if (name.size() < kTail) return 0;
  const std::uint64_t bytes = get_be64(name.substr(name.size() - 12));
  const std::uint64_t piece_bytes = get_be32(name.substr(name.size() - 4));
  return piece_bytes == 0 ? 0 : static_cast<std::uint32_t>((bytes + piece_bytes - 1) / piece_bytes);
}

std::string page_piece_key(std::string_view name, std::uint32_t piece) {
  std::string out(name);
  put_be32(out, piece);
  return out;
}

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) {
    // Only an all-0xff prefix gets here; keys are at most 1 + 255 + 32 + 8 bytes (+1 tag byte), so
    // a longer run of 0xff sorts after all of them.
    return std::string(512, '\xff');
  }
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

}  // namespace ft::store

// libFuzzer target for the checkpoint header reader (checkpoint-store/checkpoint_format.h): the
// bytes a store hands back for a checkpoint's meta entry. With the first byte odd, the header
// checksum (the last 8 bytes) is recomputed first, so the fuzzer gets past it to the fields; with
// it even, the bytes are read as they are. A header read must describe itself consistently
// (payload bytes = the sum of its chunks, pieces cover each chunk) and survive being written and
// read again unchanged.
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "ft/store/checkpoint_format.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ft;
  if (size < 1) return 0;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) && bytes.size() >= 8) {
    const std::uint64_t sum = XXH3_64bits(bytes.data(), bytes.size() - 8);
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);  // little-endian hosts only, like the format
  }
  auto header = store::decode_header(bytes);
  if (!header) {
    if (header.status().message().empty()) fuzz::fail("a refusal without a message");
    return 0;
  }
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < header->chunks.size(); ++i) {
    const std::uint64_t n = header->chunks[i].bytes;
    if (__builtin_add_overflow(total, n, &total)) fuzz::fail("chunk sizes overflow");
    const std::uint64_t pieces = header->piece_count(i);
    if (header->piece_bytes == 0) fuzz::fail("a header with zero piece size was accepted");
    if (pieces * std::uint64_t(header->piece_bytes) < n) fuzz::fail("the pieces do not cover a chunk");
  }
  if (header->payload_bytes() != total) fuzz::fail("payload_bytes != the sum of the chunks");
  const std::string written = store::encode_header(*header);
  auto again = store::decode_header(written);
  if (!again) fuzz::fail("a written header does not read back: " + again.status().message());
  if (store::encode_header(*again) != written || !store::same_state(*header, *again))
    fuzz::fail("a round trip changed the header");
  return 0;
}

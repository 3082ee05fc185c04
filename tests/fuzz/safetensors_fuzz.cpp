// libFuzzer target for the safetensors header reader: the input is a whole file (8-byte length,
// JSON header, data). Any bytes must be refused with an error or give entries that lie inside the
// data section, do not overlap and hold dtype size x element count bytes.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ft;
  // A copy, so an over-read past the input is a clean ASan report on a heap block of its own.
  const std::vector<std::byte> file(reinterpret_cast<const std::byte*>(data),
                                    reinterpret_cast<const std::byte*>(data) + size);
  auto entries = engine::parse_safetensors_header(file.data(), file.size(), "fuzz.safetensors");
  if (!entries) {
    if (entries.status().message().empty()) fuzz::fail("a refusal without a message");
    return 0;
  }
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const engine::SafetensorsEntry& e : *entries) {
    if (e.offset > size || e.nbytes > size - e.offset) fuzz::fail("tensor " + e.name + " runs past the file");
    if (e.dtype) {
      std::size_t numel = 1;
      for (int64_t d : e.shape) {
        if (d < 0) fuzz::fail("negative dimension in " + e.name);
        if (__builtin_mul_overflow(numel, std::size_t(d), &numel))
          fuzz::fail("element count of " + e.name + " overflows");
      }
      std::size_t bytes = 0;
      if (__builtin_mul_overflow(numel, engine::dtype_size(*e.dtype), &bytes) || bytes != e.nbytes)
        fuzz::fail("size of " + e.name + " != dtype x numel");
    }
    if (e.nbytes > 0) spans.push_back({e.offset, e.offset + e.nbytes});
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) fuzz::fail("two tensors overlap");
  return 0;
}

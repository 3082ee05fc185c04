// libFuzzer target for the GGUF reader: the input is a whole file (magic, version, metadata, tensor
// table, data). Any bytes must be refused with a one-line error or give a header whose keys,
// values and tensors all lie inside the file, with tensors that do not overlap, rows of whole
// blocks and exactly numel / block elems * block bytes each. Every typed getter then answers every
// key (a value or an error), and the first row of every tensor FreeToken computes with is
// dequantised, so an over-read in either is an ASan report.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ft/engine/gguf.h"
#include "ft/engine/matrix.h"
#include "fuzz_check.h"
#include "weights/gguf_parse.h"

namespace {

using namespace ft;
using namespace ft::engine;

void touch_metadata(const GgufHeader& h) {
  const GgufMetadata meta(h.kvs, "fuzz.gguf");
  for (const GgufKv& kv : h.kvs) {
    // Each getter either decodes the value or refuses it; none may read outside it.
    (void)meta.get_string(kv.key);
    (void)meta.get_int(kv.key);
    (void)meta.get_float(kv.key);
    (void)meta.get_bool(kv.key);
    if (auto s = meta.get_strings(kv.key); s.is_ok() && s->size() != kv.value.count) fuzz::fail("string count");
    if (auto i = meta.get_ints(kv.key); i.is_ok() && i->size() != kv.value.count) fuzz::fail("integer count");
    (void)meta.get_floats(kv.key);
  }
}

void check_tensor(const GgufTensor& t, const std::byte* begin, std::size_t size) {
  if (t.offset > size || t.nbytes > size - t.offset) fuzz::fail("tensor " + t.name + " runs past the file");
  if (t.data != begin + t.offset) fuzz::fail("tensor " + t.name + " data != file + offset");
  const GgmlType* type = ggml_type(t.ggml_type);
  if (type == nullptr) fuzz::fail("tensor " + t.name + " of an unknown type was accepted");
  if (t.shape.size() > kGgufMaxDims) fuzz::fail("tensor " + t.name + " has too many dimensions");
  std::uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(numel, std::uint64_t(d), &numel)) fuzz::fail("bad shape of " + t.name);
  }
  const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  if (cols % type->block_elems != 0) fuzz::fail("tensor " + t.name + " has a partial block per row");
  if (numel / type->block_elems * type->block_bytes != t.nbytes) fuzz::fail("size of " + t.name);
  if (!t.dtype) return;
  if (dtype_bytes(*t.dtype, numel) != t.nbytes) fuzz::fail("dtype_bytes disagrees for " + t.name);
  if (numel == 0 || t.shape.empty()) return;
  TensorView view;
  view.name = t.name;
  view.dtype = *t.dtype;
  view.shape = t.shape;
  view.data = t.data;
  view.nbytes = t.nbytes;
  const Matrix m = matrix_view(view);
  if (m.bytes() != t.nbytes) fuzz::fail("matrix view bytes of " + t.name);
  if (*t.dtype == DType::kF32 || *t.dtype == DType::kF16 || *t.dtype == DType::kBF16 || dtype_is_block(*t.dtype)) {
    std::vector<float> row(std::size_t(m.cols));
    matrix_row_f32(m, 0, row.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy, so an over-read past the input is a clean ASan report on a heap block of its own.
  const std::vector<std::byte> file(reinterpret_cast<const std::byte*>(data),
                                    reinterpret_cast<const std::byte*>(data) + size);
  auto h = parse_gguf(file.data(), file.size(), "fuzz.gguf");
  if (!h) {
    const std::string& m = h.status().message();
    if (m.empty()) fuzz::fail("a refusal without a message");
    if (m.find('\n') != std::string::npos) fuzz::fail("a refusal of more than one line: " + m);
    return 0;
  }
  const std::byte* begin = file.data();
  auto inside = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= begin && b <= begin + size && n <= std::size_t(begin + size - b);
  };
  for (const GgufKv& kv : h->kvs) {
    if (!inside(kv.key.data(), kv.key.size())) fuzz::fail("a key outside the file");
    if (!inside(kv.value.data, kv.value.size))
      fuzz::fail("the value of " + std::string(kv.key) + " is outside the file");
  }
  touch_metadata(*h);
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const GgufTensor& t : h->tensors) {
    check_tensor(t, begin, size);
    if (t.nbytes > 0) spans.push_back({t.offset, t.offset + t.nbytes});
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) fuzz::fail("two tensors overlap");
  return 0;
}

#include "ft/engine/sequence_state.h"

#include <algorithm>
#include <cstring>

#include "ft/engine/checkpoint.h"  // DType codes for the blob's tensors

namespace ft::engine {
namespace {

constexpr char kMagic[4] = {'F', 'T', 'S', 'S'};

uint64_t fnv1a64(const std::byte* data, std::size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= uint64_t(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

class Writer {
 public:
  template <typename T>
  void put(T v) {
    bytes(&v, sizeof(T));
  }
  // resize + memcpy rather than insert(): GCC 12 warns falsely (-Wstringop-overflow) on the latter.
  void bytes(const void* data, std::size_t n) {
    if (n == 0) return;
    const std::size_t old = out_.size();
    out_.resize(old + n);
    std::memcpy(out_.data() + old, data, n);
  }
  // One fp32 tensor: dtype, ndim, dims, nbytes, data.
  void tensor(const std::vector<int64_t>& shape, const float* data, std::size_t count) {
    put<uint8_t>(uint8_t(DType::kF32));
    put<uint8_t>(uint8_t(shape.size()));
    for (int64_t d : shape) put<int64_t>(d);
    put<uint64_t>(count * sizeof(float));
    bytes(data, count * sizeof(float));
  }
  std::vector<std::byte>& out() { return out_; }

 private:
  std::vector<std::byte> out_;
};

// Bounds-checked reads: every overrun is a truncated blob, reported once with what was expected.
class Reader {
 public:
  Reader(const std::byte* data, std::size_t n) : p_(data), end_(data + n) {}
  template <typename T>
  bool get(T& v) {
    if (std::size_t(end_ - p_) < sizeof(T)) return false;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool bytes(void* dst, std::size_t n) {
    if (std::size_t(end_ - p_) < n) return false;
    std::memcpy(dst, p_, n);
    p_ += n;
    return true;
  }
  bool done() const { return p_ == end_; }

 private:
  const std::byte* p_;
  const std::byte* end_;
};

struct ParsedTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

Status truncated(const std::string& what) { return corrupt("state snapshot is truncated (reading " + what + ")"); }

Result<ParsedTensor> read_tensor(Reader& r, const std::string& where) {
  uint8_t dtype = 0, ndim = 0;
  if (!r.get(dtype) || !r.get(ndim)) return truncated(where);
  if (dtype != uint8_t(DType::kF32)) {
    return unsupported("state snapshot " + where + " has dtype code " + std::to_string(dtype) +
                       "; this build reads F32 state only");
  }
  ParsedTensor t;
  int64_t numel = 1;
  for (int i = 0; i < ndim; ++i) {
    int64_t d = 0;
    if (!r.get(d)) return truncated(where);
    if (d < 0 || d > (int64_t(1) << 40)) return corrupt("state snapshot " + where + " has a bad dimension");
    t.shape.push_back(d);
    numel *= d;
  }
  uint64_t nbytes = 0;
  if (!r.get(nbytes)) return truncated(where);
  if (nbytes != uint64_t(numel) * sizeof(float)) {
    return corrupt("state snapshot " + where + ": byte count does not match its shape");
  }
  t.data.resize(std::size_t(numel));
  if (!r.bytes(t.data.data(), nbytes)) return truncated(where);
  return t;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

SequenceState::SequenceState(std::string fingerprint, std::vector<LayerState> layers)
    : fingerprint_(std::move(fingerprint)), layers_(std::move(layers)) {}

std::size_t SequenceState::bytes() const {
  std::size_t n = 0;
  for (const LayerState& l : layers_) {
    n += (l.kv.k.size() + l.kv.v.size() + l.linear.conv.size() + l.linear.recurrent.size()) * sizeof(float);
  }
  return n;
}

void SequenceState::reset() {
  position_ = 0;
  for (LayerState& l : layers_) {
    l.kv.k.clear();
    l.kv.v.clear();
    std::fill(l.linear.conv.begin(), l.linear.conv.end(), 0.0f);
    std::fill(l.linear.recurrent.begin(), l.linear.recurrent.end(), 0.0f);
  }
}

Result<std::vector<std::byte>> SequenceState::snapshot(int64_t tokens) const {
  if (tokens < 0 || tokens > position_) {
    return invalid_argument("cannot snapshot " + std::to_string(tokens) + " tokens of a state holding " +
                            std::to_string(position_));
  }
  const bool has_linear = std::any_of(layers_.begin(), layers_.end(),
                                      [](const LayerState& l) { return l.kind == LayerStateKind::kLinear; });
  if (has_linear && tokens != position_) {
    return invalid_argument("cannot snapshot at token " + std::to_string(tokens) + " of " +
                            std::to_string(position_) +
                            ": recurrent (linear-attention) state cannot be rewound; snapshot at the boundary");
  }
  Writer w;
  w.bytes(kMagic, 4);
  w.put<uint32_t>(kSnapshotVersion);
  w.put<uint32_t>(uint32_t(fingerprint_.size()));
  w.bytes(fingerprint_.data(), fingerprint_.size());
  w.put<int64_t>(tokens);
  w.put<uint32_t>(uint32_t(layers_.size()));
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const LayerState& l = layers_[i];
    w.put<uint32_t>(uint32_t(i));
    w.put<uint8_t>(uint8_t(l.kind));
    if (l.kind == LayerStateKind::kAttention) {
      const std::size_t count = std::size_t(tokens * l.kv.kv_heads * l.kv.head_dim);
      const std::vector<int64_t> shape = {tokens, l.kv.kv_heads, l.kv.head_dim};
      w.put<uint32_t>(2);
      w.tensor(shape, l.kv.k.data(), count);
      w.tensor(shape, l.kv.v.data(), count);
    } else {
      w.put<uint32_t>(2);
      w.tensor(l.linear.conv_shape, l.linear.conv.data(), l.linear.conv.size());
      w.tensor(l.linear.recurrent_shape, l.linear.recurrent.data(), l.linear.recurrent.size());
    }
  }
  const uint64_t sum = fnv1a64(w.out().data(), w.out().size());
  w.put<uint64_t>(sum);
  return std::move(w.out());
}

Status SequenceState::restore(std::span<const std::byte> blob) {
  // Magic and version come first so a future format is reported as such, not as corruption.
  if (blob.size() < 8) return corrupt("state snapshot is truncated (" + std::to_string(blob.size()) + " bytes)");
  if (std::memcmp(blob.data(), kMagic, 4) != 0) return corrupt("not a FreeToken state snapshot (bad magic)");
  uint32_t version = 0;
  std::memcpy(&version, blob.data() + 4, 4);
  if (version != kSnapshotVersion) {
    return unsupported("state snapshot format version " + std::to_string(version) + "; this build reads version " +
                       std::to_string(kSnapshotVersion));
  }
  if (blob.size() < 8 + 8) return truncated("header");
  const std::size_t body = blob.size() - 8;
  uint64_t stored = 0;
  std::memcpy(&stored, blob.data() + body, 8);
  if (stored != fnv1a64(blob.data(), body)) return corrupt("state snapshot checksum mismatch (truncated or corrupted)");

  Reader r(blob.data() + 8, body - 8);
  uint32_t fp_len = 0;
  if (!r.get(fp_len) || fp_len > body) return truncated("fingerprint");
  std::string fp(fp_len, '\0');
  if (!r.bytes(fp.data(), fp_len)) return truncated("fingerprint");
  if (fp != fingerprint_) {
    return invalid_argument("state snapshot is for model '" + fp + "', not this model '" + fingerprint_ + "'");
  }
  int64_t tokens = 0;
  uint32_t n_layers = 0;
  if (!r.get(tokens) || !r.get(n_layers)) return truncated("header");
  if (tokens < 0) return corrupt("state snapshot has a negative token count");
  if (n_layers != layers_.size()) {
    return invalid_argument("state snapshot has " + std::to_string(n_layers) + " layers, this model " +
                            std::to_string(layers_.size()));
  }
  std::vector<LayerState> restored = layers_;
  for (uint32_t i = 0; i < n_layers; ++i) {
    const std::string where = "layer " + std::to_string(i);
    uint32_t index = 0, n_tensors = 0;
    uint8_t kind = 0;
    if (!r.get(index) || !r.get(kind) || !r.get(n_tensors)) return truncated(where);
    LayerState& l = restored[i];
    if (index != i || kind != uint8_t(l.kind) || n_tensors != 2) {
      return invalid_argument("state snapshot " + where + " has another layout than this model's");
    }
    FT_ASSIGN_OR_RETURN(ParsedTensor a, read_tensor(r, where));
    FT_ASSIGN_OR_RETURN(ParsedTensor b, read_tensor(r, where));
    if (l.kind == LayerStateKind::kAttention) {
      const std::vector<int64_t> want = {tokens, l.kv.kv_heads, l.kv.head_dim};
      if (a.shape != want || b.shape != want) {
        return invalid_argument("state snapshot " + where + " K/V shape " + shape_str(a.shape) + ", this model wants " +
                                shape_str(want));
      }
      l.kv.k = std::move(a.data);
      l.kv.v = std::move(b.data);
    } else {
      if (a.shape != l.linear.conv_shape || b.shape != l.linear.recurrent_shape) {
        return invalid_argument("state snapshot " + where + " linear state shapes " + shape_str(a.shape) + ", " +
                                shape_str(b.shape) + " differ from this model's " + shape_str(l.linear.conv_shape) +
                                ", " + shape_str(l.linear.recurrent_shape));
      }
      l.linear.conv = std::move(a.data);
      l.linear.recurrent = std::move(b.data);
    }
  }
  if (!r.done()) return corrupt("state snapshot has trailing bytes after its last layer");
  layers_ = std::move(restored);
  position_ = tokens;
  return Status::ok();
}

}  // namespace ft::engine

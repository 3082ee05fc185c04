// Everything a model remembers about one sequence: per full-attention layer the K and V of
// positions [0, N), per linear-attention (Gated DeltaNet) layer the short-convolution state and
// the recurrent state. fp32 on the CPU path. A Model creates an empty one (Model::new_state()) and
// its forward() appends tokens at position().
//
// Snapshots: snapshot() turns the state into a self-describing, versioned byte blob and restore()
// puts one back into a state of the same model. Blob layout (little-endian):
//   "FTSS" | u32 version | u32 len + fingerprint bytes | i64 token count | u32 layer count
//   per layer: u32 layer index | u8 kind (1 attention, 2 linear) | u32 tensor count
//     per tensor: u8 dtype (DType) | u8 ndim | i64 dims[ndim] | u64 nbytes | bytes
//   u64 FNV-1a 64 of all bytes before it
// The fingerprint names the model (family and a hash of its config and tensor shapes), so a blob
// from another model is refused rather than silently producing wrong output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ft/common/result.h"

namespace ft::engine {

inline constexpr uint32_t kSnapshotVersion = 1;

enum class LayerStateKind : uint8_t { kAttention = 1, kLinear = 2 };

// K and V of one attention layer, token-major: [tokens, kv_heads, head_dim].
struct KvCache {
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  std::vector<float> k;
  std::vector<float> v;
  int64_t tokens() const { return kv_heads > 0 && head_dim > 0 ? int64_t(k.size()) / (kv_heads * head_dim) : 0; }
};

// One Gated DeltaNet layer: conv [conv_dim, K-1] and recurrent [num_v_heads, head_k_dim,
// head_v_dim] (see ops_deltanet.h). Fixed size whatever the sequence length.
struct LinearState {
  std::vector<int64_t> conv_shape;
  std::vector<int64_t> recurrent_shape;
  std::vector<float> conv;
  std::vector<float> recurrent;
};

struct LayerState {
  LayerStateKind kind = LayerStateKind::kAttention;
  KvCache kv;          // kAttention
  LinearState linear;  // kLinear
};

class SequenceState {
 public:
  SequenceState() = default;
  // An empty state (position 0) with these layers; linear states must be zero-filled and sized.
  SequenceState(std::string fingerprint, std::vector<LayerState> layers);

  const std::string& fingerprint() const { return fingerprint_; }
  int64_t position() const { return position_; }  // tokens consumed so far
  std::vector<LayerState>& layers() { return layers_; }
  const std::vector<LayerState>& layers() const { return layers_; }
  std::size_t bytes() const;  // memory held by the tensors

  // For Model::forward only: records that `tokens` more positions were appended.
  void advance(int64_t tokens) { position_ += tokens; }
  // Back to the empty state (position 0, zero recurrent state); keeps the layout.
  void reset();

  // The state after the first `tokens` tokens. Attention-only models may snapshot any prefix
  // (K/V are truncated); a recurrent state cannot be rewound, so with linear layers `tokens` must
  // equal position(). kInvalidArgument otherwise.
  Result<std::vector<std::byte>> snapshot(int64_t tokens) const;
  Result<std::vector<std::byte>> snapshot() const { return snapshot(position_); }

  // Replaces this state with the blob's. The blob must come from the same model: kCorrupt for a
  // bad magic, truncation or checksum mismatch; kUnsupported for another format version;
  // kInvalidArgument for another model (fingerprint) or a layer layout/shape that differs from
  // this state's. On error the state is left unchanged.
  Status restore(std::span<const std::byte> blob);

 private:
  std::string fingerprint_;
  int64_t position_ = 0;
  std::vector<LayerState> layers_;
};

}  // namespace ft::engine

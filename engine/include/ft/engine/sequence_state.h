// Everything a model remembers about one sequence after position() tokens: the attention KV as a
// list of pages from the model's KV pool (kv_pool.h), and per linear-attention (Gated DeltaNet)
// layer the short-convolution and recurrent state, fp32 and fixed-size whatever the length
// (DeepSeek-V4's compressed layers keep their open windows' raw rows in one too: conv the kv rows,
// recurrent the gate rows; v4_attention_block.h). A Model creates an empty one (Model::new_state());
// Model::forward appends tokens at position().
//
// Snapshots are store checkpoints (state_checkpoint.h): the page list (shared, not copied) plus a
// copy of the linear states.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/engine/kv_pool.h"

namespace ft::engine {

// One Gated DeltaNet layer: conv [conv_dim, K-1] and recurrent [num_v_heads, head_k_dim,
// head_v_dim] (see ops_deltanet.h), for model layer `layer`, fp32 in the backend's memory. The
// memory is taken when the sequence first needs it (SequenceState::reserve or a restore), zeroed.
struct LinearState {
  int64_t layer = 0;
  std::vector<int64_t> conv_shape;
  std::vector<int64_t> recurrent_shape;
  MemoryBlock conv;       // conv_floats() floats once allocated
  MemoryBlock recurrent;  // recurrent_floats() floats once allocated

  std::size_t conv_floats() const;
  std::size_t recurrent_floats() const;
  float* conv_data() const { return conv.as<float>(); }
  float* recurrent_data() const { return recurrent.as<float>(); }
  bool allocated() const { return conv.data() != nullptr; }
};

class SequenceState {
 public:
  SequenceState() = default;
  // An empty state (position 0). `pool` may be null for a model without attention layers; the
  // linear states carry their shapes and get their memory from `memory` when first needed.
  SequenceState(std::string fingerprint, std::shared_ptr<KvPool> pool, std::vector<LinearState> linear,
                std::shared_ptr<Memory> memory = host_memory());

  const std::string& fingerprint() const { return fingerprint_; }
  int64_t position() const { return position_; }  // tokens consumed so far
  const KvPool* pool() const { return pool_.get(); }
  // Pages covering [0, position()) (more while a forward pass runs: see reserve()).
  std::span<const KvPageRef> pages() const { return pages_; }
  // The same pages as raw pointers, for the attention ops.
  std::span<std::byte* const> page_data() const { return page_data_; }
  std::vector<LinearState>& linear() { return linear_; }
  const std::vector<LinearState>& linear() const { return linear_; }
  // The memory the state lives in (the KV pool's and the linear states').
  Memory& memory() const { return *memory_; }
  // Memory this sequence holds: its pages (shared ones too) and linear states.
  std::size_t bytes() const;
  // Whether the state at an earlier position is still here: attention KV alone is (a position is
  // written once and later passes only append), a linear-attention state holds only its latest
  // position. A pass may then run past a wanted snapshot, taken afterwards (to_model_state).
  bool holds_earlier_positions() const { return linear_.empty(); }

  // For Model::forward. Makes positions [position(), position() + tokens) writable: allocates
  // the pages they need and replaces a page that a checkpoint still shares by a private copy (copy
  // on write), and the linear states' memory. kUnavailable when the KV budget or the memory is
  // used up (the state is still valid).
  Status reserve(int64_t tokens);
  // Gives the linear states their (zeroed) memory if they have none yet.
  Status allocate_linear();
  // Records that `tokens` more positions were written.
  void advance(int64_t tokens) { position_ += tokens; }
  // Back to the empty state (position 0, zero linear state, pages released); keeps the layout.
  void reset();

  // For restores: the state becomes `tokens` positions held in `pages` (which may be shared with
  // a checkpoint). The linear states are filled separately.
  void set_kv(std::vector<KvPageRef> pages, int64_t tokens);

 private:
  std::string fingerprint_;
  int64_t position_ = 0;
  std::shared_ptr<KvPool> pool_;
  std::vector<KvPageRef> pages_;
  std::vector<std::byte*> page_data_;
  std::vector<LinearState> linear_;
  std::shared_ptr<Memory> memory_;
};

}  // namespace ft::engine

// A live SequenceState as a store checkpoint and back. The chunk layout, per model layer in order:
//   attention: one kAttentionKv chunk, f32 [2, N, kv_heads, head_dim] (K rows, then V rows)
//   linear:    one kConv chunk (the conv state's shape) then one kRecurrent chunk (its shape)
// State is stored in the dtype it lives in (f32 on the CPU path) so a restore reproduces the
// exact numbers a full recompute would: restore + suffix == the whole sequence, bit for bit.
#pragma once

#include "ft/common/hash128.h"
#include "ft/common/result.h"
#include "ft/engine/model.h"
#include "ft/store/checkpoint_format.h"
#include "ft/store/state_tier.h"

namespace ft::engine {

// The store's identity of `model`: XXH3-128 of its fingerprint (config, tensor names, shapes,
// dtypes, sampled bytes) plus the state dtype and the checkpoint format version.
ModelFingerprint store_fingerprint(const Model& model);

// The state after its position() tokens, copied into a checkpoint.
store::ModelState to_model_state(const SequenceState& state, const ModelFingerprint& fingerprint);

// Reads the checkpoint under `key` from `tier` into `state` (streamed straight into the state's
// buffers). kNotFound: not held, corrupt or of another layout (all mean "recompute"); on any
// error `state` is reset to empty.
Status restore_model_state(store::StateTier& tier, const store::StoreKey& key, SequenceState& state);

}  // namespace ft::engine

// A live SequenceState as a store checkpoint and back. The chunk layout, in order:
//   one kKvPage chunk per KV page covering [0, N): `layer` = page index, shape
//     [attention layers, 2, kv_heads, page_tokens, head_dim] in the pool's dtype, the bytes of the
//     page itself (shared with the sequence, not copied; the last page's unused tail is zero)
//   per linear-attention layer: one kConv chunk (its shape) then one kRecurrent chunk, f32
// KV and state are stored in the dtype they live in, so a restore reproduces the exact numbers a
// full recompute would: restore + suffix == the whole sequence, bit for bit.
#pragma once

#include "ft/common/hash128.h"
#include "ft/common/result.h"
#include "ft/engine/model.h"
#include "ft/store/checkpoint_format.h"
#include "ft/store/state_tier.h"

namespace ft::engine {

// The store's identity of `model`: XXH3-128 of its fingerprint (config, tensor names, shapes,
// dtypes, sampled bytes) plus the state layout (KV dtype and page size) and the checkpoint format
// version. A checkpoint of another layout is therefore a miss, never a wrong restore.
ModelFingerprint store_fingerprint(const Model& model);

// The state after its position() tokens as a checkpoint: its pages shared, linear states copied.
store::ModelState to_model_state(const SequenceState& state, const ModelFingerprint& fingerprint);
// The same after its first `tokens` positions, for a pass that ran past a wanted snapshot: fewer
// than position() only where state.holds_earlier_positions() (kInvalidArgument otherwise, or
// outside [0, position()]). The last page also carries the later positions, which a restore
// never reads and overwrites as it goes on.
Result<store::ModelState> to_model_state(const SequenceState& state, const ModelFingerprint& fingerprint,
                                         std::int64_t tokens);

// Makes `state` the checkpoint `checkpoint` (from to_model_state of this model). Pages of this
// state's own pool are adopted, others copied. kNotFound when the layout differs; on any error
// `state` is reset to empty.
Status restore_from_model_state(const store::ModelState& checkpoint, SequenceState& state);

// Reads the checkpoint under `key` from `tier` into `state`: adopted from memory when the tier
// holds it there or loads it there (StateTier::load_shared: a chain with the GPU tier in front
// reads it from disk into that tier's pool pages once, and the sequence takes those), else
// streamed from the tier straight into fresh pages. kNotFound: not held,
// corrupt or of another layout (all mean "recompute"); kUnavailable: no KV budget left. On any
// error `state` is reset to empty.
Status restore_model_state(store::StateTier& tier, const store::StoreKey& key, SequenceState& state);

}  // namespace ft::engine

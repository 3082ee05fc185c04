// The CPU backend's Gated DeltaNet core (Backend::deltanet). Prefill and decode both take the
// recurrent form of the delta rule, token by token: its cost is small next to the projections
// (O(dk * dv) per token and head), and unlike the chunked form its rounding does not depend on where
// a sequence was split, so restore + suffix and batched runs give the same bits as one pass.
#pragma once

#include <span>

#include "ft/engine/backend.h"
#include "ft/engine/expert_kernels.h"

namespace ft::engine::cpu {

void deltanet(Scratch& scratch, CpuIsa isa, const ref::DeltaNetDims& dims, const DeltaNetParams& params,
              const float* qkv, const float* z, const float* b, const float* a, std::span<const DeltaNetSeq> seqs,
              float* out);

}  // namespace ft::engine::cpu

// DeepSeek-V4's kernels (v4_kernels.cu): the hyper-connections' collapse and write-back, the KV
// compressors' windows and the attention over the sliding window plus the compressed entries. Each
// is the device twin of its CPU reference (ops_hyper.h, ops_compressor.h, ops_v4_attention.h). The
// CSA indexer's scores are DeepSeek sparse attention's kernel (kernels.h indexer_scores, keys a
// compress rate apart); its top-k runs on the host as ref::top_k_positions
// (CudaBackend::v4_index_select). Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ft/engine/backend.h"
#include "kernels.h"

namespace ft::engine::cuda {

// ---- Hyper-connections --------------------------------------------------------------------------

// The most streams (hc_mult) the kernels take: hc_post keeps a column of them in registers.
inline constexpr int kHyperMaxStreams = 16;
bool hyper_fits(const HyperSpec& spec);
// ref::hc_pre over T tokens: x [T, D], post [T, N], comb [T, N, N]. One block a token.
void hc_pre(const float* h, const float* fn, const float* base, const float* scale, int T, const HyperSpec& spec,
            float* x, float* post, float* comb, cudaStream_t s);
// ref::hc_head: y [T, D].
void hc_head(const float* h, const float* fn, const float* base, const float* scale, int T, const HyperSpec& spec,
             float* y, cudaStream_t s);
// ref::hc_post: h_new [T, N, D] (may be h).
void hc_post(const float* h, const float* out, const float* post, const float* comb, int T, const HyperSpec& spec,
             float* h_new, cudaStream_t s);

// ---- Compressors --------------------------------------------------------------------------------

// One sequence of a v4_compress call (CompressorSeq's, device pointers to its rings).
struct CompressorSeqDev {
  int32_t row0 = 0;
  int32_t rows = 0;
  int64_t pos0 = 0;
  float* kv = nullptr;
  float* gate = nullptr;
  int64_t ld = 0;
};
// ref::compress_rows for every sequence of the call: entries [T, spec.width] (zeros on rows that
// close no window), then the rings updated with the last ring_tokens() rows of each sequence.
// row_seq [T]: each row's sequence, -1 for none. params' pointers are device memory.
void v4_compress(const CompressorSpec& spec, const CompressorParams& params, const float* kv, const float* gate,
                 const CompressorSeqDev* seqs, const int32_t* row_seq, int T, float* entries, cudaStream_t s);

// ---- Attention ----------------------------------------------------------------------------------

// ref::v4_attention for the rows of q [T, heads, head_dim] (row_seq / seqs / pages as
// paged_attention's): the window's keys from slot 0's K block, the entries from its V block at the
// positions closing them; picks [T, top_k] or null (HCA: every causal entry; sliding: none).
// max_keys: the most keys one row can have (window plus entries or picks), for shared memory.
// false: the layout or the key count does not fit the kernel.
bool v4_attention(const KvLayout& layout, int layer, const float* q, int T, const V4AttentionSpec& spec,
                  const float* sinks, const float* inv_freq, const int32_t* picks, int top_k, const int32_t* row_seq,
                  const AttnSeqDev* seqs, std::byte* const* pages, int max_keys, float* out, cudaStream_t s);

}  // namespace ft::engine::cuda

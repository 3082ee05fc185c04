// The reference ops' specs of a DeepSeek-V4 model (docs/deepseek-v4.md §2, §5) from its parsed
// config (ModelConfig::DeepseekV4 and the common fields it uses), so that whatever builds the
// family's layers, and its tests, take every dim and constant from one place.
#pragma once

#include <cstdint>

#include "ft/engine/model_config.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_dsa.h"
#include "ft/engine/ops_hyper.h"
#include "ft/engine/ops_moe.h"
#include "ft/engine/ops_v4_attention.h"

namespace ft::engine {

// Every hyper-connection's (attn_hc, ffn_hc, hc_head): N = hc_mult streams of hidden_size.
HyperSpec v4_hyper_spec(const ModelConfig& cfg);

// The "main" rope (compress false: sliding layers) or the "compress" one (CSA/HCA layers, their
// compressors and indexer) over the r roped dims alone: ref::rope_inv_freq of it gives the r / 2
// frequencies rope_tail, compress and v4_attention take. GPT-J pairs; YaRN (truncated) on the
// compress rope when the config has it; attention_factor 1.
ref::RopeSpec v4_rope_spec(const ModelConfig& cfg, bool compress);
// The rope of layer `layer`: main on a sliding_attention layer, compress otherwise.
ref::RopeSpec v4_layer_rope_spec(const ModelConfig& cfg, int64_t layer);

// Layer `layer`'s attention: H heads of head_dim reading the one K = V head, scale head_dim^-0.5,
// window sliding_window, rate its compress rate (0: a sliding_attention layer).
V4AttentionSpec v4_attention_spec(const ModelConfig& cfg, int64_t layer);

// Layer `layer`'s KV compressor: entries head_dim wide every m tokens, overlapping (two series) on
// CSA layers. Rate 0 on a sliding_attention layer, which has none.
CompressorSpec v4_compressor_spec(const ModelConfig& cfg, int64_t layer);
// The CSA indexer's own compressor of layer `layer`: index_head_dim wide, overlapping, the CSA rate.
// Rate 0 on a layer without an indexer (sliding or HCA).
CompressorSpec v4_index_compressor_spec(const ModelConfig& cfg, int64_t layer);
// The CSA indexer's scoring (index_n_heads, index_head_dim, index_topk).
IndexerSpec v4_indexer_spec(const ModelConfig& cfg);

// Every layer's router: scores sqrt(softplus) or sigmoid, no groups, the k picks' weights
// renormalised and times routed_scaling_factor. A "moe" layer's correction bias is its weights'
// to set; a "hash_moe" layer takes its picks from its table and only weighs them with this spec.
ref::RouterSpec v4_router_spec(const ModelConfig& cfg);
// The routed and shared experts' activation: silu(min(g, L)) * clamp(u, -L, L), L = swiglu_limit.
ref::ExpertGlu v4_expert_glu(const ModelConfig& cfg);

}  // namespace ft::engine

#include "blocks/v4_attention_block.h"

#include <algorithm>
#include <vector>

#include "ft/engine/deepseek_v4_specs.h"

namespace ft::engine::blocks {

V4AttentionBlockSpec v4_attention_block_spec(const ModelConfig& cfg, int64_t layer) {
  V4AttentionBlockSpec s;
  s.hidden = cfg.hidden_size;
  s.q_lora_rank = cfg.q_lora_rank;
  s.attention = v4_attention_spec(cfg, layer);
  s.rope = v4_layer_rope_spec(cfg, layer);
  s.o_groups = cfg.deepseek_v4.o_groups;
  s.o_lora_rank = cfg.deepseek_v4.o_lora_rank;
  s.eps = cfg.rms_norm_eps;
  s.compressor = v4_compressor_spec(cfg, layer);
  s.index_compressor = v4_index_compressor_spec(cfg, layer);
  s.indexer = v4_indexer_spec(cfg);
  s.indexer.kv_slot = 1;
  return s;
}

namespace {

Status load_compressor(const WeightLoader& w, const std::string& p, const CompressorSpec& spec, int64_t hidden,
                       Linear& wkv, Linear& wgate, Vector& position_bias, Vector& norm) {
  const int64_t row = int64_t(spec.row());
  FT_ASSIGN_OR_RETURN(wkv, w.linear(p + "wkv", row, hidden));
  FT_ASSIGN_OR_RETURN(wgate, w.linear(p + "wgate", row, hidden));
  FT_ASSIGN_OR_RETURN(position_bias, w.vector(p + "ape", {int64_t(spec.rate), row}));
  FT_ASSIGN_OR_RETURN(norm, w.vector(p + "norm.weight", {int64_t(spec.width)}));
  return Status::ok();
}

}  // namespace

Result<V4AttentionBlock> V4AttentionBlock::load(const WeightLoader& w, const std::string& prefix,
                                                const V4AttentionBlockSpec& spec) {
  if (!w.backend().has_v4_ops()) {
    return unsupported("DeepSeek-V4's attention (deepseek_v4) is not implemented on " + w.backend().device_name() +
                       ": use --device cpu");
  }
  V4AttentionBlock b;
  b.spec_ = spec;
  const int64_t H = int64_t(spec.attention.heads), d = int64_t(spec.attention.head_dim), D = spec.hidden;
  const int64_t QL = spec.q_lora_rank, G = spec.o_groups, R = spec.o_lora_rank;
  FT_ASSIGN_OR_RETURN(b.wq_a_, w.linear(prefix + "wq_a", QL, D));
  FT_ASSIGN_OR_RETURN(b.q_norm_, w.rms_norm(prefix + "q_norm.weight", QL, spec.eps, false));
  FT_ASSIGN_OR_RETURN(b.wq_b_, w.linear(prefix + "wq_b", H * d, QL));
  FT_ASSIGN_OR_RETURN(b.wkv_, w.linear(prefix + "wkv", d, D));
  const std::string kv_norm = w.has(prefix + "kv_norm.weight") ? "kv_norm.weight" : "norm.weight";
  FT_ASSIGN_OR_RETURN(b.kv_norm_, w.rms_norm(prefix + kv_norm, d, spec.eps, false));
  FT_ASSIGN_OR_RETURN(const Matrix wo_a, w.matrix(prefix + "wo_a.weight", {G * R, H * d / G}));
  for (int64_t g = 0; g < G; ++g) b.wo_a_.push_back(wo_a.rows_slice(g * R, R));
  FT_ASSIGN_OR_RETURN(b.wo_b_, w.linear(prefix + "wo_b", D, G * R));
  FT_ASSIGN_OR_RETURN(b.sinks_, w.vector(prefix + "attn_sink", {H}));
  FT_ASSIGN_OR_RETURN(b.ones_, w.place(std::vector<float>(std::size_t(d), 1.0f)));
  FT_ASSIGN_OR_RETURN(b.inv_freq_, w.place(ref::rope_inv_freq(spec.rope)));
  FT_ASSIGN_OR_RETURN(b.zeros_, w.place(std::vector<float>(std::size_t(b.kv_heads() * d), 0.0f)));
  if (spec.compressor.rate > 0) {
    Compressor& c = b.compressor_;
    FT_RETURN_IF_ERROR(
        load_compressor(w, prefix + "compressor.", spec.compressor, D, c.wkv, c.wgate, c.position_bias, c.norm));
  }
  if (spec.index_compressor.rate > 0) {
    Compressor& c = b.index_compressor_;
    FT_RETURN_IF_ERROR(load_compressor(w, prefix + "indexer.compressor.", spec.index_compressor, D, c.wkv, c.wgate,
                                       c.position_bias, c.norm));
    const int64_t Hi = int64_t(spec.indexer.heads), Di = int64_t(spec.indexer.head_dim);
    FT_ASSIGN_OR_RETURN(b.index_wq_b_, w.linear(prefix + "indexer.wq_b", Hi * Di, QL));
    FT_ASSIGN_OR_RETURN(b.index_weights_, w.linear(prefix + "indexer.weights_proj", Hi, D));
  }
  return b;
}

int64_t V4AttentionBlock::kv_heads() const {
  const int64_t d = head_dim(), Di = int64_t(spec_.indexer.head_dim);
  return 1 + (spec_.index_compressor.rate > 0 ? (Di + d - 1) / d : 0);
}

LinearState V4AttentionBlock::empty_state(int64_t layer) const {
  LinearState s;
  s.layer = layer;
  const int64_t rows = int64_t(spec_.compressor.ring_tokens()), ld = int64_t(ring_ld());
  s.conv_shape = {rows, ld};
  s.recurrent_shape = {rows, ld};
  return s;
}

void V4AttentionBlock::rope_tail(Backend& be, float* x, std::size_t T, std::size_t heads, std::size_t width,
                                 const int64_t* positions) const {
  // Backend::rope turns the first rotary_dim dims of every head_dim-wide head: started rope_dims
  // before the first head's end, the same stride turns each head's last rope_dims dims, and
  // nothing past the last head.
  ref::RopeSpec r = spec_.rope;
  r.head_dim = width;
  r.rotary_dim = spec_.attention.rope_dims;
  be.rope(x + (width - r.rotary_dim), T, heads, r, inv_freq_.data(), positions);
}

void V4AttentionBlock::compress(Backend& be, const Compressor& c, const CompressorSpec& spec, const float* x,
                                std::size_t T, std::span<const AttentionSeq> seqs, std::span<const DeltaNetSeq> states,
                                std::size_t column, float* entries) const {
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);
  const std::size_t row = spec.row();
  float* kv = s.floats(T * row);
  float* gate = s.floats(T * row);
  const Backend::LinearOut outs[] = {{&c.wkv.weight, nullptr, kv}, {&c.wgate.weight, nullptr, gate}};
  be.linears(x, T, outs);
  std::vector<CompressorSeq> rings(seqs.size());
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    rings[i] = {seqs[i].row0, seqs[i].rows, seqs[i].pos0, states[i].conv + column, states[i].recurrent + column,
                ring_ld()};
  }
  be.v4_compress(spec, {c.position_bias.data(), c.norm.data(), inv_freq_.data()}, kv, gate, rings, entries);
}

void V4AttentionBlock::forward(Backend& be, const KvLayout& kv, const float* x, std::size_t T,
                               std::span<const AttentionSeq> seqs, std::span<const DeltaNetSeq> states,
                               const int64_t* positions, float* out) const {
  const std::size_t H = spec_.attention.heads, d = spec_.attention.head_dim, QL = std::size_t(spec_.q_lora_rank);
  const std::size_t slots = std::size_t(kv_heads()), width = slots * d;
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);

  // The query (through its LoRA) and the one kv head, normed and roped.
  float* qa = s.floats(T * QL);
  float* kv_rows = s.floats(T * d);
  const Backend::LinearOut outs[] = {{&wq_a_.weight, nullptr, qa}, {&wkv_.weight, nullptr, kv_rows}};
  be.linears(x, T, outs);
  q_norm_.forward(be, qa, qa, T);
  float* q = s.floats(T * H * d);
  wq_b_.forward(be, qa, q, T);
  be.rms_norm(q, ones_.data(), q, T * H, d, spec_.eps, false);
  rope_tail(be, q, T, H, d, positions);
  kv_norm_.forward(be, kv_rows, kv_rows, T);
  rope_tail(be, kv_rows, T, 1, d, positions);

  // Each position's page rows (v4_attention_block.h): the kv row, the entries it closes.
  float* k_page = s.floats(T * width);
  float* v_page = s.floats(T * width);
  be.copy_columns(kv_rows, d, 1, k_page, width, T, d);
  if (slots > 1) {
    be.copy_columns(zeros_.data(), 0, T, k_page + d, width, T, width - d);
    be.copy_columns(zeros_.data(), 0, T, v_page + d, width, T, width - d);
  }
  if (spec_.compressor.rate > 0) {
    float* entries = s.floats(T * d);
    compress(be, compressor_, spec_.compressor, x, T, seqs, states, 0, entries);
    be.copy_columns(entries, d, 1, v_page, width, T, d);
  } else {
    be.copy_columns(zeros_.data(), 0, T, v_page, width, T, d);
  }
  const std::size_t top_k = spec_.indexer.top_k;
  int32_t* picks = nullptr;
  if (spec_.index_compressor.rate > 0) {
    const std::size_t Di = spec_.indexer.head_dim, Hi = spec_.indexer.heads;
    float* keys = s.floats(T * Di);
    compress(be, index_compressor_, spec_.index_compressor, x, T, seqs, states, spec_.compressor.row(), keys);
    be.copy_columns(keys, Di, 1, k_page + d, width, T, Di);
    be.kv_write(kv, kv_layer_, k_page, v_page, seqs);
    float* qi = s.floats(T * Hi * Di);
    float* weights = s.floats(T * Hi);
    index_wq_b_.forward(be, qa, qi, T);
    rope_tail(be, qi, T, Hi, Di, positions);
    index_weights_.forward(be, x, weights, T);
    picks = s.take<int32_t>(T * top_k);
    be.v4_index_select(kv, kv_layer_, qi, weights, spec_.indexer, spec_.index_compressor.rate, seqs, picks);
  } else {
    be.kv_write(kv, kv_layer_, k_page, v_page, seqs);
  }
  float* o = s.floats(T * H * d);
  be.v4_attention(kv, kv_layer_, q, spec_.attention, sinks_.data(), inv_freq_.data(), seqs, picks, top_k, o);

  // wo_a's groups, each on its contiguous slice of the heads' outputs, side by side; then wo_b.
  const std::size_t G = std::size_t(spec_.o_groups), R = std::size_t(spec_.o_lora_rank), cols = H * d / G;
  float* slice = s.floats(T * cols);
  float* part = s.floats(T * R);
  float* grouped = s.floats(T * G * R);
  for (std::size_t g = 0; g < G; ++g) {
    be.copy_columns(o + g * cols, H * d, 1, slice, cols, T, cols);
    be.linear(slice, T, wo_a_[g], nullptr, part);
    be.copy_columns(part, R, 1, grouped + g * R, G * R, T, R);
  }
  wo_b_.forward(be, grouped, out, T);
}

}  // namespace ft::engine::blocks

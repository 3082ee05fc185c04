#include "blocks/moe_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ft::engine::blocks {

Result<MoeBlock> MoeBlock::load(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec) {
  MoeBlock b;
  MoeWeights& m = b.w_;
  m.router_spec = spec.router;
  m.hidden = spec.hidden;
  const int64_t E = int64_t(spec.router.num_experts), H = spec.hidden, I = spec.moe_inter;
  if (spec.gpt_oss) {
    FT_RETURN_IF_ERROR(b.load_gpt_oss_experts(w, prefix, spec));
    return b;
  }
  if (spec.llama4) {
    FT_RETURN_IF_ERROR(b.load_llama4_experts(w, prefix, spec));
    return b;
  }
  FT_ASSIGN_OR_RETURN(m.router, w.matrix(prefix + spec.router_name, {E, H}));
  m.glu = spec.glu;
  if (spec.gemma4) {
    FT_ASSIGN_OR_RETURN(Vector scale, w.vector(prefix + "router.scale", {H}));
    std::vector<float> norm(scale.host);
    const float root = 1.0f / std::sqrt(float(H));  // HF scalar_root_size
    for (float& v : norm) v *= root;
    FT_ASSIGN_OR_RETURN(b.router_norm_, w.place(std::move(norm)));
    b.router_norm_eps_ = spec.router_norm_eps;
    FT_ASSIGN_OR_RETURN(b.per_expert_scale_, w.vector(prefix + "router.per_expert_scale", {E}));
    m.router_spec.per_expert_scale = b.per_expert_scale_.data();
  }
  if (spec.correction_bias) {
    std::string name = prefix + spec.correction_bias_names.front();
    for (const std::string& n : spec.correction_bias_names) {
      if (w.has(prefix + n)) {
        name = prefix + n;
        break;
      }
    }
    const std::vector<int64_t> shape =
        spec.correction_bias_one_row ? std::vector<int64_t>{1, E} : std::vector<int64_t>{E};
    FT_ASSIGN_OR_RETURN(b.correction_bias_, w.vector(name, shape));
    m.router_spec.correction_bias = b.correction_bias_.data();
  }
  m.experts.resize(std::size_t(E));
  const WeightLoader x = w.experts();  // routed experts: maybe left in host memory (offload)
  if (w.has(prefix + "experts.gate_up_proj")) {
    const std::string gate_up = prefix + "experts.gate_up_proj", down = prefix + "experts.down_proj";
    for (int64_t e = 0; e < E; ++e) {
      SwiGluMatrices& ex = m.experts[std::size_t(e)];
      FT_ASSIGN_OR_RETURN(ex.gate, x.slice(gate_up, {E, 2 * I, H}, e, 0, I));
      FT_ASSIGN_OR_RETURN(ex.up, x.slice(gate_up, {E, 2 * I, H}, e, I, I));
      FT_ASSIGN_OR_RETURN(ex.down, x.slice(down, {E, H, I}, e, 0, H));
    }
  } else if (w.has(prefix + "experts.0.w1.weight")) {  // Mixtral's names: w1 gate, w3 up, w2 down
    for (int64_t e = 0; e < E; ++e) {
      const std::string n = prefix + "experts." + std::to_string(e) + ".";
      SwiGluMatrices& m_e = m.experts[std::size_t(e)];
      FT_ASSIGN_OR_RETURN(m_e.gate, x.matrix(n + "w1.weight", {I, H}));
      FT_ASSIGN_OR_RETURN(m_e.up, x.matrix(n + "w3.weight", {I, H}));
      FT_ASSIGN_OR_RETURN(m_e.down, x.matrix(n + "w2.weight", {H, I}));
    }
  } else {
    for (int64_t e = 0; e < E; ++e) {
      FT_ASSIGN_OR_RETURN(m.experts[std::size_t(e)], x.swiglu(prefix + "experts." + std::to_string(e) + ".", H, I));
    }
  }
  if (spec.deepseek_v4) {
    FT_RETURN_IF_ERROR(b.load_deepseek_v4(w, prefix, spec));
    return b;
  }
  if (spec.shared_inter > 0 && spec.shared_gated) {
    m.has_shared = true;
    FT_ASSIGN_OR_RETURN(m.shared, w.swiglu(prefix + "shared_expert.", H, spec.shared_inter));
    FT_ASSIGN_OR_RETURN(m.shared_gate, w.matrix(prefix + "shared_expert_gate.weight", {1, H}));
  } else if (spec.shared_inter > 0) {
    m.has_shared = true;
    m.shared_gated = false;
    FT_ASSIGN_OR_RETURN(m.shared, w.swiglu(prefix + spec.ungated_shared_name, H, spec.shared_inter));
  }
  return b;
}

void MoeBlock::forward(Backend& be, const float* x, float* out, std::size_t T, const float* residual,
                       const int32_t* ids) const {
  if (clamped_shared_) {
    if (!hash_table_.empty()) {
      const std::size_t K = w_.router_spec.top_k;
      std::vector<int32_t> chosen(T * K);
      for (std::size_t t = 0; t < T; ++t)
        std::copy_n(hash_table_.data() + std::size_t(ids[t]) * K, K, chosen.data() + t * K);
      be.moe_chosen(w_, x, T, chosen.data(), out);
    } else {
      be.moe(w_, x, T, out, nullptr);
    }
    Scratch::Frame frame(be.scratch());
    float* shared = be.scratch().floats(T * std::size_t(w_.hidden));
    clamped_shared_->forward(be, x, shared, T);
    be.add(out, shared, T * std::size_t(w_.hidden));
    return;
  }
  if (!router_norm_.empty()) {
    Scratch::Frame frame(be.scratch());
    float* router_x = be.scratch().floats(T * std::size_t(w_.hidden));
    be.rms_norm(residual, router_norm_.data(), router_x, T, std::size_t(w_.hidden), router_norm_eps_, false);
    be.moe(w_, x, T, out, router_x);
    return;
  }
  if (!input_shared_) {
    be.moe(w_, x, T, out, nullptr);
    return;
  }
  // Llama 4 (moe_block.h): the routed expert on the rows scaled by their top-1 score, then the
  // shared expert on the rows as they are.
  const std::size_t H = std::size_t(w_.hidden), E = w_.experts.size();
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);
  float* logits = s.floats(T * E);
  float* scaled = s.floats(T * H);
  be.linear(x, T, w_.router, nullptr, logits);
  be.scale_by_top_sigmoid(x, logits, T, H, E, scaled);
  be.moe(w_, scaled, T, out, nullptr);
  float* shared = s.floats(T * H);
  input_shared_->forward(be, x, shared, T);
  be.add(out, shared, T * H);
}

Status MoeBlock::load_deepseek_v4(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec) {
  const int64_t H = spec.hidden, I = spec.shared_inter, E = int64_t(spec.router.num_experts),
                K = int64_t(spec.router.top_k);
  const std::string sp = prefix + "shared_experts.";
  SwiGluMatrices m;
  if (w.has(sp + "w1.weight")) {  // the releases' and HF 5.17's saved names: w1 gate, w3 up, w2 down
    FT_ASSIGN_OR_RETURN(m.gate, w.matrix(sp + "w1.weight", {I, H}));
    FT_ASSIGN_OR_RETURN(m.up, w.matrix(sp + "w3.weight", {I, H}));
    FT_ASSIGN_OR_RETURN(m.down, w.matrix(sp + "w2.weight", {H, I}));
  } else {
    FT_ASSIGN_OR_RETURN(m, w.swiglu(sp, H, I));
  }
  SwiGlu shared(m);
  shared.glu = spec.glu;
  clamped_shared_.emplace(std::move(shared));
  if (spec.hash_vocab <= 0) return Status::ok();
  FT_ASSIGN_OR_RETURN(const TensorView table,
                      w.checkpoint().tensor(w.full_name(prefix + "gate.tid2eid"), {spec.hash_vocab, K}));
  if (table.dtype != DType::kI64 && table.dtype != DType::kI32) {
    return unsupported("tensor '" + table.name + "' has dtype " + dtype_name(table.dtype) +
                       "; a hash routing table is I64 or I32");
  }
  hash_table_.resize(std::size_t(spec.hash_vocab * K));
  for (std::size_t i = 0; i < hash_table_.size(); ++i) {
    int64_t e = 0;
    if (table.dtype == DType::kI64) {
      std::memcpy(&e, table.data + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, table.data + 4 * i, 4);
      e = v;
    }
    if (e < 0 || e >= E) {
      return invalid_argument("tensor '" + table.name + "' routes token " + std::to_string(i / std::size_t(K)) +
                              " to expert " + std::to_string(e) + " of " + std::to_string(E));
    }
    hash_table_[i] = int32_t(e);
  }
  return Status::ok();
}

Status MoeBlock::load_llama4_experts(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec) {
  MoeWeights& m = w_;
  const int64_t E = int64_t(spec.router.num_experts), H = spec.hidden;
  if (spec.router.top_k != 1) return unsupported("Llama 4 experts: only top-1 routing is supported");
  // The top-1 weight of a renormalised softmax is exactly 1: the expert's output joins unweighted.
  m.router_spec.scoring = ref::RouterScoring::kSoftmax;
  m.router_spec.renormalize = true;
  FT_ASSIGN_OR_RETURN(m.router, w.matrix(prefix + "router.weight", {E, H}));
  FT_RETURN_IF_ERROR(load_transposed_experts(w, prefix, spec, /*interleaved=*/false));
  FT_ASSIGN_OR_RETURN(SwiGluMatrices shared, w.swiglu(prefix + "shared_expert.", H, spec.shared_inter));
  input_shared_.emplace(shared);
  return Status::ok();
}

Status MoeBlock::load_gpt_oss_experts(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec) {
  MoeWeights& m = w_;
  const int64_t E = int64_t(spec.router.num_experts), H = spec.hidden, I = spec.moe_inter;
  FT_ASSIGN_OR_RETURN(m.router, w.matrix(prefix + "router.weight", {E, H}));
  FT_ASSIGN_OR_RETURN(router_bias_, w.vector(prefix + "router.bias", {E}));
  m.router_bias = router_bias_.data();
  m.glu = spec.glu;
  if (w.has(prefix + "experts.gate_proj_bias")) {
    // A GGUF's layout: the converter split gate and up (weights and biases), each expert [out, in].
    FT_ASSIGN_OR_RETURN(gate_bias_, w.vector(prefix + "experts.gate_proj_bias", {E, I}));
    FT_ASSIGN_OR_RETURN(up_bias_, w.vector(prefix + "experts.up_proj_bias", {E, I}));
    FT_ASSIGN_OR_RETURN(down_bias_, w.vector(prefix + "experts.down_proj_bias", {E, H}));
    m.gate_bias = gate_bias_.data();
    m.up_bias = up_bias_.data();
    m.down_bias = down_bias_.data();
    m.host_gate_bias = gate_bias_.host.data();
    m.host_up_bias = up_bias_.host.data();
    m.host_down_bias = down_bias_.host.data();
    m.experts.resize(std::size_t(E));
    const WeightLoader x = w.experts();
    for (int64_t e = 0; e < E; ++e) {
      FT_ASSIGN_OR_RETURN(m.experts[std::size_t(e)], x.swiglu(prefix + "experts." + std::to_string(e) + ".", H, I));
    }
    return Status::ok();
  }
  // Biases: gate_up's interleaved into gate and up halves.
  FT_ASSIGN_OR_RETURN(Vector gate_up_bias, w.vector(prefix + "experts.gate_up_proj_bias", {E, 2 * I}));
  std::vector<float> gate_bias(std::size_t(E * I)), up_bias(std::size_t(E * I));
  for (std::size_t i = 0; i < gate_bias.size(); ++i) {
    gate_bias[i] = gate_up_bias.host[2 * i];
    up_bias[i] = gate_up_bias.host[2 * i + 1];
  }
  FT_ASSIGN_OR_RETURN(gate_bias_, w.place(std::move(gate_bias)));
  FT_ASSIGN_OR_RETURN(up_bias_, w.place(std::move(up_bias)));
  FT_ASSIGN_OR_RETURN(down_bias_, w.vector(prefix + "experts.down_proj_bias", {E, H}));
  m.gate_bias = gate_bias_.data();
  m.up_bias = up_bias_.data();
  m.down_bias = down_bias_.data();
  m.host_gate_bias = gate_bias_.host.data();
  m.host_up_bias = up_bias_.host.data();
  m.host_down_bias = down_bias_.host.data();
  return load_transposed_experts(w, prefix, spec, /*interleaved=*/true);
}

Status MoeBlock::load_transposed_experts(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec,
                                         bool interleaved) {
  const int64_t E = int64_t(spec.router.num_experts), H = spec.hidden, I = spec.moe_inter;
  w_.experts.resize(std::size_t(E));
  const WeightLoader x = w.experts();
  const std::string gate_up = prefix + "experts.gate_up_proj", down = prefix + "experts.down_proj";
  // gate and up: columns 0, 2, 4, ... and 1, 3, 5, ... (interleaved), or the two halves.
  const int64_t up0 = interleaved ? 1 : I, step = interleaved ? 2 : 1;
  // gpt-oss's MXFP4 safetensors: the checkpoint presents gate_up's interleaved rows as gate_proj
  // and up_proj (quantized_safetensors.h), [out, in] like down: all read in place.
  if (interleaved && w.has(prefix + "experts.gate_proj") && w.has(prefix + "experts.up_proj")) {
    for (int64_t e = 0; e < E; ++e) {
      SwiGluMatrices& ex = w_.experts[std::size_t(e)];
      FT_ASSIGN_OR_RETURN(ex.gate, x.slice(prefix + "experts.gate_proj", {E, I, H}, e, 0, I));
      FT_ASSIGN_OR_RETURN(ex.up, x.slice(prefix + "experts.up_proj", {E, I, H}, e, 0, I));
      FT_ASSIGN_OR_RETURN(ex.down, x.slice(down, {E, H, I}, e, 0, H));
    }
    return Status::ok();
  }
  // Block dtypes (a GGUF's) are stored [out, in] already: gate and up are rows, down is read in
  // place.
  FT_ASSIGN_OR_RETURN(const TensorView stored, w.checkpoint().tensor(w.full_name(gate_up)));
  if (dtype_is_block(stored.dtype)) {
    for (int64_t e = 0; e < E; ++e) {
      SwiGluMatrices& ex = w_.experts[std::size_t(e)];
      FT_ASSIGN_OR_RETURN(ex.gate, x.strided_rows(gate_up, {E, 2 * I, H}, e, 0, step, I));
      FT_ASSIGN_OR_RETURN(ex.up, x.strided_rows(gate_up, {E, 2 * I, H}, e, up0, step, I));
      FT_ASSIGN_OR_RETURN(ex.down, x.slice(down, {E, H, I}, e, 0, H));
    }
    return Status::ok();
  }
  for (int64_t e = 0; e < E; ++e) {
    SwiGluMatrices& ex = w_.experts[std::size_t(e)];
    FT_ASSIGN_OR_RETURN(ex.gate, x.transposed(gate_up, {E, H, 2 * I}, e, 0, step, I));
    FT_ASSIGN_OR_RETURN(ex.up, x.transposed(gate_up, {E, H, 2 * I}, e, up0, step, I));
    FT_ASSIGN_OR_RETURN(ex.down, x.transposed(down, {E, I, H}, e, 0, 1));
  }
  return Status::ok();
}

}  // namespace ft::engine::blocks

#include "blocks/moe_block.h"

namespace ft::engine::blocks {

Result<MoeBlock> MoeBlock::load(const WeightLoader& w, const std::string& prefix, const MoeSpec& spec) {
  MoeBlock b;
  MoeWeights& m = b.w_;
  m.router_spec = spec.router;
  m.hidden = spec.hidden;
  const int64_t E = int64_t(spec.router.num_experts), H = spec.hidden, I = spec.moe_inter;
  FT_ASSIGN_OR_RETURN(m.router, w.matrix(prefix + spec.router_name, {E, H}));
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

}  // namespace ft::engine::blocks

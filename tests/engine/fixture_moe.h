// Layer 1's MoE of the llama.cpp-made GGUF fixture qwen3_moe-mixed.gguf (4 experts, top 2, hidden
// 256): Q4_K gate, Q5_K up (or, with gate_as_up, the next expert's Q4_K gate: a layer every integer
// kernel takes), Q6_K down. Views into `ckpt`, which must outlive them.
#pragma once

#include <filesystem>
#include <string>

#include "ft/engine/backend.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/matrix.h"

namespace ft::test {

inline std::filesystem::path mixed_gguf_fixture() {
  return std::filesystem::path(FT_FIXTURES_DIR) / "gguf" / "models" / "qwen3_moe-mixed.gguf";
}

inline engine::MoeWeights fixture_moe(const engine::Checkpoint& ckpt, bool gate_as_up = false) {
  const auto view = [&](const std::string& name) { return engine::matrix_view(*ckpt.tensor(name)); };
  engine::MoeWeights w;
  w.hidden = 256;
  w.router_spec.num_experts = 4;
  w.router_spec.top_k = 2;
  w.router = view("model.layers.1.mlp.gate.weight");
  for (int e = 0; e < 4; ++e) {
    const std::string p = "model.layers.1.mlp.experts." + std::to_string(e) + ".";
    const std::string up = gate_as_up
                               ? "model.layers.1.mlp.experts." + std::to_string((e + 1) % 4) + ".gate_proj.weight"
                               : p + "up_proj.weight";
    w.experts.push_back({view(p + "gate_proj.weight"), view(up), view(p + "down_proj.weight")});
  }
  return w;
}

}  // namespace ft::test

// Golden fixtures' weights as a recipe, not bytes (scripts/goldens/golden_weights.py, which this
// implements bit for bit): weights.json lists each tensor of the checkpoint HF saved (name,
// dtype, shape) with the offset and scale of its values, drawn from a counter-based generator.
// A fixture then holds a few KB of recipe instead of megabytes of random bf16, and a test
// rebuilds the exact checkpoint the reference logits were computed from.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

#include "ft/common/result.h"

namespace ft::test {

std::uint64_t golden_tensor_seed(std::string_view name, std::uint64_t base_seed);
// Uniform in [-sqrt(3), sqrt(3)): unit variance. The i-th draw of a tensor's stream.
double golden_uniform(std::uint64_t seed, std::uint64_t i);
// Writes `dir`/model.safetensors from a weights.json manifest:
//   {"seed": S, "tensors": [{"name", "dtype": "BF16"|"F32", "shape": [...], "offset", "scale"}]}
// and index tables (DeepSeek-V4's hash routing) as their values: {"name", "dtype": "I64"|"I32",
// "shape", "values": [...]}.
Status write_golden_weights(const nlohmann::json& manifest, const std::filesystem::path& dir);

}  // namespace ft::test

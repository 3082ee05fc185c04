#include "golden_weights.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "ft/engine/bf16.h"
#include "ft/engine/checkpoint.h"

namespace ft::test {

std::uint64_t golden_tensor_seed(std::string_view name, std::uint64_t base_seed) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (const char c : name) h = (h ^ std::uint8_t(c)) * 0x100000001B3ull;
  return h ^ base_seed;
}

double golden_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = (seed ^ (i * 0xD1B54A32D192ED03ull)) + 0x9E3779B97F4A7C15ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double unit = double(z >> 11) * 0x1p-53;
  return (2.0 * unit - 1.0) * std::sqrt(3.0);
}

Status write_golden_weights(const nlohmann::json& manifest, const std::filesystem::path& dir) {
  const std::uint64_t base = manifest.at("seed").get<std::uint64_t>();
  std::vector<engine::OwnedTensor> tensors;
  for (const nlohmann::json& e : manifest.at("tensors")) {
    engine::OwnedTensor t;
    t.name = e.at("name").get<std::string>();
    t.shape = e.at("shape").get<std::vector<int64_t>>();
    const std::string dtype = e.at("dtype").get<std::string>();
    std::uint64_t n = 1;
    for (const int64_t d : t.shape) n *= std::uint64_t(d);
    if (dtype == "I64" || dtype == "I32") {  // an index table (hash routing), kept as its values
      const auto values = e.at("values").get<std::vector<int64_t>>();
      if (values.size() != n) return invalid_argument("weights.json: " + t.name + " lists the wrong number of values");
      const bool wide = dtype == "I64";
      t.dtype = wide ? engine::DType::kI64 : engine::DType::kI32;
      t.data.resize(n * (wide ? 8 : 4));
      for (std::uint64_t i = 0; i < n; ++i) {
        if (wide) {
          std::memcpy(t.data.data() + 8 * i, &values[i], 8);
        } else {
          const auto v = std::int32_t(values[i]);
          std::memcpy(t.data.data() + 4 * i, &v, 4);
        }
      }
      tensors.push_back(std::move(t));
      continue;
    }
    if (dtype != "BF16" && dtype != "F32") return invalid_argument("weights.json: " + t.name + " has dtype " + dtype);
    t.dtype = dtype == "BF16" ? engine::DType::kBF16 : engine::DType::kF32;
    const double offset = e.at("offset").get<double>(), scale = e.at("scale").get<double>();
    const std::uint64_t seed = golden_tensor_seed(t.name, base);
    t.data.resize(n * (t.dtype == engine::DType::kBF16 ? 2 : 4));
    for (std::uint64_t i = 0; i < n; ++i) {
      const float v = float(offset + scale * golden_uniform(seed, i));
      if (t.dtype == engine::DType::kBF16) {
        const engine::bf16_t b = engine::f32_to_bf16(v);
        std::memcpy(t.data.data() + 2 * i, &b, 2);
      } else {
        std::memcpy(t.data.data() + 4 * i, &v, 4);
      }
    }
    tensors.push_back(std::move(t));
  }
  std::filesystem::create_directories(dir);
  return engine::write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace ft::test

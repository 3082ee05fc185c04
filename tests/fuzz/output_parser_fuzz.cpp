// libFuzzer target for the streaming output parsers. The first input bytes choose the family, the
// options and the split points; the rest is the model output. Every family parser must keep the
// invariants in output_parser_invariants.h on every input; a violation aborts with a description.
//   cmake -DFT_FUZZ=ON … && ./ft_output_parser_fuzz -max_total_time=60 corpus/
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "output_parser_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const char* const kFamilies[] = {"qwen3", "qwen3_coder", "deepseek_v3", "gpt-oss", "glm4.5"};
  if (size < 3) return 0;
  const std::uint8_t family_byte = data[0];
  const std::uint8_t options_byte = data[1];
  const std::uint8_t split_seed = data[2];
  std::string_view input(reinterpret_cast<const char*>(data + 3), size - 3);

  ft::protocol::OutputParserOptions options;
  options.starts_in_reasoning = (options_byte & 1) != 0;
  if (options_byte & 2) {
    options.tools = {{"f", R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},)"
                           R"("c":{"type":"object"},"d":{"type":"boolean"},"e":{"type":"number"}}})"}};
  }
  // Split points from a tiny LCG seeded by the input: reproducible from the crash file alone.
  std::vector<std::size_t> cuts;
  std::uint32_t x = split_seed * 2654435761u + 1;
  std::size_t n_cuts = input.empty() ? 0 : (split_seed % 8);
  for (std::size_t i = 0; i < n_cuts; ++i) {
    x = x * 1664525u + 1013904223u;
    cuts.push_back(x % (input.size() + 1));
  }
  std::sort(cuts.begin(), cuts.end());

  const char* family = kFamilies[family_byte % (sizeof(kFamilies) / sizeof(kFamilies[0]))];
  std::string err = ft::fuzz::check_invariants(family, input, cuts, options);
  if (!err.empty()) {
    std::fprintf(stderr, "output parser invariant violated (%s): %s\n", family, err.c_str());
    std::abort();
  }
  return 0;
}

// The factory: family names (as users and model configs spell them) to parsers.
#include "ft/protocol/output_parser.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "output_parser/families.h"

namespace ft::protocol {
namespace {

using Maker = std::unique_ptr<StreamParser> (*)(OutputParserOptions);

struct Family {
  std::string_view name;  // normalised: lower case, '-' → '_'
  Maker make;
  bool canonical;  // listed by output_parser_families()
};

constexpr std::array<Family, 17> kFamilies = {{
    {"qwen3", detail::make_qwen_parser, true},
    {"qwen3_coder", detail::make_qwen_parser, true},
    {"qwen3.5", detail::make_qwen_parser, true},
    {"qwen3.6", detail::make_qwen_parser, true},
    {"qwen3_5", detail::make_qwen_parser, false},
    {"qwen3_6", detail::make_qwen_parser, false},
    {"deepseek_v3", detail::make_deepseek_parser, true},
    {"deepseek_v3.1", detail::make_deepseek_parser, true},
    {"deepseek_r1", detail::make_deepseek_parser, true},
    {"gpt_oss", detail::make_harmony_parser, true},
    {"harmony", detail::make_harmony_parser, false},
    {"glm4.5", detail::make_glm_parser, true},
    {"glm", detail::make_glm_parser, false},
    {"glm4.6", detail::make_glm_parser, false},
    {"glm4.7", detail::make_glm_parser, false},
    {"glm4_moe", detail::make_glm_parser, false},
    {"plain", detail::make_plain_parser, true},
}};

std::string normalise(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) out.push_back(c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

}  // namespace

Result<std::unique_ptr<StreamParser>> make_output_parser(std::string_view family, OutputParserOptions options) {
  std::string key = normalise(family);
  for (const Family& f : kFamilies) {
    if (f.name == key) return f.make(std::move(options));
  }
  std::string known;
  for (const std::string& name : output_parser_families()) known += (known.empty() ? "" : ", ") + name;
  return invalid_argument("unknown output parser family '" + std::string(family) + "' (known: " + known + ")");
}

std::vector<std::string> output_parser_families() {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) {
    if (!f.canonical) continue;
    std::string n(f.name);
    if (n == "gpt_oss") n = "gpt-oss";  // as OpenAI spells it
    names.push_back(std::move(n));
  }
  return names;
}

std::string output_parser_for(std::string_view model_family, std::span<const std::string> template_markers) {
  const auto teaches = [&](std::string_view marker) {
    return std::find(template_markers.begin(), template_markers.end(), marker) != template_markers.end();
  };
  const std::string family = normalise(model_family);
  // The template's markup first: it is what the model was trained to write.
  if (teaches("<|channel|>")) return "gpt_oss";
  if (teaches("<｜tool▁calls▁begin｜>")) return "deepseek_v3";
  if (teaches("<arg_key>")) return "glm4.5";
  if (teaches("<tool_call>")) return family == "qwen3_5_moe" ? "qwen3.5" : "qwen3";
  // A template without tool markup (or none read): the engine's family, where it names one.
  if (family == "qwen3_moe" || family == "qwen3_next" || family == "qwen2_moe") return "qwen3";
  if (family == "qwen3_5_moe") return "qwen3.5";
  if (family == "deepseek_v3") return "deepseek_v3";
  if (family == "glm4_moe" || family == "glm4_moe_lite") return "glm4.5";  // GLM-4.5 to 4.7
  if (family == "gpt_oss") return "gpt_oss";
  return "";
}

Result<ParsedOutput> parse_output(std::string_view family, std::string_view text, OutputParserOptions options) {
  auto parser = make_output_parser(family, std::move(options));
  if (!parser.is_ok()) return parser.status();
  (*parser)->feed(text);
  (*parser)->finish();
  return (*parser)->result();
}

}  // namespace ft::protocol

// The factory: family names (as users and model configs spell them) to parsers.
#include <array>
#include <cctype>

#include "ft/protocol/output_parser.h"
#include "output_parser/families.h"

namespace ft::protocol {
namespace {

using Maker = std::unique_ptr<StreamParser> (*)(OutputParserOptions);

struct Family {
  std::string_view name;  // normalised: lower case, '-' → '_'
  Maker make;
  bool canonical;  // listed by output_parser_families()
};

constexpr std::array<Family, 16> kFamilies = {{
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

Result<ParsedOutput> parse_output(std::string_view family, std::string_view text, OutputParserOptions options) {
  auto parser = make_output_parser(family, std::move(options));
  if (!parser.is_ok()) return parser.status();
  (*parser)->feed(text);
  (*parser)->finish();
  return (*parser)->result();
}

}  // namespace ft::protocol

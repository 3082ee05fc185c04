// Qwen3-Coder / Qwen3.5 / Qwen3.6 XML-style tool calls:
//   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n…</function>\n</tool_call>
// Values are raw text (code, paths, JSON) typed through the tool schema afterwards. The details
// follow vLLM's qwen3coder parser, which is what the model was evaluated with: exactly one newline
// is trimmed on each side of a value, a value also ends at the next "<parameter=" or at
// "</function>" when the model forgot "</parameter>", and text between parameters is ignored.
#include <vector>

#include "output_parser/tagged_parser.h"

namespace ft::protocol::detail {
namespace {

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";

std::string_view trim_one_newline(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return v;
}

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c == '<' || c == '>' || c == '\n' || c == '\r') return false;
  }
  return true;
}

}  // namespace

// `fn` starts with "<function=" and holds the whole function (its close tag optional).
// Returns false when it is not a well-formed call.
bool parse_qwen_function(std::string_view fn, const ToolSchemas& schemas, std::string& name,
                         std::string& arguments_json) {
  std::size_t name_end = fn.find('>', kFunctionOpen.size());
  if (name_end == std::string_view::npos) return false;
  std::string_view fname = trim_ws(fn.substr(kFunctionOpen.size(), name_end - kFunctionOpen.size()));
  if (!valid_name(fname)) return false;
  std::string_view body = fn.substr(name_end + 1);
  if (std::size_t close = body.find(kFunctionClose); close != std::string_view::npos) {
    if (!trim_ws(body.substr(close + kFunctionClose.size())).empty()) return false;  // two functions?
    body = body.substr(0, close);
  }
  std::vector<std::pair<std::string, std::string>> params;
  std::size_t i = 0;
  while (true) {
    std::size_t p = body.find(kParamOpen, i);
    if (p == std::string_view::npos) break;
    std::size_t pname_end = body.find('>', p + kParamOpen.size());
    if (pname_end == std::string_view::npos) return false;
    std::string_view pname = trim_ws(body.substr(p + kParamOpen.size(), pname_end - p - kParamOpen.size()));
    if (!valid_name(pname)) return false;
    std::size_t vstart = pname_end + 1;
    std::size_t close = body.find(kParamClose, vstart);
    std::size_t next = body.find(kParamOpen, vstart);
    std::size_t vend = std::min({close, next, body.size()});
    params.emplace_back(std::string(pname), std::string(trim_one_newline(body.substr(vstart, vend - vstart))));
    i = vend == close ? close + kParamClose.size() : vend;
  }
  name.assign(fname);
  arguments_json = arguments_from_raw_params(fname, params, RawValueStyle::kQwenCoder, schemas);
  return true;
}

Block parse_qwen_xml_call(std::string_view s, bool at_end, BlockScan& scan, const ToolSchemas& schemas) {
  std::string_view body = s.substr(kToolCallOpen.size());
  std::size_t lead = leading_ws(body);
  std::string_view rest = body.substr(lead);
  if (rest.substr(0, kFunctionOpen.size()) != kFunctionOpen) {
    // Decide early that "<tool_call> and then prose" is a literal mention, not a call.
    bool could_be = rest.size() < kFunctionOpen.size() && kFunctionOpen.substr(0, rest.size()) == rest;
    return could_be && !at_end ? Block::need_more() : Block::not_a_block();
  }
  std::size_t close = scan.find(s, kToolCallClose, kToolCallOpen.size());
  std::size_t consumed = 0;
  std::string_view fn;
  if (close != std::string_view::npos) {
    fn = s.substr(kToolCallOpen.size() + lead, close - kToolCallOpen.size() - lead);
    consumed = close + kToolCallClose.size();
  } else if (!at_end) {
    return Block::need_more();
  } else if (rest.find(kFunctionClose) != std::string_view::npos) {
    // The output stopped after "</function>" without "</tool_call>": still a complete call.
    fn = rest;
    consumed = s.size();
  } else {
    return Block::not_a_block();
  }
  std::string name, args;
  if (!parse_qwen_function(fn, schemas, name, args)) return Block::text(consumed);
  return Block::call(consumed, std::move(name), std::move(args));
}

// A bare "<function=…>…</function>" without the <tool_call> wrapper (Qwen3-Coder sometimes drops
// it; vLLM accepts it too).
Block parse_qwen_bare_function(std::string_view s, bool at_end, BlockScan& scan, const ToolSchemas& schemas) {
  std::size_t close = scan.find(s, kFunctionClose, 0);
  if (close == std::string_view::npos) return at_end ? Block::not_a_block() : Block::need_more();
  std::size_t consumed = close + kFunctionClose.size();
  std::string name, args;
  if (!parse_qwen_function(s.substr(0, consumed), schemas, name, args)) return Block::text(consumed);
  return Block::call(consumed, std::move(name), std::move(args));
}

}  // namespace ft::protocol::detail

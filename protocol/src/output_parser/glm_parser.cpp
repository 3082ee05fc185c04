// GLM-4.5 / 4.6 / 4.7: <think>…</think>, then text with
//   <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n…</tool_call>
// (4.7 may drop the newline after NAME). Keys and values are trimmed as vLLM's glm4_moe parser
// does; a value is JSON-parsed only when the schema declares a non-string type, so an undeclared
// "123" stays the string the model most likely meant. A JSON body ('{' first) is accepted too:
// the GLM-4 (non-MoE) templates used the Qwen/Hermes form.
#include <array>
#include <vector>

#include "output_parser/families.h"
#include "output_parser/tagged_parser.h"

namespace ft::protocol::detail {
namespace {

constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValueOpen = "<arg_value>";
constexpr std::string_view kValueClose = "</arg_value>";
constexpr std::array<std::string_view, 1> kOpeners = {kToolCallOpen};
// A name line longer than this is prose after a literal "<tool_call>", not a function name.
constexpr std::size_t kMaxNameBytes = 256;

// The text between `open` at `s[i]` and the next `close`; advances i past the close tag.
bool take_tagged(std::string_view s, std::size_t& i, std::string_view open, std::string_view close,
                 std::string_view& out) {
  i += leading_ws(s.substr(i));
  if (s.substr(i, open.size()) != open) return false;
  std::size_t end = s.find(close, i + open.size());
  if (end == std::string_view::npos) return false;
  out = s.substr(i + open.size(), end - i - open.size());
  i = end + close.size();
  return true;
}

class GlmParser final : public TaggedParser {
 public:
  explicit GlmParser(OutputParserOptions options) : TaggedParser(std::move(options), kOpeners) {}

 private:
  Block parse_block(std::string_view s, std::size_t, bool at_end, BlockScan& scan) override {
    std::string_view body = s.substr(kToolCallOpen.size());
    std::size_t lead = leading_ws(body);
    if (lead < body.size() && body[lead] == '{') return parse_qwen_json_call(s, at_end, scan);
    // Decide early when the "name" runs on like prose (measured the same way at every split, so
    // the decision does not depend on how the output was chunked).
    std::size_t name_end = body.find_first_of("\n<");
    if ((name_end == std::string_view::npos ? body.size() : name_end) > kMaxNameBytes) {
      return Block::not_a_block();
    }
    std::size_t close = scan.find(s, kToolCallClose, kToolCallOpen.size());
    if (close == std::string_view::npos) return at_end ? Block::not_a_block() : Block::need_more();
    std::string_view inner = s.substr(kToolCallOpen.size(), close - kToolCallOpen.size());
    std::string_view name = trim_ws(inner.substr(0, name_end));
    std::size_t consumed = close + kToolCallClose.size();
    if (name.empty() || name.find('>') != std::string_view::npos) return Block::text(consumed);
    std::vector<std::pair<std::string, std::string>> params;
    std::size_t i = name_end == std::string_view::npos ? inner.size() : name_end;
    while (!trim_ws(inner.substr(i)).empty()) {
      std::string_view key, value;
      if (!take_tagged(inner, i, kKeyOpen, kKeyClose, key)) return Block::text(consumed);
      if (!take_tagged(inner, i, kValueOpen, kValueClose, value)) return Block::text(consumed);
      params.emplace_back(std::string(trim_ws(key)), std::string(trim_ws(value)));
    }
    std::string args = arguments_from_raw_params(name, params, RawValueStyle::kGlm, schemas());
    return Block::call(consumed, std::string(name), std::move(args));
  }
};

}  // namespace

std::unique_ptr<StreamParser> make_glm_parser(OutputParserOptions options) {
  return std::make_unique<GlmParser>(std::move(options));
}

}  // namespace ft::protocol::detail

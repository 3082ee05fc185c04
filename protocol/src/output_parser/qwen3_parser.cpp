// Qwen3 / Qwen3-Coder / Qwen3.5 / Qwen3.6: <think>…</think>, then text with <tool_call> blocks.
// The body decides the form: '{' is the Qwen3 (Hermes) JSON form, "<function=" the XML form of
// Qwen3-Coder and Qwen3.5+. One parser serves all of them because fine-tunes and quantisations
// drift between the two, and the markers cannot be confused.
#include <array>

#include "output_parser/families.h"
#include "output_parser/tagged_parser.h"

namespace ft::protocol::detail {
namespace {

constexpr std::string_view kBareFunction = "<function=";
constexpr std::array<std::string_view, 2> kQwenOpeners = {kToolCallOpen, kBareFunction};

class QwenParser final : public TaggedParser {
 public:
  explicit QwenParser(OutputParserOptions options) : TaggedParser(std::move(options), kQwenOpeners) {}

 private:
  Block parse_block(std::string_view s, std::size_t which, bool at_end, BlockScan& scan) override {
    if (which == 1) return parse_qwen_bare_function(s, at_end, scan, schemas());
    std::string_view body = s.substr(kToolCallOpen.size());
    std::size_t lead = leading_ws(body);
    if (lead == body.size()) return at_end ? Block::not_a_block() : Block::need_more();
    char first = body[lead];
    if (first == '{') return parse_qwen_json_call(s, at_end, scan);
    if (first == '<') return parse_qwen_xml_call(s, at_end, scan, schemas());
    return Block::not_a_block();
  }
};

}  // namespace

std::unique_ptr<StreamParser> make_qwen_parser(OutputParserOptions options) {
  return std::make_unique<QwenParser>(std::move(options));
}

}  // namespace ft::protocol::detail

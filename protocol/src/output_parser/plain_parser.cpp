// "plain": for models whose chat template teaches no tool-call markup the parsers know. Output is
// text, except a leading <think>…</think> block, which is reasoning as in every other family.
#include "output_parser/families.h"
#include "output_parser/tagged_parser.h"

namespace ft::protocol::detail {
namespace {

class PlainParser final : public TaggedParser {
 public:
  explicit PlainParser(OutputParserOptions options) : TaggedParser(std::move(options), {}) {}

 private:
  Block parse_block(std::string_view, std::size_t, bool, BlockScan&) override { return Block::not_a_block(); }
};

}  // namespace

std::unique_ptr<StreamParser> make_plain_parser(OutputParserOptions options) {
  return std::make_unique<PlainParser>(std::move(options));
}

}  // namespace ft::protocol::detail

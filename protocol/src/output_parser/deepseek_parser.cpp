// DeepSeek-V3 / V3.1 / R1: <think>…</think> (R1, V3.1 thinking), then text and a tool-call section
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>…<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
// with call bodies in either form:
//   V3 / R1:  function<｜tool▁sep｜>NAME\n```json\n{…}\n```
//   V3.1:     NAME<｜tool▁sep｜>{…}
// Every marker is an opener of its own, so each call is emitted as soon as its end marker arrives
// instead of waiting for the whole section; a call marker without the section marker is accepted.
#include <array>

#include "output_parser/families.h"
#include "output_parser/tagged_parser.h"

namespace ft::protocol::detail {
namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::array<std::string_view, 3> kOpeners = {kCallsBegin, kCallBegin, kCallsEnd};

// "```json\n{…}\n```" → "{…}"; bodies without the fence pass unchanged.
std::string_view strip_code_fence(std::string_view v) {
  v = trim_ws(v);
  if (v.substr(0, 3) != "```") return v;
  std::size_t nl = v.find('\n');
  if (nl == std::string_view::npos) return {};
  v.remove_prefix(nl + 1);
  v = trim_ws(v);
  if (v.size() >= 3 && v.substr(v.size() - 3) == "```") v.remove_suffix(3);
  return trim_ws(v);
}

class DeepSeekParser final : public TaggedParser {
 public:
  explicit DeepSeekParser(OutputParserOptions options) : TaggedParser(std::move(options), kOpeners) {}

 private:
  Block parse_block(std::string_view s, std::size_t which, bool at_end, BlockScan& scan) override {
    if (which != 1) return Block::markup(kOpeners[which].size());
    std::size_t end = scan.find(s, kCallEnd, kCallBegin.size());
    if (end == std::string_view::npos) return at_end ? Block::not_a_block() : Block::need_more();
    std::size_t consumed = end + kCallEnd.size();
    std::string_view inner = s.substr(kCallBegin.size(), end - kCallBegin.size());
    std::size_t sep = inner.find(kSep);
    if (sep == std::string_view::npos) return Block::text(consumed);
    std::string_view head = trim_ws(inner.substr(0, sep));
    std::string_view tail = inner.substr(sep + kSep.size());
    std::string_view name;
    std::string_view args;
    if (trim_ws(tail).substr(0, 1) == "{") {  // V3.1: the name precedes the separator
      name = head;
      args = trim_ws(tail);
    } else {  // V3: "function" precedes it, the name is the first line after it
      std::size_t nl = tail.find('\n');
      name = trim_ws(tail.substr(0, nl));
      args = nl == std::string_view::npos ? std::string_view{} : strip_code_fence(tail.substr(nl + 1));
    }
    if (name.empty() || name.find_first_of("<>\n") != std::string_view::npos) return Block::text(consumed);
    auto json = normalize_json_object(args);
    if (!json) return Block::text(consumed);
    return Block::call(consumed, std::string(name), std::move(*json));
  }
};

}  // namespace

std::unique_ptr<StreamParser> make_deepseek_parser(OutputParserOptions options) {
  return std::make_unique<DeepSeekParser>(std::move(options));
}

}  // namespace ft::protocol::detail

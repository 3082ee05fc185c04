// The common shape of the <think>-style families (Qwen, DeepSeek, GLM): an optional reasoning block
// at the very start, then text in which family-specific openers start blocks (tool calls, section
// markers). A family only says which openers exist and how to parse a block.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "output_parser/json_util.h"
#include "output_parser/stream_core.h"

namespace ft::protocol::detail {

// What a family makes of the text starting at one of its openers.
struct Block {
  enum Kind {
    kNeedMore,  // cannot decide yet (never returned at_end)
    kToolCall,  // a call: `consumed` bytes of markup become name + arguments
    kMarkup,    // a marker with no content of its own (e.g. a section begin): dropped
    kNotABlock,  // a literal mention or undecidable: the opener is plain text, scanning resumes after it
    kText        // a delimited block that is malformed inside: all `consumed` bytes are plain text
                 // (not rescanned, so a broken call cannot turn into a different call)
  };
  Kind kind = kNotABlock;
  std::size_t consumed = 0;
  std::string name;
  std::string arguments_json;

  static Block need_more() { return of(kNeedMore, 0); }
  static Block not_a_block() { return of(kNotABlock, 0); }
  static Block markup(std::size_t n) { return of(kMarkup, n); }
  static Block text(std::size_t n) { return of(kText, n); }
  static Block call(std::size_t n, std::string name, std::string args) {
    Block b = of(kToolCall, n);
    b.name = std::move(name);
    b.arguments_json = std::move(args);
    return b;
  }

 private:
  static Block of(Kind kind, std::size_t n) {
    Block b;
    b.kind = kind;
    b.consumed = n;
    return b;
  }
};

// Progress of the scans over a block that is still open, so each feed() looks only at new bytes:
// a 100 KB write_file call streamed token by token would otherwise be rescanned per token.
struct BlockScan {
  std::size_t searched = 0;  // the block's first `searched` bytes hold no close marker
  JsonScanState json;
  // s.find(tag, from), skipping what earlier calls on the same block already searched. One close
  // marker per block: the parsers call it with the same tag every time.
  std::size_t find(std::string_view s, std::string_view tag, std::size_t from) {
    std::size_t start = searched >= tag.size() ? std::max(from, searched - tag.size() + 1) : from;
    std::size_t p = s.find(tag, start);
    if (p == std::string_view::npos) searched = s.size();
    return p;
  }
};

class TaggedParser : public ParserCore {
 public:
  TaggedParser(OutputParserOptions options, TagList openers);

 protected:
  // `s` starts with openers[which]; `at_end`: no more bytes will follow `s`.
  // `scan` belongs to this block: it is reset whenever the block start moves.
  virtual Block parse_block(std::string_view s, std::size_t which, bool at_end, BlockScan& scan) = 0;
  const ToolSchemas& schemas() const { return schemas_; }

 private:
  bool step(bool at_end) final;

  enum class State { kStart, kReasoning, kText };
  State state_ = State::kStart;
  TagList openers_;
  ToolSchemas schemas_;
  BlockScan scan_;
  std::size_t scan_origin_ = 0;  // consumed_total() when scan_ was started
  std::optional<std::size_t> held_opener_;  // the opener of the block waiting at scan_origin_
};

// Shared block bodies (used by more than one family).
// <tool_call> whose body is Qwen3/Hermes JSON: `s` starts with "<tool_call>" and the first
// non-whitespace byte after it is '{'.
Block parse_qwen_json_call(std::string_view s, bool at_end, BlockScan& scan);
// <tool_call> whose body is Qwen3-Coder XML: `s` starts with "<tool_call>", then "<function=".
Block parse_qwen_xml_call(std::string_view s, bool at_end, BlockScan& scan, const ToolSchemas& schemas);
// A bare "<function=NAME>…</function>" (no <tool_call> wrapper): `s` starts with "<function=".
Block parse_qwen_bare_function(std::string_view s, bool at_end, BlockScan& scan, const ToolSchemas& schemas);

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

}  // namespace ft::protocol::detail

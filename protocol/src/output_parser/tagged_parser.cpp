#include "output_parser/tagged_parser.h"

#include <array>

namespace ft::protocol::detail {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::array<std::string_view, 1> kReasoningTags = {kThinkClose};

}  // namespace

TaggedParser::TaggedParser(OutputParserOptions options, TagList openers)
    : ParserCore(std::move(options)), openers_(openers), schemas_(this->options().tools) {}

bool TaggedParser::step(bool at_end) {
  std::string_view s = pending();
  switch (state_) {
    case State::kStart: {
      // "<think>" opens reasoning only at the very start (after whitespace): later it is text the
      // model is writing about. It is accepted even when the prompt already opened the block,
      // because models sometimes repeat it.
      std::string_view rest = s.substr(leading_ws(s));
      if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
        sink().markup(s.size() - rest.size() + kThinkOpen.size());
        consume(s.size() - rest.size() + kThinkOpen.size());
        state_ = State::kReasoning;
        return true;
      }
      if (!at_end && rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest) {
        return false;  // whitespace or "<thi": wait (nothing visible is delayed)
      }
      state_ = options().starts_in_reasoning ? State::kReasoning : State::kText;
      return true;
    }
    case State::kReasoning: {
      TagHit hit = find_first_tag(s, kReasoningTags);
      if (hit.pos == std::string_view::npos) return stream_out(s, kReasoningTags, true, at_end) > 0;
      sink().reasoning(s.substr(0, hit.pos));
      sink().end_reasoning_segment();
      sink().markup(kThinkClose.size());
      consume(hit.pos + kThinkClose.size());
      state_ = State::kText;
      return true;
    }
    case State::kText: {
      // A block already waiting at the front is not searched for again (that search would make a
      // long held call quadratic).
      TagHit hit = scan_origin_ == consumed_total() && held_opener_ ? TagHit{0, *held_opener_}
                                                                      : find_first_tag(s, openers_);
      if (hit.pos == std::string_view::npos) return stream_out(s, openers_, false, at_end) > 0;
      if (hit.pos > 0) {
        sink().text(s.substr(0, hit.pos));
        consume(hit.pos);
        return true;
      }
      if (scan_origin_ != consumed_total()) {
        scan_ = {};
        scan_origin_ = consumed_total();
        held_opener_.reset();
      }
      Block b = parse_block(s, hit.tag, at_end, scan_);
      if (b.kind == Block::kNeedMore && at_end) b = Block::not_a_block();
      switch (b.kind) {
        case Block::kNeedMore:
          held_opener_ = hit.tag;
          return false;
        case Block::kToolCall:
          sink().end_text_segment();  // whitespace before a call is layout, not content
          sink().tool_call(std::move(b.name), std::move(b.arguments_json), std::string(s.substr(0, b.consumed)));
          consume(b.consumed);
          return true;
        case Block::kMarkup:
          sink().end_text_segment();
          sink().markup(b.consumed);
          consume(b.consumed);
          return true;
        case Block::kText:
          sink().text(s.substr(0, b.consumed));
          consume(b.consumed);
          return true;
        case Block::kNotABlock:
          sink().text(openers_[hit.tag]);
          consume(openers_[hit.tag].size());
          return true;
      }
      return false;
    }
  }
  return false;
}

Block parse_qwen_json_call(std::string_view s, bool at_end, BlockScan& scan) {
  std::string_view body = s.substr(kToolCallOpen.size());
  std::size_t lead = leading_ws(body);
  std::string_view json = body.substr(lead);
  // Bracket-aware: a "</tool_call>" inside an argument string does not end the call.
  std::size_t len = json_container_length(json, scan.json);
  if (len == 0) return at_end ? Block::not_a_block() : Block::need_more();
  std::string_view after = json.substr(len);
  std::size_t gap = leading_ws(after);
  std::string_view tail = after.substr(gap);
  if (at_end && tail.empty()) {
    // The output stopped after the JSON (a stop sequence ate the close tag): the call is complete.
    auto call = parse_named_call(json.substr(0, len));
    if (!call) return Block::not_a_block();
    return Block::call(s.size(), std::move(call->first), std::move(call->second));
  }
  if (tail.substr(0, kToolCallClose.size()) != kToolCallClose) {
    if (!at_end && tail.size() < kToolCallClose.size() && kToolCallClose.substr(0, tail.size()) == tail) {
      return Block::need_more();
    }
    return Block::not_a_block();
  }
  std::size_t consumed = kToolCallOpen.size() + lead + len + gap + kToolCallClose.size();
  auto call = parse_named_call(json.substr(0, len));
  if (!call) return Block::text(consumed);
  return Block::call(consumed, std::move(call->first), std::move(call->second));
}

}  // namespace ft::protocol::detail

// gpt-oss "harmony": the output is a sequence of messages
//   [<|start|>ROLE] HEADER <|message|> BODY (<|end|> | <|call|> | <|return|>)
// where HEADER holds "<|channel|>CHANNEL", optionally " to=RECIPIENT" (before or after the channel)
// and "<|constrain|>json" or a bare content type. The prompt ends with "<|start|>assistant", so
// the first message comes without <|start|>. Routing:
//   analysis                       → reasoning
//   final, commentary (no recipient: a preamble to the user), unknown → text
//   any channel with to=RECIPIENT  → tool call; "functions.NAME" gives NAME, the body is JSON
// Stop tokens (<|call|>, <|return|>) may be cut by the server, so a message that simply ends is
// complete. A body interrupted by <|start|> or <|channel|> ends there (lenient: the model skipped
// <|end|>). Anything that is not harmony is text.
#include <array>

#include "output_parser/families.h"
#include "output_parser/json_util.h"
#include "output_parser/stream_core.h"

namespace ft::protocol::detail {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kRecipientAfterRole = " to=";
constexpr std::string_view kFunctionsPrefix = "functions.";

// What may begin a message where one is expected; anything else is a headerless text message.
constexpr std::array<std::string_view, 3> kMessageStarts = {kStart, kChannel, kRecipientAfterRole};
// What ends a body (order: ties cannot happen, all start with "<|").
constexpr std::array<std::string_view, 5> kBodyEnds = {kEnd, kCall, kReturn, kStart, kChannel};
constexpr std::size_t kLongestBodyEnd = 11;  // "<|channel|>"
// A header longer than this is not a header: the bytes are text.
constexpr std::size_t kMaxHeaderBytes = 1024;

// The word after `key` in `header`, up to whitespace or the next special token.
std::string_view header_value(std::string_view header, std::string_view key) {
  std::size_t p = header.find(key);
  if (p == std::string_view::npos) return {};
  std::string_view v = header.substr(p + key.size());
  v.remove_prefix(leading_ws(v));
  std::size_t end = 0;
  while (end < v.size() && !is_ws(v[end]) && v[end] != '<') ++end;
  return v.substr(0, end);
}

class HarmonyParser final : public ParserCore {
 public:
  explicit HarmonyParser(OutputParserOptions options) : ParserCore(std::move(options)) {}

 private:
  enum class State { kMessageStart, kHeader, kBody };
  enum class Route { kText, kReasoning, kTool };

  bool step(bool at_end) override {
    std::string_view s = pending();
    switch (state_) {
      case State::kMessageStart:
        return message_start(s, at_end);
      case State::kHeader:
        return header(s, at_end);
      case State::kBody:
        return body(s, at_end);
    }
    return false;
  }

  bool message_start(std::string_view s, bool at_end) {
    if (s.substr(0, kStart.size()) == kStart) {
      sink().markup(kStart.size());
      consume(kStart.size());
      state_ = State::kHeader;
      return true;
    }
    if (s.substr(0, kChannel.size()) == kChannel ||
        s.substr(0, kRecipientAfterRole.size()) == kRecipientAfterRole) {
      state_ = State::kHeader;
      return true;
    }
    if (!at_end && is_proper_prefix_of_any(s, kMessageStarts)) return false;
    begin_body(Route::kText, Route::kText, {});
    return true;
  }

  bool header(std::string_view s, bool at_end) {
    std::size_t p = s.find(kMessage);
    std::size_t header_len = p == std::string_view::npos ? s.size() : p;
    if (header_len > kMaxHeaderBytes) {  // the same cut at every split: a deterministic decision
      sink().text(s.substr(0, kMaxHeaderBytes));
      consume(kMaxHeaderBytes);
      begin_body(Route::kText, Route::kText, {});
      return true;
    }
    if (p == std::string_view::npos) {
      if (!at_end) return false;
      sink().text(s);  // a header cut off by the end of output: keep the bytes
      consume(s.size());
      return true;
    }
    std::string_view h = s.substr(0, p);
    std::string_view channel = header_value(h, kChannel);
    std::string_view recipient = header_value(h, "to=");
    Route natural = channel == "analysis" ? Route::kReasoning : Route::kText;
    if (recipient.substr(0, kFunctionsPrefix.size()) == kFunctionsPrefix) {
      recipient.remove_prefix(kFunctionsPrefix.size());
    }
    sink().markup(p + kMessage.size());
    consume(p + kMessage.size());
    begin_body(recipient.empty() ? natural : Route::kTool, natural, recipient);
    return true;
  }

  bool body(std::string_view s, bool at_end) {
    // A held tool body is rescanned only from where the last step stopped (minus a tag's length).
    std::size_t start = 0;
    if (route_ == Route::kTool && searched_origin_ == consumed_total() && searched_ > kLongestBodyEnd) {
      start = searched_ - kLongestBodyEnd;
    }
    TagHit hit = find_first_tag(s.substr(start), kBodyEnds);
    if (hit.pos != std::string_view::npos) {
      hit.pos += start;
    } else {
      searched_ = s.size();
      searched_origin_ = consumed_total();
    }
    if (route_ != Route::kTool) {
      bool reasoning = route_ == Route::kReasoning;
      if (hit.pos == std::string_view::npos) return stream_out(s, kBodyEnds, reasoning, at_end) > 0;
      if (reasoning) {
        sink().reasoning(s.substr(0, hit.pos));
      } else {
        sink().text(s.substr(0, hit.pos));
      }
      consume(hit.pos);
      end_message(hit.tag);
      return true;
    }
    // Tool arguments are held whole: they become a call only if they parse.
    if (hit.pos == std::string_view::npos) {
      if (!at_end) return false;
      finish_tool(s);
      consume(s.size());
      state_ = State::kMessageStart;
      return true;
    }
    finish_tool(s.substr(0, hit.pos));
    consume(hit.pos);
    end_message(hit.tag);
    return true;
  }

  void begin_body(Route route, Route natural, std::string_view recipient) {
    route_ = route;
    natural_ = natural;
    tool_name_.assign(recipient);
    state_ = State::kBody;
  }

  void finish_tool(std::string_view raw) {
    if (auto args = normalize_json_object(trim_ws(raw)); args && !tool_name_.empty()) {
      sink().end_text_segment();
      sink().tool_call(tool_name_, std::move(*args), std::string(raw));
      return;
    }
    // Not JSON (or a built-in tool's free-form input): the body stays visible where it was written.
    if (natural_ == Route::kReasoning) {
      sink().reasoning(raw);
      sink().end_reasoning_segment();
    } else {
      sink().text(raw);
      sink().end_text_segment();
    }
  }

  void end_message(std::size_t tag) {
    if (route_ == Route::kReasoning) sink().end_reasoning_segment();
    if (route_ == Route::kText) sink().end_text_segment();
    std::string_view t = kBodyEnds[tag];
    if (t == kChannel) {  // belongs to the next header: leave it there
      state_ = State::kHeader;
      return;
    }
    sink().markup(t.size());
    consume(t.size());
    state_ = t == kStart ? State::kHeader : State::kMessageStart;
  }

  State state_ = State::kMessageStart;
  Route route_ = Route::kText;
  Route natural_ = Route::kText;
  std::string tool_name_;
  std::size_t searched_ = 0;         // bytes of the held tool body already searched for an end
  std::size_t searched_origin_ = 0;  // consumed_total() when searched_ was measured
};

}  // namespace

std::unique_ptr<StreamParser> make_harmony_parser(OutputParserOptions options) {
  return std::make_unique<HarmonyParser>(std::move(options));
}

}  // namespace ft::protocol::detail

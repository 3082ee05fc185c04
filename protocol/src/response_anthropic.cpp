// Anthropic Messages responses: content blocks thinking / text / tool_use, in output order.
#include "ft/protocol/client_responses.h"
#include "response_common.h"

namespace ft::protocol {
namespace detail {

const char* anthropic_stop_reason(FinishReason f) {
  switch (f) {
    case FinishReason::kEndTurn: return "end_turn";
    case FinishReason::kMaxTokens: return "max_tokens";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kToolUse: return "tool_use";
  }
  return "end_turn";
}

// Anthropic counts input_tokens as the part that was not read from the cache.
OJson anthropic_usage(const Usage& u, bool with_input) {
  OJson j = OJson::object();
  if (with_input) {
    j["input_tokens"] = u.input_tokens - u.cached_input_tokens;
    j["cache_creation_input_tokens"] = 0;
    j["cache_read_input_tokens"] = u.cached_input_tokens;
  }
  j["output_tokens"] = u.output_tokens;
  return j;
}

// Clients echo thinking blocks back with their signature; ours only marks the block as ours.
constexpr const char* kThinkingSignature = "freetoken";

}  // namespace detail

using detail::OJson;

namespace {

class AnthropicStream final : public StreamEncoder {
 public:
  explicit AnthropicStream(ResponseMeta meta) : meta_(std::move(meta)) {}

  std::string begin(const Usage& u) override {
    OJson msg = {{"id", meta_.id}, {"type", "message"}, {"role", "assistant"}, {"model", meta_.model},
                 {"content", OJson::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                 {"usage", detail::anthropic_usage(u, true)}};
    return detail::sse("message_start", {{"type", "message_start"}, {"message", msg}});
  }

  std::string event(const OutputEvent& ev) override {
    std::string out;
    if (auto* r = std::get_if<ReasoningDelta>(&ev)) {
      out += open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      out += delta({{"type", "thinking_delta"}, {"thinking", r->text}});
    } else if (auto* t = std::get_if<TextDelta>(&ev)) {
      out += open(Block::kText, {{"type", "text"}, {"text", ""}});
      out += delta({{"type", "text_delta"}, {"text", t->text}});
    } else if (auto* s = std::get_if<ToolCallStart>(&ev)) {
      out += close();
      out += open(Block::kTool, {{"type", "tool_use"}, {"id", s->id}, {"name", s->name}, {"input", OJson::object()}});
    } else if (auto* a = std::get_if<ToolCallArgsDelta>(&ev)) {
      out += delta({{"type", "input_json_delta"}, {"partial_json", a->json_fragment}});
    } else if (std::holds_alternative<ToolCallEnd>(ev)) {
      out += close();
    }
    return out;
  }

  std::string end(FinishReason f, const Usage& u, std::string_view stop_sequence) override {
    std::string out = close();
    OJson d = {{"stop_reason", detail::anthropic_stop_reason(f)},
               {"stop_sequence", stop_sequence.empty() ? OJson(nullptr) : OJson(std::string(stop_sequence))}};
    out += detail::sse("message_delta", {{"type", "message_delta"}, {"delta", d}, {"usage", detail::anthropic_usage(u, false)}});
    out += detail::sse("message_stop", {{"type", "message_stop"}});
    return out;
  }

 private:
  enum class Block { kNone, kThinking, kText, kTool };

  std::string open(Block kind, const OJson& content_block) {
    if (open_ == kind && kind != Block::kTool) return "";
    std::string out = close();
    open_ = kind;
    out += detail::sse("content_block_start",
                       {{"type", "content_block_start"}, {"index", index_}, {"content_block", content_block}});
    return out;
  }
  std::string delta(const OJson& d) {
    return detail::sse("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  }
  std::string close() {
    if (open_ == Block::kNone) return "";
    std::string out;
    if (open_ == Block::kThinking)
      out += delta({{"type", "signature_delta"}, {"signature", detail::kThinkingSignature}});
    out += detail::sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_ = Block::kNone;
    ++index_;
    return out;
  }

  ResponseMeta meta_;
  Block open_ = Block::kNone;
  int index_ = 0;
};

}  // namespace

std::string anthropic_full_response(const ResponseMeta& meta, const ParsedOutput& out, FinishReason f,
                                    const Usage& u, std::string_view stop_sequence) {
  OJson content = OJson::array();
  if (!out.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", out.reasoning}, {"signature", detail::kThinkingSignature}});
  if (!out.text.empty()) content.push_back({{"type", "text"}, {"text", out.text}});
  for (const auto& c : out.tool_calls)
    content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", detail::parse_or_empty(c.arguments_json)}});
  OJson j = {{"id", meta.id}, {"type", "message"}, {"role", "assistant"}, {"model", meta.model},
             {"content", content}, {"stop_reason", detail::anthropic_stop_reason(f)},
             {"stop_sequence", stop_sequence.empty() ? OJson(nullptr) : OJson(std::string(stop_sequence))},
             {"usage", detail::anthropic_usage(u, true)}};
  return detail::dump(j);
}

std::unique_ptr<StreamEncoder> make_anthropic_stream(const ResponseMeta& meta) {
  return std::make_unique<AnthropicStream>(meta);
}

}  // namespace ft::protocol

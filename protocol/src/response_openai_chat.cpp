// OpenAI Chat Completions responses: one choice; reasoning as `reasoning_content`.
#include "ft/protocol/client_responses.h"
#include "response_common.h"

namespace ft::protocol {

using detail::OJson;

namespace {

const char* finish_reason(FinishReason f) {
  switch (f) {
    case FinishReason::kEndTurn:
    case FinishReason::kStopSequence: return "stop";
    case FinishReason::kMaxTokens: return "length";
    case FinishReason::kToolUse: return "tool_calls";
  }
  return "stop";
}

OJson chat_usage(const Usage& u) {
  return {{"prompt_tokens", u.input_tokens},
          {"completion_tokens", u.output_tokens},
          {"total_tokens", u.input_tokens + u.output_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_input_tokens}}}};
}

class ChatStream final : public StreamEncoder {
 public:
  ChatStream(ResponseMeta meta, bool include_usage) : meta_(std::move(meta)), include_usage_(include_usage) {}

  std::string begin(const Usage&) override { return chunk({{"role", "assistant"}, {"content", ""}}, nullptr); }

  std::string event(const OutputEvent& ev) override {
    if (auto* r = std::get_if<ReasoningDelta>(&ev)) return chunk({{"reasoning_content", r->text}}, nullptr);
    if (auto* t = std::get_if<TextDelta>(&ev)) return chunk({{"content", t->text}}, nullptr);
    if (auto* s = std::get_if<ToolCallStart>(&ev)) {
      OJson call = {{"index", s->index}, {"id", s->id}, {"type", "function"},
                    {"function", {{"name", s->name}, {"arguments", ""}}}};
      return chunk({{"tool_calls", OJson::array({call})}}, nullptr);
    }
    if (auto* a = std::get_if<ToolCallArgsDelta>(&ev)) {
      OJson call = {{"index", a->index}, {"function", {{"arguments", a->json_fragment}}}};
      return chunk({{"tool_calls", OJson::array({call})}}, nullptr);
    }
    return "";
  }

  std::string end(FinishReason f, const Usage& u, std::string_view) override {
    std::string out = chunk(OJson::object(), finish_reason(f));
    if (include_usage_) {
      OJson j = header();
      j["choices"] = OJson::array();
      j["usage"] = chat_usage(u);
      out += detail::sse_data(j);
    }
    return out + "data: [DONE]\n\n";
  }

 private:
  OJson header() const {
    return {{"id", meta_.id}, {"object", "chat.completion.chunk"}, {"created", meta_.created}, {"model", meta_.model}};
  }
  std::string chunk(const OJson& delta, const char* finish) const {
    OJson j = header();
    j["choices"] = OJson::array({{{"index", 0}, {"delta", delta},
                                  {"finish_reason", finish ? OJson(finish) : OJson(nullptr)}}});
    return detail::sse_data(j);
  }

  ResponseMeta meta_;
  bool include_usage_;
};

}  // namespace

std::string openai_chat_full_response(const ResponseMeta& meta, const ParsedOutput& out, FinishReason f,
                                      const Usage& u) {
  OJson msg = {{"role", "assistant"}, {"content", out.text.empty() && !out.tool_calls.empty() ? OJson(nullptr) : OJson(out.text)}};
  if (!out.reasoning.empty()) msg["reasoning_content"] = out.reasoning;
  if (!out.tool_calls.empty()) {
    OJson calls = OJson::array();
    for (const auto& c : out.tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments_json}}}});
    msg["tool_calls"] = calls;
  }
  OJson j = {{"id", meta.id}, {"object", "chat.completion"}, {"created", meta.created}, {"model", meta.model},
             {"choices", OJson::array({{{"index", 0}, {"message", msg}, {"finish_reason", finish_reason(f)}}})},
             {"usage", chat_usage(u)}};
  return detail::dump(j);
}

std::unique_ptr<StreamEncoder> make_openai_chat_stream(const ResponseMeta& meta, bool include_usage) {
  return std::make_unique<ChatStream>(meta, include_usage);
}

}  // namespace ft::protocol

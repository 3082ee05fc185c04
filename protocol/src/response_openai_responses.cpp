// OpenAI Responses API output: items (reasoning, message, function_call) and their stream events.
#include "ft/protocol/client_responses.h"
#include "response_common.h"

namespace ft::protocol {

using detail::OJson;

namespace {

OJson responses_usage(const Usage& u) {
  return {{"input_tokens", u.input_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_input_tokens}}},
          {"output_tokens", u.output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.input_tokens + u.output_tokens}};
}

OJson reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id}, {"type", "reasoning"}, {"summary", OJson::array()},
          {"content", OJson::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}
OJson text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", OJson::array()}};
}
OJson message_item(const std::string& id, const std::string& text, const char* status) {
  OJson content = OJson::array();
  if (status == std::string("completed")) content.push_back(text_part(text));
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", content}};
}
OJson call_item(const std::string& id, const ParsedToolCall& c, const char* status) {
  return {{"id", id}, {"type", "function_call"}, {"status", status}, {"call_id", c.id},
          {"name", c.name}, {"arguments", c.arguments_json}};
}

OJson response_object(const ResponseMeta& meta, const char* status, const OJson& output, const Usage* usage,
                      bool truncated) {
  OJson j = {{"id", meta.id}, {"object", "response"}, {"created_at", meta.created}, {"status", status},
             {"model", meta.model}, {"output", output}};
  j["incomplete_details"] = truncated ? OJson({{"reason", "max_output_tokens"}}) : OJson(nullptr);
  j["usage"] = usage ? responses_usage(*usage) : OJson(nullptr);
  return j;
}

class ResponsesStream final : public StreamEncoder {
 public:
  explicit ResponsesStream(ResponseMeta meta) : meta_(std::move(meta)) {}

  std::string begin(const Usage&) override {
    OJson r = response_object(meta_, "in_progress", OJson::array(), nullptr, false);
    std::string out = emit("response.created", {{"response", r}});  // sequence numbers: in this order
    return out + emit("response.in_progress", {{"response", r}});
  }

  std::string event(const OutputEvent& ev) override {
    std::string out;
    if (auto* r = std::get_if<ReasoningDelta>(&ev)) {
      if (open_ != Item::kReasoning) {
        out += close();
        open_item(Item::kReasoning, "rs");
        out += emit("response.output_item.added", {{"output_index", index_}, {"item", reasoning_item(item_id_, "")}});
      }
      text_ += r->text;
      out += emit("response.reasoning_text.delta",
                  {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"delta", r->text}});
    } else if (auto* t = std::get_if<TextDelta>(&ev)) {
      if (open_ != Item::kMessage) {
        out += close();
        open_item(Item::kMessage, "msg");
        out += emit("response.output_item.added", {{"output_index", index_}, {"item", message_item(item_id_, "", "in_progress")}});
        out += emit("response.content_part.added",
                    {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"part", text_part("")}});
      }
      text_ += t->text;
      out += emit("response.output_text.delta",
                  {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"delta", t->text}});
    } else if (auto* s = std::get_if<ToolCallStart>(&ev)) {
      out += close();
      open_item(Item::kCall, "fc");
      call_ = ParsedToolCall{s->id, s->name, "", ""};
      out += emit("response.output_item.added", {{"output_index", index_}, {"item", call_item(item_id_, call_, "in_progress")}});
    } else if (auto* a = std::get_if<ToolCallArgsDelta>(&ev)) {
      call_.arguments_json += a->json_fragment;
      out += emit("response.function_call_arguments.delta",
                  {{"item_id", item_id_}, {"output_index", index_}, {"delta", a->json_fragment}});
    } else if (std::holds_alternative<ToolCallEnd>(ev)) {
      out += close();
    }
    return out;
  }

  std::string end(FinishReason f, const Usage& u, std::string_view) override {
    std::string out = close();
    const bool truncated = f == FinishReason::kMaxTokens;
    OJson r = response_object(meta_, truncated ? "incomplete" : "completed", output_, &u, truncated);
    return out + emit(truncated ? "response.incomplete" : "response.completed", {{"response", r}});
  }

 private:
  enum class Item { kNone, kReasoning, kMessage, kCall };

  void open_item(Item kind, const char* prefix) {
    open_ = kind;
    item_id_ = std::string(prefix) + "_" + meta_.id.substr(meta_.id.find('_') + 1) + "_" + std::to_string(index_);
    text_.clear();
  }

  std::string close() {
    std::string out;
    OJson item;
    switch (open_) {
      case Item::kNone: return "";
      case Item::kReasoning:
        item = reasoning_item(item_id_, text_);
        out += emit("response.reasoning_text.done",
                    {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"text", text_}});
        break;
      case Item::kMessage:
        item = message_item(item_id_, text_, "completed");
        out += emit("response.output_text.done",
                    {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"text", text_}});
        out += emit("response.content_part.done",
                    {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"part", text_part(text_)}});
        break;
      case Item::kCall:
        item = call_item(item_id_, call_, "completed");
        out += emit("response.function_call_arguments.done",
                    {{"item_id", item_id_}, {"output_index", index_}, {"arguments", call_.arguments_json}});
        break;
    }
    out += emit("response.output_item.done", {{"output_index", index_}, {"item", item}});
    output_.push_back(item);
    open_ = Item::kNone;
    ++index_;
    return out;
  }

  std::string emit(const std::string& type, OJson fields) {
    OJson j = {{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : fields.items()) j[k] = v;
    return detail::sse(type, j);
  }

  ResponseMeta meta_;
  Item open_ = Item::kNone;
  int index_ = 0;
  int seq_ = 0;
  std::string item_id_, text_;
  ParsedToolCall call_;
  OJson output_ = OJson::array();
};

}  // namespace

std::string openai_responses_full_response(const ResponseMeta& meta, const ParsedOutput& out, FinishReason f,
                                           const Usage& u) {
  const std::string base = meta.id.substr(meta.id.find('_') + 1);
  OJson output = OJson::array();
  int index = 0;
  if (!out.reasoning.empty()) output.push_back(reasoning_item("rs_" + base + "_" + std::to_string(index++), out.reasoning));
  if (!out.text.empty()) output.push_back(message_item("msg_" + base + "_" + std::to_string(index++), out.text, "completed"));
  for (const auto& c : out.tool_calls) output.push_back(call_item("fc_" + base + "_" + std::to_string(index++), c, "completed"));
  const bool truncated = f == FinishReason::kMaxTokens;
  return detail::dump(response_object(meta, truncated ? "incomplete" : "completed", output, &u, truncated));
}

std::unique_ptr<StreamEncoder> make_openai_responses_stream(const ResponseMeta& meta) {
  return std::make_unique<ResponsesStream>(meta);
}

}  // namespace ft::protocol

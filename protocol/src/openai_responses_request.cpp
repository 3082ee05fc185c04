// OpenAI Responses request (stateless use: the client sends the whole history as items) ->
// ChatRequest. Items: message, function_call, function_call_output, reasoning.
#include "ft/protocol/client_requests.h"
#include "json_fields.h"

namespace ft::protocol {

Status parse_openai_tools(const detail::Json& tools, std::vector<ToolDefinition>& out, bool flat);

namespace {

using detail::field_error;
using detail::Json;

Status item_text(const Json& content, const std::string& path, std::string& out) {
  if (content.is_string()) {
    out += content.get<std::string>();
    return {};
  }
  if (!content.is_array()) return field_error(path, "expected a string or an array of parts");
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& p = content[i];
    const std::string pp = path + "[" + std::to_string(i) + "]";
    if (!p.is_object()) return field_error(pp, "expected an object");
    std::string type;
    FT_RETURN_IF_ERROR(detail::get_string(p, "type", pp, type));
    if (type == "input_text" || type == "output_text" || type == "text" || type == "summary_text" ||
        type == "reasoning_text") {
      std::string text;
      FT_RETURN_IF_ERROR(detail::get_string(p, "text", pp, text));
      out += text;
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      return unsupported(pp + ": " + type + " content is not supported by this model (text only)");
    } else if (type != "refusal") {
      return field_error(pp + ".type", "unsupported content part type '" + type + "'");
    }
  }
  return {};
}

// Consecutive reasoning / function_call items belong to one assistant turn.
Message& assistant_turn(std::vector<Message>& msgs, bool& open) {
  if (!open || msgs.empty() || msgs.back().role != Message::Role::kAssistant) {
    msgs.push_back(Message{Message::Role::kAssistant, "", "", {}, "", ""});
    open = true;
  }
  return msgs.back();
}

}  // namespace

Result<ChatRequest> parse_openai_responses(std::string_view body) {
  FT_ASSIGN_OR_RETURN(Json j, detail::parse_body(body));
  ChatRequest req;
  req.dialect = Dialect::kOpenAIResponses;
  FT_RETURN_IF_ERROR(detail::get_string(j, "model", "", req.model));
  if (req.model.empty()) return field_error("model", "missing");
  std::string instructions;
  FT_RETURN_IF_ERROR(detail::get_string(j, "instructions", "", instructions));
  if (!instructions.empty()) req.messages.push_back(Message{Message::Role::kSystem, instructions, "", {}, "", ""});

  auto input = j.find("input");
  if (input == j.end() || input->is_null()) return field_error("input", "missing");
  if (input->is_string()) {
    req.messages.push_back(Message{Message::Role::kUser, input->get<std::string>(), "", {}, "", ""});
  } else if (input->is_array()) {
    bool assistant_open = false;
    for (size_t i = 0; i < input->size(); ++i) {
      const Json& item = (*input)[i];
      const std::string path = "input[" + std::to_string(i) + "]";
      if (!item.is_object()) return field_error(path, "expected an object");
      std::string type = "message";
      FT_RETURN_IF_ERROR(detail::get_string(item, "type", path, type));
      if (type == "message") {
        std::string role;
        FT_RETURN_IF_ERROR(detail::get_string(item, "role", path, role));
        auto content = item.find("content");
        if (content == item.end()) return field_error(path + ".content", "missing");
        std::string text;
        FT_RETURN_IF_ERROR(item_text(*content, path + ".content", text));
        if (role == "assistant") {
          Message& turn = assistant_turn(req.messages, assistant_open);
          turn.content += text;
          continue;
        }
        assistant_open = false;
        Message msg;
        if (role == "system" || role == "developer") msg.role = Message::Role::kSystem;
        else if (role == "user") msg.role = Message::Role::kUser;
        else return field_error(path + ".role", "unknown role '" + role + "'");
        msg.content = std::move(text);
        req.messages.push_back(std::move(msg));
      } else if (type == "reasoning") {
        Message& turn = assistant_turn(req.messages, assistant_open);
        // Prefer the full reasoning text; summaries are what clients get back otherwise.
        if (auto c = item.find("content"); c != item.end() && c->is_array() && !c->empty())
          FT_RETURN_IF_ERROR(item_text(*c, path + ".content", turn.reasoning));
        else if (auto s = item.find("summary"); s != item.end() && s->is_array())
          FT_RETURN_IF_ERROR(item_text(*s, path + ".summary", turn.reasoning));
      } else if (type == "function_call") {
        Message& turn = assistant_turn(req.messages, assistant_open);
        ToolCall call;
        FT_RETURN_IF_ERROR(detail::get_string(item, "call_id", path, call.id));
        FT_RETURN_IF_ERROR(detail::get_string(item, "name", path, call.name));
        if (call.name.empty()) return field_error(path + ".name", "missing");
        std::string args = "{}";
        FT_RETURN_IF_ERROR(detail::get_string(item, "arguments", path, args));
        call.arguments_json = canonical_arguments(args);
        turn.tool_calls.push_back(std::move(call));
      } else if (type == "function_call_output") {
        assistant_open = false;
        Message msg;
        msg.role = Message::Role::kTool;
        FT_RETURN_IF_ERROR(detail::get_string(item, "call_id", path, msg.tool_call_id));
        auto out = item.find("output");
        if (out != item.end() && !out->is_null()) FT_RETURN_IF_ERROR(item_text(*out, path + ".output", msg.content));
        req.messages.push_back(std::move(msg));
      } else {
        return field_error(path + ".type", "unsupported input item type '" + type + "'");
      }
    }
  } else {
    return field_error("input", "expected a string or an array of items");
  }
  if (req.messages.empty()) return field_error("input", "must contain at least one item");

  if (auto t = j.find("tools"); t != j.end() && !t->is_null())
    FT_RETURN_IF_ERROR(parse_openai_tools(*t, req.tools, /*flat=*/true));
  std::optional<int> max_tokens;
  FT_RETURN_IF_ERROR(detail::get_number(j, "max_output_tokens", "", max_tokens));
  if (max_tokens && *max_tokens < 1) return field_error("max_output_tokens", "must be at least 1");
  req.max_tokens = max_tokens.value_or(0);
  FT_RETURN_IF_ERROR(detail::get_number(j, "temperature", "", req.sampling.temperature));
  FT_RETURN_IF_ERROR(detail::get_number(j, "top_p", "", req.sampling.top_p));
  FT_RETURN_IF_ERROR(detail::get_bool(j, "stream", "", req.stream));
  if (auto r = j.find("reasoning"); r != j.end() && r->is_object()) {
    std::string effort;
    FT_RETURN_IF_ERROR(detail::get_string(*r, "effort", "reasoning", effort));
    if (!effort.empty()) req.enable_thinking = effort != "none" && effort != "minimal";
  }
  return req;
}

}  // namespace ft::protocol

// Anthropic Messages request -> ChatRequest. What real clients send (see the project's client
// notes): role:"system" messages mid-conversation, empty content arrays, tool_reference blocks in
// tool results, thinking blocks with signatures, defer_loading tools, many unknown beta fields.
#include "ft/protocol/client_requests.h"
#include "json_fields.h"

namespace ft::protocol {
namespace {

using detail::field_error;
using detail::Json;

// Text of a string-or-blocks content (system prompt, tool_result content). Non-text blocks that
// carry no prompt text (tool_reference, cache markers) are skipped; images are refused.
Status collect_text(const Json& content, const std::string& path, std::string& out) {
  if (content.is_string()) {
    out += content.get<std::string>();
    return {};
  }
  if (!content.is_array()) return field_error(path, "expected a string or an array of content blocks");
  bool first = out.empty();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    const std::string bp = path + "[" + std::to_string(i) + "]";
    if (!b.is_object()) return field_error(bp, "expected a content block object");
    std::string type;
    FT_RETURN_IF_ERROR(detail::get_string(b, "type", bp, type));
    if (type == "text") {
      std::string text;
      FT_RETURN_IF_ERROR(detail::get_string(b, "text", bp, text));
      if (!first) out += "\n";
      out += text;
      first = false;
    } else if (type == "image" || type == "document") {
      return unsupported(bp + ": " + type + " content is not supported by this model (text only)");
    } else if (type == "tool_reference") {
      continue;  // a pointer to a deferred tool; its definition arrives in tools[]
    } else {
      return field_error(bp + ".type", "unsupported content block type '" + type + "' here");
    }
  }
  return {};
}

Status parse_message(const Json& m, const std::string& path, std::vector<Message>& out) {
  if (!m.is_object()) return field_error(path, "expected a message object");
  std::string role;
  FT_RETURN_IF_ERROR(detail::get_string(m, "role", path, role));
  auto content_it = m.find("content");
  if (content_it == m.end()) return field_error(path + ".content", "missing");
  const Json& content = *content_it;
  const std::string cpath = path + ".content";

  if (role == "system") {  // Claude Code sends these mid-conversation; keep them in place
    Message msg;
    msg.role = Message::Role::kSystem;
    FT_RETURN_IF_ERROR(collect_text(content, cpath, msg.content));
    out.push_back(std::move(msg));
    return {};
  }
  if (role != "user" && role != "assistant")
    return field_error(path + ".role", "must be 'user' or 'assistant', got '" + role + "'");

  Message msg;
  msg.role = role == "user" ? Message::Role::kUser : Message::Role::kAssistant;
  if (content.is_string()) {
    msg.content = content.get<std::string>();
    out.push_back(std::move(msg));
    return {};
  }
  if (!content.is_array()) return field_error(cpath, "expected a string or an array of content blocks");

  std::vector<Message> tool_results;  // user tool_result blocks become tool messages, in order
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    const std::string bp = cpath + "[" + std::to_string(i) + "]";
    if (!b.is_object()) return field_error(bp, "expected a content block object");
    std::string type;
    FT_RETURN_IF_ERROR(detail::get_string(b, "type", bp, type));
    if (type == "text") {
      std::string text;
      FT_RETURN_IF_ERROR(detail::get_string(b, "text", bp, text));
      if (!msg.content.empty()) msg.content += "\n";
      msg.content += text;
    } else if (type == "thinking" && msg.role == Message::Role::kAssistant) {
      std::string thinking;
      FT_RETURN_IF_ERROR(detail::get_string(b, "thinking", bp, thinking));
      msg.reasoning += thinking;
    } else if (type == "redacted_thinking" && msg.role == Message::Role::kAssistant) {
      continue;  // opaque to us: nothing to render
    } else if (type == "tool_use" && msg.role == Message::Role::kAssistant) {
      ToolCall call;
      FT_RETURN_IF_ERROR(detail::get_string(b, "id", bp, call.id));
      FT_RETURN_IF_ERROR(detail::get_string(b, "name", bp, call.name));
      if (call.name.empty()) return field_error(bp + ".name", "missing");
      auto input = b.find("input");
      if (input != b.end() && !input->is_object()) return field_error(bp + ".input", "expected an object");
      call.arguments_json = input == b.end() ? "{}" : input->dump(-1, ' ', false, Json::error_handler_t::replace);
      msg.tool_calls.push_back(std::move(call));
    } else if (type == "tool_result" && msg.role == Message::Role::kUser) {
      Message result;
      result.role = Message::Role::kTool;
      FT_RETURN_IF_ERROR(detail::get_string(b, "tool_use_id", bp, result.tool_call_id));
      if (auto c = b.find("content"); c != b.end() && !c->is_null())
        FT_RETURN_IF_ERROR(collect_text(*c, bp + ".content", result.content));
      bool is_error = false;
      FT_RETURN_IF_ERROR(detail::get_bool(b, "is_error", bp, is_error));
      tool_results.push_back(std::move(result));
    } else if (type == "image" || type == "document") {
      return unsupported(bp + ": " + type + " content is not supported by this model (text only)");
    } else {
      return field_error(bp + ".type", "unsupported content block type '" + type + "' in a " + role + " message");
    }
  }
  // Tool results answer the previous assistant turn, so they come before any new user text.
  for (auto& r : tool_results) out.push_back(std::move(r));
  if (!msg.content.empty() || !msg.reasoning.empty() || !msg.tool_calls.empty() || tool_results.empty())
    out.push_back(std::move(msg));
  return {};
}

Status parse_tools(const Json& tools, std::vector<ToolDefinition>& out) {
  if (!tools.is_array()) return field_error("tools", "expected an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string path = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return field_error(path, "expected an object");
    bool deferred = false;
    FT_RETURN_IF_ERROR(detail::get_bool(t, "defer_loading", path, deferred));
    if (deferred) continue;  // not in the prompt until a tool search loads it
    std::string type;
    FT_RETURN_IF_ERROR(detail::get_string(t, "type", path, type));
    if (!type.empty() && type != "custom") continue;  // server tools (web_search, ...) are not ours to run
    ToolDefinition def;
    FT_RETURN_IF_ERROR(detail::get_string(t, "name", path, def.name));
    if (def.name.empty()) return field_error(path + ".name", "missing");
    FT_RETURN_IF_ERROR(detail::get_string(t, "description", path, def.description));
    if (auto s = t.find("input_schema"); s != t.end()) {
      if (!s->is_object()) return field_error(path + ".input_schema", "expected an object");
      def.parameters_json = s->dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    out.push_back(std::move(def));
  }
  return {};
}

}  // namespace

Result<ChatRequest> parse_anthropic_messages(std::string_view body) {
  FT_ASSIGN_OR_RETURN(Json j, detail::parse_body(body));
  ChatRequest req;
  req.dialect = Dialect::kAnthropic;
  FT_RETURN_IF_ERROR(detail::get_string(j, "model", "", req.model));
  if (req.model.empty()) return field_error("model", "missing");
  std::optional<int> max_tokens;
  FT_RETURN_IF_ERROR(detail::get_number(j, "max_tokens", "", max_tokens));
  if (!max_tokens) return field_error("max_tokens", "missing");
  if (*max_tokens < 1) return field_error("max_tokens", "must be at least 1");
  req.max_tokens = *max_tokens;

  if (auto s = j.find("system"); s != j.end() && !s->is_null()) {
    Message sys;
    sys.role = Message::Role::kSystem;
    FT_RETURN_IF_ERROR(collect_text(*s, "system", sys.content));
    req.messages.push_back(std::move(sys));
  }
  auto msgs = j.find("messages");
  if (msgs == j.end()) return field_error("messages", "missing");
  if (!msgs->is_array()) return field_error("messages", "expected an array");
  if (msgs->empty()) return field_error("messages", "must contain at least one message");
  for (size_t i = 0; i < msgs->size(); ++i)
    FT_RETURN_IF_ERROR(parse_message((*msgs)[i], "messages[" + std::to_string(i) + "]", req.messages));

  if (auto t = j.find("tools"); t != j.end() && !t->is_null()) FT_RETURN_IF_ERROR(parse_tools(*t, req.tools));
  if (auto tc = j.find("tool_choice"); tc != j.end() && tc->is_object()) {
    std::string type;
    FT_RETURN_IF_ERROR(detail::get_string(*tc, "type", "tool_choice", type));
    if (type == "any") req.tool_choice = ToolChoice::kRequired;
    else if (type == "none") req.tool_choice = ToolChoice::kNone;
    else if (type == "tool") {
      req.tool_choice = ToolChoice::kNamed;
      FT_RETURN_IF_ERROR(detail::get_string(*tc, "name", "tool_choice", req.tool_choice_name));
    }
  }
  FT_RETURN_IF_ERROR(detail::get_stop(j, "stop_sequences", req.stop));
  FT_RETURN_IF_ERROR(detail::get_number(j, "temperature", "", req.sampling.temperature));
  FT_RETURN_IF_ERROR(detail::get_number(j, "top_p", "", req.sampling.top_p));
  FT_RETURN_IF_ERROR(detail::get_number(j, "top_k", "", req.sampling.top_k));
  FT_RETURN_IF_ERROR(detail::get_bool(j, "stream", "", req.stream));
  if (auto th = j.find("thinking"); th != j.end() && th->is_object()) {
    std::string type;
    FT_RETURN_IF_ERROR(detail::get_string(*th, "type", "thinking", type));
    req.enable_thinking = type != "disabled";
  }
  return req;
}

}  // namespace ft::protocol

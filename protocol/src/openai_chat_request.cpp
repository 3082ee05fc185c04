// OpenAI Chat Completions request -> ChatRequest.
#include "ft/protocol/client_requests.h"
#include "json_fields.h"

namespace ft::protocol {
namespace {

using detail::field_error;
using detail::Json;

// content: a string, null, or an array of parts ({"type":"text","text":...}).
Status content_text(const Json& m, const std::string& path, std::string& out) {
  auto c = m.find("content");
  if (c == m.end() || c->is_null()) return {};
  if (c->is_string()) {
    out = c->get<std::string>();
    return {};
  }
  if (!c->is_array()) return field_error(path + ".content", "expected a string, null or an array of parts");
  for (size_t i = 0; i < c->size(); ++i) {
    const Json& part = (*c)[i];
    const std::string pp = path + ".content[" + std::to_string(i) + "]";
    std::string type;
    if (!part.is_object()) return field_error(pp, "expected a content part object");
    FT_RETURN_IF_ERROR(detail::get_string(part, "type", pp, type));
    if (type == "text" || type == "input_text" || type == "output_text") {
      std::string text;
      FT_RETURN_IF_ERROR(detail::get_string(part, "text", pp, text));
      out += text;
    } else if (type == "image_url" || type == "input_image" || type == "input_audio" || type == "file") {
      return unsupported(pp + ": " + type + " content is not supported by this model (text only)");
    } else {
      return field_error(pp + ".type", "unsupported content part type '" + type + "'");
    }
  }
  return {};
}

Status parse_message(const Json& m, const std::string& path, Message& msg) {
  if (!m.is_object()) return field_error(path, "expected a message object");
  std::string role;
  FT_RETURN_IF_ERROR(detail::get_string(m, "role", path, role));
  if (role == "system" || role == "developer") msg.role = Message::Role::kSystem;
  else if (role == "user") msg.role = Message::Role::kUser;
  else if (role == "assistant") msg.role = Message::Role::kAssistant;
  else if (role == "tool") msg.role = Message::Role::kTool;
  else return field_error(path + ".role", "unknown role '" + role + "'");
  FT_RETURN_IF_ERROR(content_text(m, path, msg.content));
  if (msg.role == Message::Role::kAssistant) {
    FT_RETURN_IF_ERROR(detail::get_string(m, "reasoning_content", path, msg.reasoning));
    if (msg.reasoning.empty()) FT_RETURN_IF_ERROR(detail::get_string(m, "reasoning", path, msg.reasoning));
    if (auto tcs = m.find("tool_calls"); tcs != m.end() && !tcs->is_null()) {
      if (!tcs->is_array()) return field_error(path + ".tool_calls", "expected an array");
      for (size_t i = 0; i < tcs->size(); ++i) {
        const Json& tc = (*tcs)[i];
        const std::string tp = path + ".tool_calls[" + std::to_string(i) + "]";
        if (!tc.is_object()) return field_error(tp, "expected an object");
        ToolCall call;
        FT_RETURN_IF_ERROR(detail::get_string(tc, "id", tp, call.id));
        auto fn = tc.find("function");
        if (fn == tc.end() || !fn->is_object()) return field_error(tp + ".function", "missing");
        FT_RETURN_IF_ERROR(detail::get_string(*fn, "name", tp + ".function", call.name));
        if (call.name.empty()) return field_error(tp + ".function.name", "missing");
        auto args = fn->find("arguments");
        if (args == fn->end() || args->is_null()) call.arguments_json = "{}";
        else if (args->is_string()) call.arguments_json = canonical_arguments(args->get<std::string>());
        else if (args->is_object()) call.arguments_json = args->dump();
        else return field_error(tp + ".function.arguments", "expected a JSON string");
        msg.tool_calls.push_back(std::move(call));
      }
    }
  }
  if (msg.role == Message::Role::kTool) {
    FT_RETURN_IF_ERROR(detail::get_string(m, "tool_call_id", path, msg.tool_call_id));
    FT_RETURN_IF_ERROR(detail::get_string(m, "name", path, msg.name));
  }
  return {};
}

}  // namespace

Status parse_openai_tools(const Json& tools, std::vector<ToolDefinition>& out, bool flat);

Result<ChatRequest> parse_openai_chat(std::string_view body) {
  FT_ASSIGN_OR_RETURN(Json j, detail::parse_body(body));
  ChatRequest req;
  req.dialect = Dialect::kOpenAIChat;
  FT_RETURN_IF_ERROR(detail::get_string(j, "model", "", req.model));
  if (req.model.empty()) return field_error("model", "missing");
  auto msgs = j.find("messages");
  if (msgs == j.end()) return field_error("messages", "missing");
  if (!msgs->is_array()) return field_error("messages", "expected an array");
  if (msgs->empty()) return field_error("messages", "must contain at least one message");
  for (size_t i = 0; i < msgs->size(); ++i) {
    Message msg;
    FT_RETURN_IF_ERROR(parse_message((*msgs)[i], "messages[" + std::to_string(i) + "]", msg));
    req.messages.push_back(std::move(msg));
  }
  if (auto t = j.find("tools"); t != j.end() && !t->is_null())
    FT_RETURN_IF_ERROR(parse_openai_tools(*t, req.tools, /*flat=*/false));
  if (auto tc = j.find("tool_choice"); tc != j.end() && !tc->is_null()) {
    if (tc->is_string()) {
      const std::string v = tc->get<std::string>();
      if (v == "none") req.tool_choice = ToolChoice::kNone;
      else if (v == "required") req.tool_choice = ToolChoice::kRequired;
    } else if (tc->is_object()) {
      req.tool_choice = ToolChoice::kNamed;
      if (auto fn = tc->find("function"); fn != tc->end() && fn->is_object())
        FT_RETURN_IF_ERROR(detail::get_string(*fn, "name", "tool_choice.function", req.tool_choice_name));
    }
  }
  std::optional<int> max_tokens;
  FT_RETURN_IF_ERROR(detail::get_number(j, "max_completion_tokens", "", max_tokens));
  if (!max_tokens) FT_RETURN_IF_ERROR(detail::get_number(j, "max_tokens", "", max_tokens));
  if (max_tokens && *max_tokens < 1) return field_error("max_tokens", "must be at least 1");
  req.max_tokens = max_tokens.value_or(0);
  FT_RETURN_IF_ERROR(detail::get_stop(j, "stop", req.stop));
  FT_RETURN_IF_ERROR(detail::get_number(j, "temperature", "", req.sampling.temperature));
  FT_RETURN_IF_ERROR(detail::get_number(j, "top_p", "", req.sampling.top_p));
  FT_RETURN_IF_ERROR(detail::get_number(j, "top_k", "", req.sampling.top_k));
  FT_RETURN_IF_ERROR(detail::get_number(j, "min_p", "", req.sampling.min_p));
  FT_RETURN_IF_ERROR(detail::get_number(j, "seed", "", req.sampling.seed));
  FT_RETURN_IF_ERROR(detail::get_bool(j, "stream", "", req.stream));
  if (auto so = j.find("stream_options"); so != j.end() && so->is_object())
    FT_RETURN_IF_ERROR(detail::get_bool(*so, "include_usage", "stream_options", req.include_usage));
  if (auto ctk = j.find("chat_template_kwargs"); ctk != j.end() && ctk->is_object()) {
    bool thinking = true;
    if (ctk->contains("enable_thinking")) {
      FT_RETURN_IF_ERROR(detail::get_bool(*ctk, "enable_thinking", "chat_template_kwargs", thinking));
      req.enable_thinking = thinking;
    }
  }
  return req;
}

// tools[]: Chat nests {"type":"function","function":{name,description,parameters}}; Responses is
// flat {"type":"function",name,description,parameters}. Non-function tools are not ours to run.
Status parse_openai_tools(const Json& tools, std::vector<ToolDefinition>& out, bool flat) {
  if (!tools.is_array()) return field_error("tools", "expected an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string path = "tools[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    if (!t.is_object()) return field_error(path, "expected an object");
    std::string type;
    FT_RETURN_IF_ERROR(detail::get_string(t, "type", path, type));
    if (type != "function") continue;
    const Json* fn = &t;
    std::string fpath = path;
    if (!flat) {
      auto it = t.find("function");
      if (it == t.end() || !it->is_object()) return field_error(path + ".function", "missing");
      fn = &*it;
      fpath += ".function";
    }
    ToolDefinition def;
    FT_RETURN_IF_ERROR(detail::get_string(*fn, "name", fpath, def.name));
    if (def.name.empty()) return field_error(fpath + ".name", "missing");
    FT_RETURN_IF_ERROR(detail::get_string(*fn, "description", fpath, def.description));
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
      if (!p->is_object()) return field_error(fpath + ".parameters", "expected an object");
      def.parameters_json = p->dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    out.push_back(std::move(def));
  }
  return {};
}

}  // namespace ft::protocol

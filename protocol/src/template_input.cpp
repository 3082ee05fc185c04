#include "ft/protocol/client_requests.h"
#include "json_fields.h"

namespace ft::protocol {

std::string to_template_json(const ChatRequest& request) {
  using detail::Json;
  Json messages = Json::array();
  for (const Message& m : request.messages) {
    Json j = {{"role", role_name(m.role)}, {"content", m.content}};
    if (!m.reasoning.empty()) j["reasoning_content"] = m.reasoning;
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCall& c : m.tool_calls) {
        // Templates expect a mapping here (Qwen: `arguments | tojson`; GLM iterates its items).
        Json args = Json::parse(c.arguments_json, nullptr, false);
        if (args.is_discarded()) args = c.arguments_json;
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
      }
      j["tool_calls"] = calls;
    }
    if (m.role == Message::Role::kTool) {
      if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
      if (!m.name.empty()) j["name"] = m.name;
    }
    messages.push_back(std::move(j));
  }
  Json out = {{"messages", messages}};
  if (!request.tools.empty()) {
    Json tools = Json::array();
    for (const ToolDefinition& t : request.tools) {
      Json params = Json::parse(t.parameters_json, nullptr, false);
      if (params.is_discarded()) params = Json::object();
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t.name}, {"description", t.description}, {"parameters", params}}}});
    }
    out["tools"] = tools;
  }
  if (request.enable_thinking) out["enable_thinking"] = *request.enable_thinking;
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace ft::protocol

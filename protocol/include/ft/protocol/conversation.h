// The canonical conversation every client dialect is parsed into: OpenAI-style messages, which is
// also what HF chat templates consume (role, content, reasoning_content, tool_calls, tool results).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ft::protocol {

enum class Dialect { kAnthropic, kOpenAIChat, kOpenAIResponses };

struct ToolCall {
  std::string id;              // as the client sent it (never used as a cache key: clients rewrite it)
  std::string name;
  std::string arguments_json;  // a JSON object, as text
};

struct Message {
  enum class Role { kSystem, kUser, kAssistant, kTool };
  Role role = Role::kUser;
  std::string content;
  std::string reasoning;            // assistant thinking, "" when none
  std::vector<ToolCall> tool_calls; // assistant
  std::string tool_call_id;         // tool
  std::string name;                 // tool: the function's name when known
};

const char* role_name(Message::Role role);  // "system", "user", "assistant", "tool"

struct ToolDefinition {
  std::string name;
  std::string description;
  std::string parameters_json = "{}";  // JSON Schema, as text
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct SamplingParams {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<double> min_p;
  std::optional<uint64_t> seed;
};

struct ChatRequest {
  Dialect dialect = Dialect::kOpenAIChat;
  std::string model;
  std::vector<Message> messages;
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;        // for kNamed
  int max_tokens = 0;                  // 0: the server's default
  std::vector<std::string> stop;
  SamplingParams sampling;
  bool stream = false;
  bool include_usage = false;          // OpenAI chat stream_options.include_usage
  std::optional<bool> enable_thinking; // unset: the template's default
};

}  // namespace ft::protocol

// Client API requests -> canonical conversation, including the quirks real agents send.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ft/protocol/api_error.h"
#include "ft/protocol/client_requests.h"

namespace ft::protocol {
namespace {

using Role = Message::Role;

TEST(AnthropicRequest, ClaudeCodeShapedConversation) {
  const char* body = R"({
    "model": "claude-opus-5-5", "max_tokens": 32000, "stream": true,
    "system": [{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.abc;"},
               {"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],
    "messages": [
      {"role":"user","content":"hi"},
      {"role":"system","content":"Today's date is 2026-11-30."},
      {"role":"assistant","content":[
         {"type":"thinking","thinking":"let me look","signature":"sig"},
         {"type":"text","text":"Looking."},
         {"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls -la","timeout":5}}]},
      {"role":"user","content":[
         {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.txt"},{"type":"tool_reference","tool_name":"X"}]},
         {"type":"text","text":"and now?"}]},
      {"role":"system","content":[]}
    ],
    "tools": [{"name":"Bash","description":"run","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}},
              {"name":"Deferred","description":"later","input_schema":{},"defer_loading":true},
              {"type":"web_search_20250305","name":"web_search"}],
    "thinking": {"type":"adaptive"}, "context_management": {"edits": []},
    "metadata": {"user_id": "{\"session\":1}"}, "output_config": {"effort": "high"}
  })";
  auto r = parse_anthropic_messages(body);
  ASSERT_TRUE(r) << r.status().to_string();
  const auto& m = r->messages;
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[0].role, Role::kSystem);
  EXPECT_EQ(m[0].content, "x-anthropic-billing-header: cc_version=2.1.332.abc;\nYou are Claude Code.");
  EXPECT_EQ(m[1].content, "hi");
  EXPECT_EQ(m[2].role, Role::kSystem);
  EXPECT_EQ(m[3].role, Role::kAssistant);
  EXPECT_EQ(m[3].reasoning, "let me look");
  EXPECT_EQ(m[3].content, "Looking.");
  ASSERT_EQ(m[3].tool_calls.size(), 1u);
  EXPECT_EQ(m[3].tool_calls[0].arguments_json, R"({"command":"ls -la","timeout":5})");
  EXPECT_EQ(m[4].role, Role::kTool);
  EXPECT_EQ(m[4].tool_call_id, "toolu_1");
  EXPECT_EQ(m[4].content, "a.txt");
  EXPECT_EQ(m[5].role, Role::kUser);
  EXPECT_EQ(m[5].content, "and now?");
  EXPECT_EQ(m[6].role, Role::kSystem);  // /compact's empty system message stays in place
  EXPECT_EQ(m[6].content, "");
  ASSERT_EQ(r->tools.size(), 1u);  // deferred and server tools are not rendered
  EXPECT_EQ(r->tools[0].name, "Bash");
  EXPECT_EQ(r->max_tokens, 32000);
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->enable_thinking, true);
}

TEST(AnthropicRequest, RejectsBadInputNamingTheField) {
  struct Case { const char* body; const char* needle; ErrorCode code; };
  const Case cases[] = {
      {"{not json", "not valid JSON", ErrorCode::kInvalidArgument},
      {"[1,2]", "must be a JSON object", ErrorCode::kInvalidArgument},
      {R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}]})", "model: missing", ErrorCode::kInvalidArgument},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens: missing", ErrorCode::kInvalidArgument},
      {R"({"model":"m","max_tokens":"5","messages":[]})", "max_tokens: expected a number", ErrorCode::kInvalidArgument},
      // 2^32 + 1 once wrapped to an int of 1.
      {R"({"model":"m","max_tokens":4294967297,"messages":[{"role":"user","content":"x"}]})",
       "max_tokens: out of range", ErrorCode::kInvalidArgument},
      {R"({"model":"m","max_tokens":-4294967295,"messages":[{"role":"user","content":"x"}]})",
       "max_tokens: out of range", ErrorCode::kInvalidArgument},
      {R"({"model":"m","max_tokens":5,"messages":[]})", "at least one message", ErrorCode::kInvalidArgument},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"bot","content":"x"}]})", "messages[0].role", ErrorCode::kInvalidArgument},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
       "not supported", ErrorCode::kUnsupported},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"magic"}]}]})",
       "messages[0].content[0].type", ErrorCode::kInvalidArgument},
  };
  for (const auto& c : cases) {
    auto r = parse_anthropic_messages(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.status().code(), c.code) << c.body;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
}

TEST(OpenAIChatRequest, ToolLoopWithReserialisedArguments) {
  const char* body = R"({
    "model": "freetoken-model", "stream": true, "stream_options": {"include_usage": true},
    "messages": [
      {"role":"system","content":"sys"},
      {"role":"user","content":[{"type":"text","text":"list files"}]},
      {"role":"assistant","content":null,"reasoning_content":"think",
       "tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls -la\", \"a\": 1}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"a.txt"}
    ],
    "tools": [{"type":"function","function":{"name":"bash","description":"d","parameters":{"type":"object","properties":{"z":{},"a":{}}}}}],
    "tool_choice": "auto", "max_tokens": 64, "temperature": 0.5, "seed": 7
  })";
  auto r = parse_openai_chat(body);
  ASSERT_TRUE(r) << r.status().to_string();
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[1].content, "list files");
  EXPECT_EQ(r->messages[2].reasoning, "think");
  // Compact, key order kept: the same bytes whether or not the client re-serialised them.
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments_json, R"({"command":"ls -la","a":1})");
  EXPECT_EQ(r->messages[3].role, Role::kTool);
  EXPECT_EQ(r->tools[0].parameters_json, R"({"type":"object","properties":{"z":{},"a":{}}})");
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->max_tokens, 64);
  EXPECT_EQ(r->sampling.seed, 7u);
}

TEST(OpenAIChatRequest, RejectsBadInput) {
  EXPECT_EQ(parse_openai_chat(R"({"model":"m"})").status().message(), "messages: missing");
  EXPECT_EQ(parse_openai_chat(R"({"model":"m","messages":[{"role":"user","content":5}]})").status().message(),
            "messages[0].content: expected a string, null or an array of parts");
  auto img = parse_openai_chat(R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]})");
  EXPECT_EQ(img.status().code(), ErrorCode::kUnsupported);
  EXPECT_FALSE(parse_openai_chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0})"));
  auto wide = parse_openai_chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":4294967297})");
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.status().message().find("max_tokens: out of range"), std::string::npos) << wide.status().message();
}

TEST(OpenAIResponsesRequest, ItemsBecomeTurns) {
  const char* body = R"({
    "model": "m", "instructions": "be brief", "stream": true, "max_output_tokens": 50,
    "input": [
      {"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
      {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"plan"}],"encrypted_content":"xyz"},
      {"type":"function_call","call_id":"c1","name":"bash","arguments":"{\"cmd\": \"ls\"}"},
      {"type":"function_call_output","call_id":"c1","output":"a.txt"},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}
    ],
    "tools": [{"type":"function","name":"bash","description":"d","parameters":{"type":"object"}}]
  })";
  auto r = parse_openai_responses(body);
  ASSERT_TRUE(r) << r.status().to_string();
  ASSERT_EQ(r->messages.size(), 5u);
  EXPECT_EQ(r->messages[0].content, "be brief");
  EXPECT_EQ(r->messages[2].role, Role::kAssistant);
  EXPECT_EQ(r->messages[2].reasoning, "plan");
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments_json, R"({"cmd":"ls"})");
  EXPECT_EQ(r->messages[3].role, Role::kTool);
  EXPECT_EQ(r->messages[4].content, "done");
  EXPECT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->max_tokens, 50);
  EXPECT_EQ(parse_openai_responses(R"({"model":"m"})").status().message(), "input: missing");
  auto wide = parse_openai_responses(R"({"model":"m","input":"x","max_output_tokens":18446744073709551615})");
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.status().message().find("max_output_tokens: out of range"), std::string::npos)
      << wide.status().message();
}

TEST(ApiError, BodiesFollowEachSchema) {
  ApiError e{ApiErrorKind::kOverloaded, "queue full", 2, ""};
  EXPECT_EQ(http_status(Dialect::kAnthropic, e.kind), 529);
  EXPECT_EQ(http_status(Dialect::kOpenAIChat, e.kind), 503);
  auto a = nlohmann::json::parse(error_body(Dialect::kAnthropic, e));
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "overloaded_error");
  EXPECT_EQ(a["error"]["message"], "queue full");
  auto o = nlohmann::json::parse(error_body(Dialect::kOpenAIChat, {ApiErrorKind::kInvalidRequest, "bad", {}, "messages"}));
  EXPECT_EQ(o["error"]["type"], "invalid_request_error");
  EXPECT_EQ(o["error"]["param"], "messages");
  EXPECT_TRUE(o["error"]["code"].is_null());
  EXPECT_EQ(api_error_from_status(not_found("no such model")).kind, ApiErrorKind::kNotFound);
}

}  // namespace
}  // namespace ft::protocol

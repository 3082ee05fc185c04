// Response encoders: whole bodies and SSE streams in each client API's format.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "ft/protocol/client_responses.h"

namespace ft::protocol {
namespace {

using nlohmann::json;

struct Frame {
  std::string event;  // "" for data-only frames
  std::string data;
};

std::vector<Frame> parse_sse(const std::string& s) {
  std::vector<Frame> frames;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated frame";
    if (end == std::string::npos) break;
    Frame f;
    std::istringstream lines(s.substr(pos, end - pos));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("event: ", 0) == 0) f.event = line.substr(7);
      else if (line.rfind("data: ", 0) == 0) f.data = line.substr(6);
      else ADD_FAILURE() << "bad SSE line: " << line;
    }
    frames.push_back(f);
    pos = end + 2;
  }
  return frames;
}

// reasoning, text, one tool call: the shape of a typical agent turn.
std::string drive(StreamEncoder& enc, FinishReason finish) {
  Usage prompt{100, 80, 0};
  std::string out = enc.begin(prompt);
  out += enc.event(ReasoningDelta{"plan "});
  out += enc.event(ReasoningDelta{"it"});
  out += enc.event(TextDelta{"Running"});
  out += enc.event(ToolCallStart{0, "call_a", "bash"});
  out += enc.event(ToolCallArgsDelta{0, R"({"cmd":"ls"})"});
  out += enc.event(ToolCallEnd{0});
  out += enc.end(finish, Usage{100, 80, 7});
  return out;
}

ParsedOutput sample_output() {
  ParsedOutput o;
  o.reasoning = "plan it";
  o.text = "Running";
  o.tool_calls.push_back({"call_a", "bash", R"({"cmd":"ls"})", ""});
  return o;
}

TEST(AnthropicStream, BlocksInOrderWithFinishSignal) {
  auto enc = make_stream_encoder(Dialect::kAnthropic, {"msg_1", "m", 0}, false);
  auto frames = parse_sse(drive(*enc, FinishReason::kToolUse));
  std::vector<std::string> types;
  for (auto& f : frames) {
    auto j = json::parse(f.data);
    EXPECT_EQ(j["type"], f.event);
    types.push_back(f.event);
  }
  const std::vector<std::string> want = {
      "message_start", "content_block_start", "content_block_delta", "content_block_delta",
      "content_block_delta" /*signature*/, "content_block_stop", "content_block_start", "content_block_delta",
      "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
      "message_delta", "message_stop"};
  EXPECT_EQ(types, want);
  auto start = json::parse(frames[0].data);
  EXPECT_EQ(start["message"]["usage"]["input_tokens"], 20);  // uncached part only
  EXPECT_EQ(start["message"]["usage"]["cache_read_input_tokens"], 80);
  auto tool = json::parse(frames[9].data);
  EXPECT_EQ(tool["index"], 2);
  EXPECT_EQ(tool["content_block"]["type"], "tool_use");
  EXPECT_EQ(json::parse(frames[10].data)["delta"]["partial_json"], R"({"cmd":"ls"})");
  auto md = json::parse(frames[12].data);
  EXPECT_EQ(md["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(md["usage"]["output_tokens"], 7);
}

TEST(AnthropicFull, ContentBlocksAndUsage) {
  auto j = json::parse(full_response(Dialect::kAnthropic, {"msg_1", "m", 0}, sample_output(),
                                     FinishReason::kToolUse, {100, 80, 7}));
  EXPECT_EQ(j["type"], "message");
  ASSERT_EQ(j["content"].size(), 3u);
  EXPECT_EQ(j["content"][0]["type"], "thinking");
  EXPECT_EQ(j["content"][2]["input"]["cmd"], "ls");
  EXPECT_EQ(j["stop_reason"], "tool_use");
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 80);
}

TEST(OpenAIChatStream, ChunksUsageAndDone) {
  auto enc = make_stream_encoder(Dialect::kOpenAIChat, {"chatcmpl-1", "m", 5}, true);
  auto frames = parse_sse(drive(*enc, FinishReason::kToolUse));
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames.back().data, "[DONE]");
  auto usage = json::parse(frames[frames.size() - 2].data);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 80);
  auto fin = json::parse(frames[frames.size() - 3].data);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "tool_calls");
  std::string reasoning, args;
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    auto j = json::parse(frames[i].data);
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    if (j["choices"].empty()) continue;
    auto& d = j["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("tool_calls")) args += d["tool_calls"][0]["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "plan it");
  EXPECT_EQ(args, R"({"cmd":"ls"})");
}

TEST(OpenAIChatFull, MessageWithToolCalls) {
  auto j = json::parse(full_response(Dialect::kOpenAIChat, {"chatcmpl-1", "m", 5}, sample_output(),
                                     FinishReason::kToolUse, {100, 80, 7}));
  auto& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "plan it");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"cmd":"ls"})");
  EXPECT_EQ(j["usage"]["total_tokens"], 107);
}

TEST(OpenAIResponsesStream, ItemsAndCompletedResponse) {
  auto enc = make_stream_encoder(Dialect::kOpenAIResponses, {"resp_1", "m", 5}, false);
  auto frames = parse_sse(drive(*enc, FinishReason::kToolUse));
  int seq = 0;
  for (auto& f : frames) {
    auto j = json::parse(f.data);
    EXPECT_EQ(j["type"], f.event);
    EXPECT_EQ(j["sequence_number"], seq++);
  }
  EXPECT_EQ(frames.front().event, "response.created");
  ASSERT_EQ(frames.back().event, "response.completed");
  auto r = json::parse(frames.back().data)["response"];
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Running");
  EXPECT_EQ(r["output"][2]["arguments"], R"({"cmd":"ls"})");
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 80);
}

TEST(OpenAIResponsesFull, IncompleteOnMaxTokens) {
  auto j = json::parse(full_response(Dialect::kOpenAIResponses, {"resp_1", "m", 5}, sample_output(),
                                     FinishReason::kMaxTokens, {100, 0, 7}));
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
}

TEST(ResponseIds, UniqueWithDialectPrefix) {
  auto a = make_response_id(Dialect::kAnthropic), b = make_response_id(Dialect::kAnthropic);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("msg_", 0), 0u);
  EXPECT_EQ(make_response_id(Dialect::kOpenAIChat).rfind("chatcmpl-", 0), 0u);
}

}  // namespace
}  // namespace ft::protocol

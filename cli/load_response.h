// A chat response read the way its client reads it, in any of the three dialects: a JSON body, or
// a server-sent event stream fed as it arrives. What `bench load` keeps of it: the model's answer
// as one comparable text (text, reasoning and tool calls in order; never the ids the server mints),
// the token counts from its usage, whether it ended properly, and the error it carried instead.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ft/protocol/conversation.h"

namespace ft::cli {

struct ResponseSummary {
  std::string answer;
  std::size_t content_bytes = 0;  // of the answer, without its part markers
  int output_tokens = 0;
  int prompt_tokens = 0;
  int cached_tokens = 0;   // prompt tokens restored from a checkpoint
  bool complete = false;   // the body parsed, or the stream reached its end event
  bool error = false;      // an error object instead of (or in the middle of) the answer
  std::string error_type;  // the error's type as the dialect names it (e.g. overloaded_error)
  std::string error_message;
};

// A whole (non-streaming) response body.
ResponseSummary read_response_body(protocol::Dialect dialect, const std::string& body);

// A response stream: feed() the bytes as they come; summary() at any time.
class StreamReader {
 public:
  explicit StreamReader(protocol::Dialect dialect) : dialect_(dialect) {}
  void feed(const char* data, std::size_t n);
  // True once a content delta (text, reasoning or tool call) has arrived: the first token.
  bool saw_content() const { return saw_content_; }
  const ResponseSummary& summary() const { return summary_; }

 private:
  void event(const std::string& data);
  void anthropic(const nlohmann::json& e);
  void openai_chat(const nlohmann::json& e);
  void openai_responses(const nlohmann::json& e);
  void content(const std::string& piece);

  protocol::Dialect dialect_;
  std::string pending_;  // bytes of an event not yet complete
  std::string part_;     // Chat Completions: the kind of part being streamed (its deltas name none)
  bool saw_content_ = false;
  ResponseSummary summary_;
};

// Anthropic's overloaded_error / rate_limit_error, OpenAI's rate_limit_exceeded: the error shapes
// a client retries after a pause (mid-stream, where there is no HTTP status to go by).
bool retryable_error_type(const std::string& type);

}  // namespace ft::cli

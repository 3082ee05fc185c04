// Model output -> each client API's response: a whole JSON body (non-streaming) or Server-Sent
// Events (streaming), driven by the output parser's events (output_parser.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ft/protocol/conversation.h"
#include "ft/protocol/output_parser.h"

namespace ft::protocol {

struct Usage {
  int input_tokens = 0;         // whole prompt, restored tokens included
  int cached_input_tokens = 0;  // restored from a checkpoint instead of computed
  int output_tokens = 0;
};

enum class FinishReason { kEndTurn, kMaxTokens, kStopSequence, kToolUse };

struct ResponseMeta {
  std::string id;       // "msg_…", "chatcmpl-…", "resp_…" as the dialect expects
  std::string model;
  int64_t created = 0;  // unix seconds
};

// A fresh response id for the dialect, unique within this process and across restarts.
std::string make_response_id(Dialect dialect);

// Whole response body (stream: false).
std::string full_response(Dialect dialect, const ResponseMeta& meta, const ParsedOutput& output,
                          FinishReason finish, const Usage& usage, std::string_view stop_sequence = {});

// Streaming encoder: each call returns complete SSE frames ("event: …\ndata: …\n\n" or
// "data: …\n\n") ready to write to the socket; "" when nothing is due.
class StreamEncoder {
 public:
  virtual ~StreamEncoder() = default;
  virtual std::string begin(const Usage& prompt_usage) = 0;
  virtual std::string event(const OutputEvent& event) = 0;
  // The finish signal every client needs (without one they retry or fail).
  virtual std::string end(FinishReason finish, const Usage& usage, std::string_view stop_sequence = {}) = 0;
};

// include_usage: OpenAI Chat's stream_options.include_usage (a final usage-only chunk).
std::unique_ptr<StreamEncoder> make_stream_encoder(Dialect dialect, const ResponseMeta& meta, bool include_usage);

}  // namespace ft::protocol

// Dispatch by dialect to the three encoders.
#include "ft/protocol/client_responses.h"

namespace ft::protocol {

std::string anthropic_full_response(const ResponseMeta&, const ParsedOutput&, FinishReason, const Usage&, std::string_view);
std::string openai_chat_full_response(const ResponseMeta&, const ParsedOutput&, FinishReason, const Usage&);
std::string openai_responses_full_response(const ResponseMeta&, const ParsedOutput&, FinishReason, const Usage&);
std::unique_ptr<StreamEncoder> make_anthropic_stream(const ResponseMeta&);
std::unique_ptr<StreamEncoder> make_openai_chat_stream(const ResponseMeta&, bool include_usage);
std::unique_ptr<StreamEncoder> make_openai_responses_stream(const ResponseMeta&);

std::string full_response(Dialect dialect, const ResponseMeta& meta, const ParsedOutput& output,
                          FinishReason finish, const Usage& usage, std::string_view stop_sequence) {
  switch (dialect) {
    case Dialect::kAnthropic: return anthropic_full_response(meta, output, finish, usage, stop_sequence);
    case Dialect::kOpenAIChat: return openai_chat_full_response(meta, output, finish, usage);
    case Dialect::kOpenAIResponses: return openai_responses_full_response(meta, output, finish, usage);
  }
  return "";
}

std::unique_ptr<StreamEncoder> make_stream_encoder(Dialect dialect, const ResponseMeta& meta, bool include_usage) {
  switch (dialect) {
    case Dialect::kAnthropic: return make_anthropic_stream(meta);
    case Dialect::kOpenAIChat: return make_openai_chat_stream(meta, include_usage);
    case Dialect::kOpenAIResponses: return make_openai_responses_stream(meta);
  }
  return nullptr;
}

}  // namespace ft::protocol

// Parses each client API's request body into the canonical ChatRequest. Errors are
// kInvalidArgument (or kUnsupported for valid-but-unserved input such as images) with a message
// naming the field path, e.g. "messages[2].content[0].type: unknown content block type 'foo'".
// Unknown top-level fields and beta features are ignored, as real clients send many.
#pragma once

#include <string_view>

#include "ft/common/result.h"
#include "ft/protocol/conversation.h"

namespace ft::protocol {

Result<ChatRequest> parse_anthropic_messages(std::string_view body);  // POST /v1/messages
Result<ChatRequest> parse_openai_chat(std::string_view body);         // POST /v1/chat/completions
Result<ChatRequest> parse_openai_responses(std::string_view body);    // POST /v1/responses

// Tool-call arguments as compact JSON with key order kept (clients re-serialise what we sent, so
// the canonical form must not depend on spacing); non-JSON text is kept verbatim.
std::string canonical_arguments(std::string_view arguments);

}  // namespace ft::protocol

namespace ft::protocol {

// The conversation as chat templates consume it (transformers' apply_chat_template input):
// {"messages": [{role, content, reasoning_content?, tool_calls?: [{id, type, function: {name,
// arguments: <object>}}], tool_call_id?, name?}], "tools": [{type: "function", function: {...}}]}
// plus "enable_thinking" when the request set it.
std::string to_template_json(const ChatRequest& request);

}  // namespace ft::protocol

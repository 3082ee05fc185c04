// One chat request end to end: parse the client's body, render it with the model's template,
// generate, parse the output back into text/reasoning/tool calls, encode the client's response.
#pragma once

#include <functional>
#include <string>

#include "ft/protocol/api_error.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/client_requests.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/backend.h"
#include "ft/proxy/server.h"

namespace ft::proxy {

struct ChatContext {
  const ServerOptions& options;
  GenerationBackend& backend;
  const protocol::Tokenizer& tokenizer;
  const protocol::ChatTemplate& chat_template;
};

struct PreparedTurn {
  protocol::ChatRequest request;
  std::vector<int32_t> prompt;
  bool starts_in_reasoning = false;  // the generation prompt opened a thinking block
};

// Parse + validate + render + tokenize. Errors come back as the API error to send.
Result<PreparedTurn> prepare_turn(const ChatContext& ctx, protocol::Dialect dialect, const std::string& body,
                                  protocol::ApiError& error);

// Non-streaming: the whole response body, or the error to send.
Result<std::string> run_turn(const ChatContext& ctx, const PreparedTurn& turn, protocol::ApiError& error);

// Streaming: writes SSE frames through `write` (false = client gone: generation stops).
void stream_turn(const ChatContext& ctx, const PreparedTurn& turn, const std::function<bool(const std::string&)>& write);

// "qwen3", "qwen3.5", ...: the output-parser family for an engine model family.
std::string parser_family(const std::string& model_family);

}  // namespace ft::proxy

// One chat request end to end: parse the client's body (after the normalisation rules), render it
// with the model's template and cut it at semantic boundaries, restore the deepest checkpoint the
// engine holds and send only the suffix, parse the output back into text/reasoning/tool calls,
// encode the client's response.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "checkpoint_plan.h"
#include "ft/protocol/api_error.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/client_requests.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/backend.h"
#include "ft/proxy/server.h"
#include "model_names.h"

namespace ft::proxy {

struct ChatContext {
  const ServerOptions& options;
  GenerationBackend& backend;
  const protocol::Tokenizer& tokenizer;
  const protocol::ChatTemplate& chat_template;
  PinLedger& pins;
  ModelNames& names;
};

struct PreparedTurn {
  protocol::ChatRequest request;
  std::string tenant;
  std::vector<int32_t> prompt;
  std::vector<std::size_t> boundaries;  // token positions of the semantic boundaries, increasing
  bool starts_in_reasoning = false;     // the generation prompt opened a thinking block
  std::size_t boundaries_skipped = 0;   // left out for lack of preparation budget (the oldest)
};

// An admitted generation, its restore done.
struct LaunchedTurn {
  std::unique_ptr<Generation> generation;
  int64_t cached_tokens = 0;  // prompt tokens restored from a checkpoint
};

// Parse + normalise + validate + render + tokenize + (unless `find_boundaries` is false: a caller
// that only counts tokens) the semantic boundaries. A prompt longer than the context is refused
// after one render and one tokenization, before the boundary search (a few renders per message).
// Errors come back as the API error to send.
Result<PreparedTurn> prepare_turn(const ChatContext& ctx, protocol::Dialect dialect, const std::string& body,
                                  const std::string& tenant, protocol::ApiError& error, bool find_boundaries = true);

// POST /v1/messages/count_tokens: a Messages body without max_tokens, prepared like a chat turn
// (what it counts is the prompt the chat would send) but without searching boundaries.
Result<PreparedTurn> prepare_count_tokens(const ChatContext& ctx, const std::string& body, const std::string& tenant,
                                          protocol::ApiError& error);

// Lookup + start: on return the engine has admitted the request and restored its prefix (a
// checkpoint that vanished in between is retried as a full prefill).
Result<LaunchedTurn> launch_turn(const ChatContext& ctx, const PreparedTurn& turn, protocol::ApiError& error);

// Non-streaming: the whole response body, or the error to send.
Result<std::string> run_turn(const ChatContext& ctx, const PreparedTurn& turn, LaunchedTurn launched,
                             protocol::ApiError& error, std::string* text_out = nullptr);

// Streaming: writes SSE frames through `write` (false = client gone: generation stops).
// text_out (optional) receives the assistant text streamed, for traffic capture.
void stream_turn(const ChatContext& ctx, const PreparedTurn& turn, LaunchedTurn launched,
                 const std::function<bool(const std::string&)>& write, std::string* text_out = nullptr);

// "qwen3", "qwen3.5", ...: the output-parser family for a model (its chat template's markup, else
// its engine family; protocol::output_parser_for), "plain" when neither names one.
std::string parser_family(const std::string& model_family, std::span<const std::string> template_markers);

}  // namespace ft::proxy

// Conversation -> prompt text, by executing the checkpoint's own Jinja chat template (jinja.h) with
// the variables transformers' apply_chat_template passes, plus the semantic boundaries of the
// result: where each message, thinking block, tool call and tool result starts.
//
// Input: OpenAI-style JSON {"messages": [...], "tools": [...]} passed to the template exactly as
// given (tool-call arguments stay objects or strings, as the client sent them; templates differ in
// which they expect, and HF passes the client's value through). Optional keys in the same object:
// "add_generation_prompt" (default true), "enable_thinking", "chat_template_kwargs" (an object of
// further template variables, e.g. reasoning_effort); ChatRenderOptions overrides them.
//
// Boundaries are what prefix caching and per-message accounting need: a boundary b promises that
// text[0, b) is rendered identically whatever follows (later messages, the content of the element
// that starts at b) and that b sits at the start of a marker token (<|im_start|>, <tool_call>, ...)
// so the token prefix up to b is stable too. They are found by rendering, not by knowing the
// format: a message boundary is the longest common prefix of render(messages[:k]) and
// render(messages); an element boundary is the longest common prefix of the render and a render in
// which that element's payload is replaced by a sentinel. Either point is then moved back to the
// nearest marker (tag-like literals taken from the template source). This costs a few renders per
// message but works for any template, including ones we have never seen, and cannot place a
// boundary where a later message would change the text before it (the failure mode of hand-written
// offsets). With a tokenizer, each boundary is also checked in token space (the ids of text[0, b)
// must be a prefix of the ids of the whole text) and moved back further if not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ft/common/result.h"

namespace ft::protocol {

class Tokenizer;

struct ChatRenderOptions {
  std::optional<bool> add_generation_prompt;  // unset: the conversation's key, else true
  std::optional<bool> enable_thinking;        // unset: the conversation's key, else not passed
  std::optional<int64_t> now_unix_seconds;    // pins strftime_now (formatted in UTC) for goldens
};

struct ChatBoundary {
  enum class Kind { kMessage, kThinking, kToolCall, kToolResult, kGenerationPrompt };
  Kind kind = Kind::kMessage;
  size_t message = 0;    // index into messages (messages.size() for the generation prompt)
  size_t item = 0;       // tool call index within the message (kToolCall)
  size_t char_offset = 0;  // byte offset into RenderedChat::text
  std::optional<size_t> token_index;  // set by tokenize_chat()
};
const char* boundary_kind_name(ChatBoundary::Kind kind);  // "message", "thinking", ...

struct RenderedChat {
  std::string text;
  std::vector<ChatBoundary> boundaries;  // sorted by char_offset, then by kind order of discovery
};

class ChatTemplate {
 public:
  // `special_tokens`: variables such as {"bos_token", "<s>"}; transformers passes the tokenizer's
  // special-tokens map to every template.
  static Result<ChatTemplate> create(std::string_view source,
                                     std::vector<std::pair<std::string, std::string>> special_tokens = {});
  // The tokenizer directory's template with its bos/eos/pad tokens; kNotFound when it ships none.
  static Result<ChatTemplate> from_tokenizer(const Tokenizer& tokenizer);

  Result<std::string> render(std::string_view conversation_json, const ChatRenderOptions& options = {}) const;
  Result<RenderedChat> render_with_boundaries(std::string_view conversation_json,
                                              const ChatRenderOptions& options = {}) const;

  // Tag-like literals of the template (<|im_start|>, <think>, <｜tool▁call▁begin｜>, ...): the only
  // places a boundary may sit.
  const std::vector<std::string>& markers() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

// Token ids of `chat.text` (HF encode without added BOS/EOS: templates write those themselves),
// filling each boundary's token_index. A boundary whose text prefix does not tokenize to a prefix
// of the ids moves back to the previous marker that does.
Result<std::vector<int32_t>> tokenize_chat(RenderedChat& chat, const ChatTemplate& tmpl, const Tokenizer& tokenizer);

}  // namespace ft::protocol

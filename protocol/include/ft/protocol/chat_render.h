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
//
// Those renders cost O(messages x rendered size), so a body of many tiny messages would hold a
// thread for hours. Finding and checking boundaries therefore spends from one budget per
// conversation, counted in work units, not time, so that what is found never depends on the
// machine or its load: a byte rendered or tokenized is one unit, and a render costs
// kBoundaryWorkPerMessage more per message it is given (templates walk messages that print little;
// Qwen3's walks one in about the time it prints 2 KB). Messages are searched newest first,
// so when the budget runs out the boundaries left out are the oldest: prefix caching needs the
// newest (the deepest state to save, the checkpoint the next turn restores). A boundary skipped is
// simply absent; every boundary reported keeps its promise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ft/common/result.h"
#include "ft/protocol/tokenizer.h"

namespace ft::protocol {

// Work units: see the top of this file.
inline constexpr std::size_t kBoundaryWorkPerMessage = 2048;
// The default budget for a conversation whose full render costs `render_work` units: 2 GiB units
// (a few seconds of one core; every boundary of an agent conversation of 300 messages and 1 MB of
// text costs ~1 G units, of 500 messages and 1 MB ~2 G), or 16 renders' worth when that is more
// (only bodies far beyond any context window: the newest few messages' boundaries are found).
std::size_t default_boundary_work_limit(std::size_t render_work);

struct ChatRenderOptions {
  std::optional<bool> add_generation_prompt;  // unset: the conversation's key, else true
  std::optional<bool> enable_thinking;        // unset: the conversation's key, else not passed
  std::optional<int64_t> now_unix_seconds;    // pins strftime_now (formatted in UTC) for goldens
  std::optional<std::size_t> boundary_work_limit;  // unset: default_boundary_work_limit
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
  // The budget (see the top of this file): work spent so far, by render_with_boundaries and then
  // tokenize_chat (the full render and encode included), its limit, and the boundaries left out
  // because it ran out (searches not made, or token checks not made).
  std::size_t boundary_work = 0;
  std::size_t boundary_work_limit = SIZE_MAX;
  std::size_t boundaries_skipped = 0;
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
  // The boundaries of a render the caller already made: `text` must be render(conversation_json,
  // options). render_with_boundaries in two steps, so that a caller can refuse a conversation on
  // its size (its token count) after one render, before paying for the boundaries.
  Result<RenderedChat> find_boundaries(std::string_view conversation_json, std::string text,
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
// of the ids moves back to the previous marker that does. A boundary at an added token is checked
// by the cuts of the one encode (Tokenizer::encode_with_cuts); any other costs an encode of its
// prefix from the budget, newest first, and one the budget cannot pay for is dropped.
Result<std::vector<int32_t>> tokenize_chat(RenderedChat& chat, const ChatTemplate& tmpl, const Tokenizer& tokenizer);
// The same for a caller that has the ids and cuts of chat.text already (encode_with_cuts).
void tokenize_boundaries(RenderedChat& chat, const ChatTemplate& tmpl, const Tokenizer& tokenizer,
                         std::span<const int32_t> ids, std::span<const TokenCut> cuts);

}  // namespace ft::protocol

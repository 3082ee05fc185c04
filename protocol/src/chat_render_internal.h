// Shared by chat_render.cpp (rendering) and chat_boundaries.cpp (boundary discovery).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ft/protocol/chat_render.h"
#include "ft/protocol/jinja.h"

namespace ft::protocol {

using jinja::List;

struct ChatTemplate::Impl {
  jinja::Template tmpl;
  std::vector<std::pair<std::string, std::string>> special_tokens;
  std::vector<std::string> markers;
};

// A parsed conversation with the render options resolved.
struct Conversation {
  List messages;
  jinja::Value tools;            // None when absent, as transformers passes it
  bool add_generation_prompt = true;
  jinja::Value enable_thinking;  // undefined: not passed
  jinja::Dict kwargs;
  std::optional<int64_t> now_unix_seconds;
};

Result<Conversation> parse_conversation(std::string_view json, const ChatRenderOptions& options);
Result<std::string> render_conversation(const ChatTemplate::Impl& impl, const Conversation& c, const List& messages,
                                        bool add_generation_prompt);

}  // namespace ft::protocol

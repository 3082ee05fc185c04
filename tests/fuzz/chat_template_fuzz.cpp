// libFuzzer target for the Jinja renderer under the real chat templates (Qwen3's, DeepSeek-V3's)
// with hostile message content and tool schemas, and for the boundary finder and tokenize_chat on
// top of it. The first byte picks the template and the options; with its high bit set the rest is
// a conversation document as clients could send it (nesting-guarded like a request body), else
// the rest is split at 0xFF bytes into the fields of a fixed conversation (system, user,
// assistant text and reasoning, a tool call's name and arguments, a tool result, a tool's
// description and parameter schema). Rendering may fail, never crash; a render's boundaries are
// ordered, inside the text, and their token indices inside the ids.
#include <cstdint>
#include <string>
#include <vector>

#include "ft/protocol/json_depth.h"
#include "fuzz_data.h"
#include "nlohmann/json.hpp"

namespace ft::fuzz {
namespace {

using nlohmann::json;

// Arguments or a schema as a client may send them: the JSON the field holds, else the raw text.
json as_json_or_text(const std::string& s) {
  if (!protocol::json_depth_within(s)) return s;
  json j = json::parse(s, nullptr, false);
  return j.is_discarded() ? json(s) : j;
}

json fixed_conversation(const std::vector<std::string>& f) {
  auto field = [&](std::size_t i) { return i < f.size() ? f[i] : std::string(); };
  json call = {{"id", "call_1"},
               {"type", "function"},
               {"function", {{"name", field(4)}, {"arguments", as_json_or_text(field(5))}}}};
  json params = as_json_or_text(field(8));
  json tool = {{"type", "function"},
               {"function", {{"name", field(4)}, {"description", field(7)}, {"parameters", params}}}};
  return {{"messages", json::array({{{"role", "system"}, {"content", field(0)}},
                                    {{"role", "user"}, {"content", field(1)}},
                                    {{"role", "assistant"},
                                     {"content", field(2)},
                                     {"reasoning_content", field(3)},
                                     {"tool_calls", json::array({call})}},
                                    {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", field(6)}},
                                    {{"role", "user"}, {"content", field(9)}}})},
          {"tools", json::array({tool})}};
}

void check(const protocol::RenderedChat& chat, const std::vector<int32_t>& ids) {
  std::size_t last = 0;
  for (const protocol::ChatBoundary& b : chat.boundaries) {
    if (b.char_offset > chat.text.size()) fail("a boundary past the rendered text");
    if (b.char_offset < last) fail("boundaries not in text order");
    last = b.char_offset;
    if (b.token_index && *b.token_index > ids.size()) fail("a boundary's token index past the ids");
  }
}

}  // namespace
}  // namespace ft::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ft::fuzz::load_all();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ft;
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const fuzz::Vocab vocab = (mode & 1) ? fuzz::Vocab::kDeepSeekV3 : fuzz::Vocab::kQwen3;
  protocol::ChatRenderOptions options;
  options.add_generation_prompt = (mode & 2) != 0;
  if (mode & 4) options.enable_thinking = (mode & 8) != 0;
  options.now_unix_seconds = 0;

  std::string conversation;
  if (mode & 0x80) {
    if (!protocol::json_depth_within(rest)) return 0;
    conversation = rest;
  } else {
    std::vector<std::string> fields(1);
    for (char c : rest) {
      if (static_cast<std::uint8_t>(c) == 0xFF)
        fields.emplace_back();
      else
        fields.back() += c;
    }
    // Invalid UTF-8 never reaches a template (the request parser refuses it): replace it here.
    conversation = fuzz::fixed_conversation(fields).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const protocol::ChatTemplate& tmpl = fuzz::chat_template(vocab);
  Result<protocol::RenderedChat> chat = tmpl.render_with_boundaries(conversation, options);
  if (!chat) return 0;
  Result<std::vector<int32_t>> ids = protocol::tokenize_chat(*chat, tmpl, fuzz::tokenizer(vocab));
  if (!ids) return 0;
  fuzz::check(*chat, *ids);
  return 0;
}

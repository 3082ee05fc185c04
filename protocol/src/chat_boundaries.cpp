// Semantic boundaries of a rendered chat, found by re-rendering (see chat_render.h for why), and
// their token indices.
#include <algorithm>
#include <map>

#include "chat_render_internal.h"
#include "ft/protocol/tokenizer.h"

namespace ft::protocol {

using jinja::Dict;
using jinja::Value;

namespace {

// A payload no template prints on its own, so the first byte where renders differ is inside it.
constexpr const char* kSentinel = "\x01ft-boundary-probe\x01";

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// The last marker start at or before `limit` and at or after `floor`; npos when there is none.
size_t snap_to_marker(const std::string& text, const std::vector<std::string>& markers, size_t limit, size_t floor) {
  for (size_t p = std::min(limit, text.size()) + 1; p-- > floor;) {
    for (const std::string& m : markers) {
      if (text.compare(p, m.size(), m) == 0) return p;
    }
    if (p == 0) break;
  }
  return std::string::npos;
}

Value with_key(const Value& dict, const std::string& key, Value v) {
  Dict d = dict.as_dict();
  d.set(key, std::move(v));
  return Value::dict(std::move(d));
}

class Finder {
 public:
  Finder(const ChatTemplate::Impl& impl, const Conversation& c, std::string full)
      : impl_(impl), c_(c), full_(std::move(full)) {}

  // Where a render of `messages` (with `agp`) stops agreeing with the full render; npos on error.
  size_t divergence(const List& messages, bool agp) {
    Result<std::string> r = render_conversation(impl_, c_, messages, agp);
    if (!r) return std::string::npos;
    return common_prefix(full_, *r);
  }

  // Same with message `k` replaced by `replacement`; npos when the probe changes nothing (the
  // template does not print that part, e.g. a role it ignores or reasoning it drops).
  size_t divergence_with(size_t k, const Value& replacement) {
    List m = c_.messages;
    m[k] = replacement;
    Result<std::string> r = render_conversation(impl_, c_, m, c_.add_generation_prompt);
    if (!r || *r == full_) return std::string::npos;
    return common_prefix(full_, *r);
  }

  void add(ChatBoundary::Kind kind, size_t message, size_t item, size_t lcp, size_t floor) {
    if (lcp == std::string::npos || lcp >= full_.size() + 1) return;
    size_t b = snap_to_marker(full_, impl_.markers, lcp, floor);
    if (b == std::string::npos) return;
    out_.push_back({kind, message, item, b, std::nullopt});
  }

  std::vector<ChatBoundary> run() {
    const List& msgs = c_.messages;
    size_t floor = 0;
    for (size_t k = 0; k < msgs.size(); ++k) {
      const Value& m = msgs[k];
      // Message start: the common prefix with a render of the messages before it; when that render
      // fails (templates that need a user message), the divergence of a probe of this message.
      size_t lcp = divergence(List(msgs.begin(), msgs.begin() + static_cast<long>(k)), false);
      if (lcp == std::string::npos && m.is_dict()) lcp = divergence_with(k, with_key(m, "content", Value::string(kSentinel)));
      size_t before = out_.size();
      add(ChatBoundary::Kind::kMessage, k, 0, lcp, floor);
      if (out_.size() > before) floor = out_.back().char_offset;
      if (!m.is_dict()) continue;
      size_t msg_floor = floor;
      for (const char* field : {"reasoning_content", "thinking"}) {
        const Value* r = m.as_dict().find(field);
        if (r && r->is_string() && !r->as_string().empty()) {
          add(ChatBoundary::Kind::kThinking, k, 0, divergence_with(k, with_key(m, field, Value::string(kSentinel))), msg_floor);
        }
      }
      const Value* role = m.as_dict().find("role");
      if (role && role->is_string() && role->as_string() == "tool") {
        add(ChatBoundary::Kind::kToolResult, k, 0, divergence_with(k, with_key(m, "content", Value::string(kSentinel))), msg_floor);
      }
      const Value* calls = m.as_dict().find("tool_calls");
      if (calls && calls->is_list()) {
        size_t call_floor = msg_floor;
        for (size_t j = 0; j < calls->as_list().size(); ++j) {
          const Value& call = calls->as_list()[j];
          if (!call.is_dict()) continue;
          // Probe the name: it precedes the arguments in every template we know.
          const Value* fn = call.as_dict().find("function");
          Value probe = fn && fn->is_dict() ? with_key(call, "function", with_key(*fn, "name", Value::string(kSentinel)))
                                            : with_key(call, "name", Value::string(kSentinel));
          List probed = calls->as_list();
          probed[j] = probe;
          size_t n0 = out_.size();
          add(ChatBoundary::Kind::kToolCall, k, j, divergence_with(k, with_key(m, "tool_calls", Value::list(probed))), call_floor);
          if (out_.size() > n0) call_floor = out_.back().char_offset + 1;
        }
      }
    }
    if (c_.add_generation_prompt) {
      add(ChatBoundary::Kind::kGenerationPrompt, msgs.size(), 0, divergence(msgs, false), floor);
    }
    std::stable_sort(out_.begin(), out_.end(), [](const ChatBoundary& a, const ChatBoundary& b) { return a.char_offset < b.char_offset; });
    return std::move(out_);
  }

  const std::string& full() const { return full_; }

 private:
  const ChatTemplate::Impl& impl_;
  const Conversation& c_;
  std::string full_;
  std::vector<ChatBoundary> out_;
};

}  // namespace

Result<RenderedChat> ChatTemplate::render_with_boundaries(std::string_view conversation_json,
                                                          const ChatRenderOptions& options) const {
  if (!impl_) return invalid_argument("ChatTemplate is empty");
  FT_ASSIGN_OR_RETURN(Conversation c, parse_conversation(conversation_json, options));
  FT_ASSIGN_OR_RETURN(std::string full, render_conversation(*impl_, c, c.messages, c.add_generation_prompt));
  Finder finder(*impl_, c, full);
  RenderedChat out;
  out.boundaries = finder.run();
  out.text = std::move(full);
  return out;
}

Result<std::vector<int32_t>> tokenize_chat(RenderedChat& chat, const ChatTemplate& tmpl, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids = tokenizer.encode(chat.text);
  std::map<size_t, std::optional<size_t>> memo;  // char offset -> token index when stable
  auto stable = [&](size_t b) -> std::optional<size_t> {
    auto it = memo.find(b);
    if (it != memo.end()) return it->second;
    std::vector<int32_t> prefix = tokenizer.encode(std::string_view(chat.text).substr(0, b));
    std::optional<size_t> r;
    if (prefix.size() <= ids.size() && std::equal(prefix.begin(), prefix.end(), ids.begin())) r = prefix.size();
    memo[b] = r;
    return r;
  };
  for (ChatBoundary& b : chat.boundaries) {
    size_t at = b.char_offset;
    std::optional<size_t> tok = stable(at);
    while (!tok && at > 0) {  // move back to an earlier marker whose prefix tokenizes stably
      at = snap_to_marker(chat.text, tmpl.markers(), at - 1, 0);
      if (at == std::string::npos) {
        at = 0;
        tok = 0;
        break;
      }
      tok = stable(at);
    }
    b.char_offset = at;
    b.token_index = tok.value_or(0);
  }
  return ids;
}

}  // namespace ft::protocol

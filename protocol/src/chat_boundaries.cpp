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

constexpr size_t kNone = std::string::npos;

// The budget's ledger, shared by both steps through RenderedChat's fields.
class Work {
 public:
  Work(size_t& used, size_t limit) : used_(used), limit_(limit) {}
  bool affords(size_t units) const { return units <= limit_ && used_ <= limit_ - units; }
  void spend(size_t units) { used_ = units > SIZE_MAX - used_ ? SIZE_MAX : used_ + units; }

 private:
  size_t& used_;
  size_t limit_;
};

size_t render_work(size_t rendered_bytes, size_t messages) {
  return rendered_bytes + kBoundaryWorkPerMessage * messages;
}

// One boundary search of a message beyond its start: a payload replaced by the sentinel.
struct Element {
  ChatBoundary::Kind kind;
  size_t item;        // tool call index (kToolCall)
  const char* field;  // the message key probed
};

// What a search found: the longest common prefix to snap back from (kNone: nothing).
struct Found {
  ChatBoundary::Kind kind;
  size_t item;
  size_t lcp;
};

struct MessageFinds {
  size_t message;
  size_t start = kNone;
  std::vector<Found> elements;
};

class Finder {
 public:
  Finder(const ChatTemplate::Impl& impl, const Conversation& c, const std::string& full, Work work)
      : impl_(impl), c_(c), full_(full), work_(work), full_work_(render_work(full.size(), c.messages.size())) {}

  // Where a render of `messages` (with `agp`) stops agreeing with the full render; npos on error.
  size_t divergence(const List& messages, bool agp) {
    Result<std::string> r = render_conversation(impl_, c_, messages, agp);
    // A failed render is charged like a full one: it may have done that much before failing.
    work_.spend(r ? render_work(r->size(), messages.size()) : full_work_);
    if (!r) return kNone;
    return common_prefix(full_, *r);
  }

  // Same with message `k` replaced by `replacement`; npos when the probe changes nothing (the
  // template does not print that part, e.g. a role it ignores or reasoning it drops).
  size_t divergence_with(size_t k, const Value& replacement) {
    List m = c_.messages;
    m[k] = replacement;
    Result<std::string> r = render_conversation(impl_, c_, m, c_.add_generation_prompt);
    work_.spend(r ? render_work(r->size(), m.size()) : full_work_);
    if (!r || *r == full_) return kNone;
    return common_prefix(full_, *r);
  }

  void add(ChatBoundary::Kind kind, size_t message, size_t item, size_t lcp, size_t floor) {
    if (lcp == kNone || lcp >= full_.size() + 1) return;
    size_t b = snap_to_marker(full_, impl_.markers, lcp, floor);
    if (b == kNone) return;
    out_.push_back({kind, message, item, b, std::nullopt});
  }

  // The searches of message `m` beyond its start, in the order they are placed.
  static std::vector<Element> elements_of(const Value& m) {
    std::vector<Element> out;
    if (!m.is_dict()) return out;
    for (const char* field : {"reasoning_content", "thinking"}) {
      const Value* r = m.as_dict().find(field);
      if (r && r->is_string() && !r->as_string().empty()) out.push_back({ChatBoundary::Kind::kThinking, 0, field});
    }
    const Value* role = m.as_dict().find("role");
    if (role && role->is_string() && role->as_string() == "tool")
      out.push_back({ChatBoundary::Kind::kToolResult, 0, "content"});
    const Value* calls = m.as_dict().find("tool_calls");
    if (calls && calls->is_list()) {
      for (size_t j = 0; j < calls->as_list().size(); ++j)
        if (calls->as_list()[j].is_dict()) out.push_back({ChatBoundary::Kind::kToolCall, j, "tool_calls"});
    }
    return out;
  }

  // The renders of message `k`: its start, then each element's probe.
  MessageFinds search(size_t k, const std::vector<Element>& elements) {
    const List& msgs = c_.messages;
    const Value& m = msgs[k];
    MessageFinds f{k, kNone, {}};
    // Message start: the common prefix with a render of the messages before it; when that render
    // fails (templates that need a user message), the divergence of a probe of this message.
    f.start = divergence(List(msgs.begin(), msgs.begin() + static_cast<long>(k)), false);
    if (f.start == kNone && m.is_dict()) {
      if (work_.affords(full_work_)) {
        f.start = divergence_with(k, with_key(m, "content", Value::string(kSentinel)));
      } else {
        ++skipped_;
      }
    }
    for (const Element& e : elements) {
      Value probe;
      if (e.kind == ChatBoundary::Kind::kToolCall) {
        const List& calls = m.as_dict().find("tool_calls")->as_list();
        const Value& call = calls[e.item];
        // Probe the name: it precedes the arguments in every template we know.
        const Value* fn = call.as_dict().find("function");
        List probed = calls;
        probed[e.item] = fn && fn->is_dict()
                             ? with_key(call, "function", with_key(*fn, "name", Value::string(kSentinel)))
                             : with_key(call, "name", Value::string(kSentinel));
        probe = with_key(m, "tool_calls", Value::list(std::move(probed)));
      } else {
        probe = with_key(m, e.field, Value::string(kSentinel));
      }
      f.elements.push_back({e.kind, e.item, divergence_with(k, probe)});
    }
    return f;
  }

  // Snaps one message's finds to markers. `floor`: the previous message's start (boundaries never
  // go back past it), advanced to this message's start when it has one.
  void place(const MessageFinds& f, size_t& floor) {
    size_t before = out_.size();
    add(ChatBoundary::Kind::kMessage, f.message, 0, f.start, floor);
    if (out_.size() > before) floor = out_.back().char_offset;
    const size_t msg_floor = floor;
    size_t call_floor = msg_floor;
    for (const Found& e : f.elements) {
      if (e.kind != ChatBoundary::Kind::kToolCall) {
        add(e.kind, f.message, e.item, e.lcp, msg_floor);
        continue;
      }
      size_t n0 = out_.size();
      add(e.kind, f.message, e.item, e.lcp, call_floor);
      if (out_.size() > n0) call_floor = out_.back().char_offset + 1;
    }
  }

  std::vector<ChatBoundary> run() {
    const List& msgs = c_.messages;
    // Searched newest first (the generation prompt, then the last message back to the first), so
    // that what the budget leaves out is the oldest; a message is searched whole or not at all.
    size_t prompt_lcp = kNone;
    if (c_.add_generation_prompt) {
      if (work_.affords(full_work_)) {
        prompt_lcp = divergence(msgs, false);
      } else {
        ++skipped_;
      }
    }
    std::vector<MessageFinds> found;  // newest first
    for (size_t k = msgs.size(); k-- > 0;) {
      std::vector<Element> elements = elements_of(msgs[k]);
      if (!work_.affords((1 + elements.size()) * full_work_)) {
        for (size_t j = 0; j <= k; ++j) skipped_ += 1 + (j == k ? elements.size() : elements_of(msgs[j]).size());
        break;
      }
      found.push_back(search(k, elements));
    }
    // Placed oldest first: floors carry each message's start forward. When older messages were
    // left out, the oldest one searched has floor 0: its boundaries still sit at or before where
    // its renders diverge, so they keep their promise; only their order against the unsearched
    // messages is not checked.
    size_t floor = 0;
    for (auto it = found.rbegin(); it != found.rend(); ++it) place(*it, floor);
    if (c_.add_generation_prompt) add(ChatBoundary::Kind::kGenerationPrompt, msgs.size(), 0, prompt_lcp, floor);
    std::stable_sort(out_.begin(), out_.end(),
                     [](const ChatBoundary& a, const ChatBoundary& b) { return a.char_offset < b.char_offset; });
    return std::move(out_);
  }

  size_t skipped() const { return skipped_; }

 private:
  const ChatTemplate::Impl& impl_;
  const Conversation& c_;
  const std::string& full_;
  Work work_;
  const size_t full_work_;  // what one render of the whole conversation costs
  std::vector<ChatBoundary> out_;
  size_t skipped_ = 0;
};

RenderedChat boundaries_of(const ChatTemplate::Impl& impl, const Conversation& c, std::string full,
                           const ChatRenderOptions& options) {
  RenderedChat out;
  const size_t full_work = render_work(full.size(), c.messages.size());
  out.boundary_work = full_work;  // the render itself
  out.boundary_work_limit = options.boundary_work_limit.value_or(default_boundary_work_limit(full_work));
  // Kept back for tokenize_chat: the token checks of a few of the newest boundaries, in case their
  // markers are not added tokens and need an encode of their prefix each.
  const size_t reserve = std::min(out.boundary_work_limit / 4, 8 * full.size());
  Finder finder(impl, c, full, Work(out.boundary_work, out.boundary_work_limit - reserve));
  out.boundaries = finder.run();
  out.boundaries_skipped = finder.skipped();
  out.text = std::move(full);
  return out;
}

}  // namespace

size_t default_boundary_work_limit(size_t render_work) {
  constexpr size_t kRenders = 16;
  constexpr size_t kFloor = size_t(2) << 30;
  return std::max(render_work > SIZE_MAX / kRenders ? SIZE_MAX : kRenders * render_work, kFloor);
}

Result<RenderedChat> ChatTemplate::render_with_boundaries(std::string_view conversation_json,
                                                          const ChatRenderOptions& options) const {
  if (!impl_) return invalid_argument("ChatTemplate is empty");
  FT_ASSIGN_OR_RETURN(Conversation c, parse_conversation(conversation_json, options));
  FT_ASSIGN_OR_RETURN(std::string full, render_conversation(*impl_, c, c.messages, c.add_generation_prompt));
  return boundaries_of(*impl_, c, std::move(full), options);
}

Result<RenderedChat> ChatTemplate::find_boundaries(std::string_view conversation_json, std::string text,
                                                   const ChatRenderOptions& options) const {
  if (!impl_) return invalid_argument("ChatTemplate is empty");
  FT_ASSIGN_OR_RETURN(Conversation c, parse_conversation(conversation_json, options));
  return boundaries_of(*impl_, c, std::move(text), options);
}

Result<std::vector<int32_t>> tokenize_chat(RenderedChat& chat, const ChatTemplate& tmpl, const Tokenizer& tokenizer) {
  std::vector<TokenCut> cuts;
  std::vector<int32_t> ids = tokenizer.encode_with_cuts(chat.text, cuts);
  tokenize_boundaries(chat, tmpl, tokenizer, ids, cuts);
  return ids;
}

void tokenize_boundaries(RenderedChat& chat, const ChatTemplate& tmpl, const Tokenizer& tokenizer,
                         std::span<const int32_t> ids, std::span<const TokenCut> cuts) {
  Work work(chat.boundary_work, chat.boundary_work_limit);
  work.spend(chat.text.size());  // the encode of the whole text
  // Char offset -> token index when stable, nullopt when not; a missing entry when the budget
  // could not pay for the check.
  std::map<size_t, std::optional<size_t>> memo;
  auto stable = [&](size_t b) -> std::optional<std::optional<size_t>> {
    auto it = memo.find(b);
    if (it != memo.end()) return it->second;
    auto cut = std::lower_bound(cuts.begin(), cuts.end(), b,
                                [](const TokenCut& c, size_t offset) { return c.byte_offset < offset; });
    std::optional<size_t> r;
    if (cut != cuts.end() && cut->byte_offset == b) {
      r = cut->token_index;
    } else if (b == 0) {
      r = 0;
    } else {
      if (!work.affords(b)) return std::nullopt;
      work.spend(b);
      std::vector<int32_t> prefix = tokenizer.encode(std::string_view(chat.text).substr(0, b));
      if (prefix.size() <= ids.size() && std::equal(prefix.begin(), prefix.end(), ids.begin())) r = prefix.size();
    }
    memo[b] = r;
    return r;
  };
  // Newest first, like the search: what the budget cannot check is the oldest.
  std::vector<bool> dropped(chat.boundaries.size(), false);
  for (size_t i = chat.boundaries.size(); i-- > 0;) {
    ChatBoundary& b = chat.boundaries[i];
    size_t at = b.char_offset;
    std::optional<std::optional<size_t>> tok = stable(at);
    while (tok && !*tok && at > 0) {  // move back to an earlier marker whose prefix tokenizes stably
      at = snap_to_marker(chat.text, tmpl.markers(), at - 1, 0);
      if (at == kNone) {
        at = 0;
        tok = std::optional<size_t>(0);
        break;
      }
      tok = stable(at);
    }
    if (!tok) {
      dropped[i] = true;
      ++chat.boundaries_skipped;
      continue;
    }
    b.char_offset = at;
    b.token_index = tok->value_or(0);
  }
  size_t kept = 0;
  for (size_t i = 0; i < chat.boundaries.size(); ++i)
    if (!dropped[i]) chat.boundaries[kept++] = std::move(chat.boundaries[i]);
  chat.boundaries.resize(kept);
}

}  // namespace ft::protocol

#include "output_parser/stream_core.h"

#include <utility>

namespace ft::protocol::detail {

std::size_t leading_ws(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

std::string_view trim_ws(std::string_view s) {
  s.remove_prefix(leading_ws(s));
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

TagHit find_first_tag(std::string_view s, TagList tags) {
  TagHit best;
  std::size_t i = 0;
  for (std::string_view tag : tags) {
    // Only search the part before the best hit so far: later hits cannot win.
    std::size_t limit = best.pos == std::string_view::npos ? s.size() : best.pos + tag.size();
    std::size_t p = s.substr(0, limit).find(tag);
    if (p != std::string_view::npos && p < best.pos) best = {p, i};
    ++i;
  }
  return best;
}

std::size_t partial_tag_suffix(std::string_view s, TagList tags) {
  std::size_t best = 0;
  for (std::string_view tag : tags) {
    std::size_t max_len = std::min(s.size(), tag.size() - 1);
    for (std::size_t len = max_len; len > best; --len) {
      if (s.substr(s.size() - len) == tag.substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

bool is_proper_prefix_of_any(std::string_view s, TagList tags) {
  for (std::string_view tag : tags) {
    if (s.size() < tag.size() && tag.substr(0, s.size()) == s) return true;
  }
  return false;
}

std::size_t utf8_complete_prefix(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of the last sequence.
  std::size_t n = s.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    std::size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back < need ? n - back : n;
  }
  return n;  // only continuation bytes (or none): invalid or complete, nothing to wait for
}

// ---- EventSink --------------------------------------------------------------------------------

EventSink::EventSink(ToolCallIdGenerator id_generator) : id_generator_(std::move(id_generator)) {
  if (!id_generator_) {
    id_generator_ = [](std::size_t index) { return "call_" + std::to_string(index); };
  }
}

void EventSink::append(Segment& seg, std::string_view s) {
  if (seg.at_start) {
    std::size_t k = leading_ws(s);
    markup(k);
    s.remove_prefix(k);
    if (s.empty()) return;
    seg.at_start = false;
  }
  std::size_t last = s.size();
  while (last > 0 && is_ws(s[last - 1])) --last;
  if (last == 0) {
    seg.pending_ws.append(s);
    return;
  }
  if (!seg.pending_ws.empty()) {
    emit(seg, seg.pending_ws);
    seg.pending_ws.clear();
  }
  emit(seg, s.substr(0, last));
  seg.pending_ws.assign(s.substr(last));
}

void EventSink::end_segment(Segment& seg) {
  markup(seg.pending_ws.size());
  seg.pending_ws.clear();
  seg.at_start = true;
}

void EventSink::emit(const Segment& seg, std::string_view s) {
  if (s.empty()) return;
  (seg.is_text ? result_.text : result_.reasoning).append(s);
  // Merge with the previous delta of the same kind: fewer, larger events per feed().
  if (!events_.empty()) {
    if (seg.is_text) {
      if (auto* t = std::get_if<TextDelta>(&events_.back())) return t->text.append(s), void();
    } else if (auto* r = std::get_if<ReasoningDelta>(&events_.back())) {
      return r->text.append(s), void();
    }
  }
  if (seg.is_text) {
    events_.emplace_back(TextDelta{std::string(s)});
  } else {
    events_.emplace_back(ReasoningDelta{std::string(s)});
  }
}

void EventSink::tool_call(std::string name, std::string arguments_json, std::string raw) {
  std::size_t index = result_.tool_calls.size();
  ParsedToolCall call{id_generator_(index), std::move(name), std::move(arguments_json), std::move(raw)};
  events_.emplace_back(ToolCallStart{index, call.id, call.name});
  events_.emplace_back(ToolCallArgsDelta{index, call.arguments_json});
  events_.emplace_back(ToolCallEnd{index});
  result_.tool_calls.push_back(std::move(call));
}

void EventSink::finish() {
  end_segment(text_);
  end_segment(reasoning_);
}

std::vector<OutputEvent> EventSink::take_events() { return std::exchange(events_, {}); }

// ---- ParserCore -------------------------------------------------------------------------------

ParserCore::ParserCore(OutputParserOptions options)
    : options_(std::move(options)), sink_(options_.id_generator) {}

std::vector<OutputEvent> ParserCore::feed(std::string_view text_delta) {
  if (finished_) return {};
  // Drop the consumed front once it dominates, so the buffer stays proportional to what is held.
  if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(text_delta);
  run(false);
  return sink_.take_events();
}

std::vector<OutputEvent> ParserCore::finish() {
  if (finished_) return {};
  finished_ = true;
  run(true);
  sink_.finish();
  buf_.clear();
  pos_ = 0;
  return sink_.take_events();
}

void ParserCore::run(bool at_end) {
  while (!pending().empty()) {
    if (step(at_end)) continue;
    if (!at_end) return;
    // A family that cannot decide at the end is a bug; never lose the bytes over it.
    sink_.text(pending());
    consume(pending().size());
  }
}

std::size_t ParserCore::stream_out(std::string_view s, TagList tags, bool reasoning, bool at_end) {
  std::size_t n = s.size();
  if (!at_end) {
    n -= partial_tag_suffix(s, tags);
    n = utf8_complete_prefix(s.substr(0, n));
  }
  if (n == 0) return 0;
  if (reasoning) {
    sink_.reasoning(s.substr(0, n));
  } else {
    sink_.text(s.substr(0, n));
  }
  consume(n);
  return n;
}

}  // namespace ft::protocol::detail

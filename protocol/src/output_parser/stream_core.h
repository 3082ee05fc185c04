// Shared machinery of the streaming output parsers: tag scanning with hold-back, the event sink
// (whitespace trimming, UTF-8-safe deltas, byte accounting) and the feed/finish driver.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ft/protocol/output_parser.h"

namespace ft::protocol::detail {

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
std::size_t leading_ws(std::string_view s);
std::string_view trim_ws(std::string_view s);

// Tag sets live in static arrays owned by each family.
using TagList = std::span<const std::string_view>;

struct TagHit {
  std::size_t pos = std::string_view::npos;  // npos: no tag in the text
  std::size_t tag = 0;                       // index into the tag list
};
// The earliest complete occurrence of any tag (on a tie, the first listed).
TagHit find_first_tag(std::string_view s, TagList tags);
// Length of the longest suffix of `s` that is a proper prefix of some tag: the bytes to hold back
// because the next delta may complete them into a tag.
std::size_t partial_tag_suffix(std::string_view s, TagList tags);
// The longest prefix of `s` that does not end inside a UTF-8 sequence (invalid bytes pass).
std::size_t utf8_complete_prefix(std::string_view s);
// True when `s` is a proper prefix of one of `tags` (more bytes could still make it one).
bool is_proper_prefix_of_any(std::string_view s, TagList tags);

// Collects events and the running summary. Text and reasoning are "segments": a segment's leading
// whitespace is dropped, its trailing whitespace is held until more content shows it is inner
// whitespace, and dropped when the segment ends (a tag, a tool call, the end of output).
class EventSink {
 public:
  explicit EventSink(ToolCallIdGenerator id_generator);

  void text(std::string_view s) { append(text_, s); }
  void reasoning(std::string_view s) { append(reasoning_, s); }
  void end_text_segment() { end_segment(text_); }
  void end_reasoning_segment() { end_segment(reasoning_); }
  // Bytes of recognised markup that produce no output.
  void markup(std::size_t n) { result_.markup_bytes += n; }
  void tool_call(std::string name, std::string arguments_json, std::string raw);
  // End of output: pending whitespace is trailing whitespace.
  void finish();

  std::vector<OutputEvent> take_events();
  const ParsedOutput& result() const { return result_; }

 private:
  struct Segment {
    bool is_text = true;
    bool at_start = true;    // leading whitespace is still being dropped
    std::string pending_ws;  // trailing whitespace not yet known to be inner
  };
  void append(Segment& seg, std::string_view s);
  void end_segment(Segment& seg);
  void emit(const Segment& seg, std::string_view s);

  ToolCallIdGenerator id_generator_;
  Segment text_{true, true, {}};
  Segment reasoning_{false, true, {}};
  ParsedOutput result_;
  std::vector<OutputEvent> events_;
};

// The feed/finish driver: input accumulates in a buffer; the family's step() consumes what it can
// decide from the front. Families never see the same byte twice once consumed.
class ParserCore : public StreamParser {
 public:
  explicit ParserCore(OutputParserOptions options);

  std::vector<OutputEvent> feed(std::string_view text_delta) final;
  std::vector<OutputEvent> finish() final;
  const ParsedOutput& result() const final { return sink_.result(); }

 protected:
  // Consumes a decided prefix of pending() and returns true, or returns false when nothing more can
  // be decided without more input. With at_end there is no more input: it must make progress
  // whenever pending() is not empty.
  virtual bool step(bool at_end) = 0;

  std::string_view pending() const { return std::string_view(buf_).substr(pos_); }
  void consume(std::size_t n) {
    pos_ += n;
    consumed_total_ += n;
  }
  // Bytes consumed since the start of output (unaffected by buffer compaction).
  std::size_t consumed_total() const { return consumed_total_; }
  // Emits `s` (the front of pending()) to a streaming channel, holding back a partial tag and an
  // incomplete UTF-8 sequence unless at_end; consumes what it emitted. Returns bytes consumed.
  std::size_t stream_out(std::string_view s, TagList tags, bool reasoning, bool at_end);

  const OutputParserOptions& options() const { return options_; }
  EventSink& sink() { return sink_; }

 private:
  void run(bool at_end);

  OutputParserOptions options_;
  EventSink sink_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::size_t consumed_total_ = 0;
  bool finished_ = false;
};

}  // namespace ft::protocol::detail

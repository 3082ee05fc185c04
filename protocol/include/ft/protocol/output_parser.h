// Streaming output parsers: turn the text a model generates back into reasoning, tool calls and
// plain text, in the exact markup each model family's chat template teaches it.
//
// Families (names accepted by make_output_parser; see output_parser_families()):
//   qwen3                      <think>…</think>, <tool_call>\n{"name":…,"arguments":{…}}\n</tool_call>
//   qwen3_coder, qwen3.5,      <think>…</think>, <tool_call>\n<function=NAME>\n<parameter=P>\nV\n
//   qwen3.6                    </parameter>…</function>\n</tool_call>  (both Qwen forms are accepted
//                              by every Qwen family: models drift between them)
//   deepseek_v3, deepseek_v3.1, deepseek_r1
//                              <think>…</think>, <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>…
//                              (V3 `function<｜tool▁sep｜>NAME\n```json\n{…}\n```` and V3.1
//                              `NAME<｜tool▁sep｜>{…}` call bodies are both accepted)
//   gpt-oss (alias harmony)    <|channel|>analysis|commentary|final … <|message|>…<|end|>/<|call|>
//   glm4.5 (aliases glm, glm4.6, glm4.7)
//                              <think>…</think>, <tool_call>NAME\n<arg_key>K</arg_key>\n
//                              <arg_value>V</arg_value>…</tool_call>
//   plain                      <think>…</think>, then text: no tool calls (models whose template
//                              teaches no markup above)
//
// Streaming contract
//   * feed() takes any split of the output (even mid-UTF-8, mid-tag) and returns the events that are
//     decided; the concatenation of all events is the same for every split.
//   * Bytes that might start a tag ("…<tool_ca") are held back until the next bytes decide; plain
//     text is otherwise emitted at once (only a trailing incomplete UTF-8 sequence and trailing
//     whitespace wait, so deltas are always whole code points and whitespace around blocks can be
//     trimmed without retracting anything).
//   * Whitespace normalisation: leading/trailing whitespace of each reasoning and text segment is
//     dropped (the "\n\n" after </think>, the "\n" between tool calls); inner whitespace is kept.
//   * Reasoning is only recognised at the very start of the output ("<think>" later on is text the
//     model writes about); tool-call markup inside reasoning stays reasoning. An unterminated
//     reasoning block stays reasoning (it was already streamed as such).
//   * Malformed markup (unterminated tool call, bad JSON, unknown body) is emitted as plain text,
//     at the latest at finish(); nothing is ever dropped except recognised markup and that
//     whitespace. result().markup_bytes counts the dropped bytes, so
//       text + reasoning + Σ tool_calls[i].raw + markup_bytes == input size   (always)
//
// Tool-call events
//   A tool call is emitted atomically once its closing markup has arrived and it parsed:
//   ToolCallStart{index,id,name}, one ToolCallArgsDelta{index, complete arguments JSON object},
//   ToolCallEnd{index}. Atomic emission is what makes "malformed degrades to text" possible without
//   retracting anything already sent. The three events map one-to-one onto
//     OpenAI:    tool_calls[index] {id, function.name, arguments: ""} then {arguments: fragment}
//     Anthropic: content_block_start{tool_use,id,name} / input_json_delta{partial_json} /
//                content_block_stop
//   Consumers must concatenate ArgsDelta fragments per index (a future incremental mode may send
//   several); the concatenation is always a complete, compact JSON object.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ft/common/result.h"

namespace ft::protocol {

struct ReasoningDelta {
  std::string text;
};
struct TextDelta {
  std::string text;
};
struct ToolCallStart {
  std::size_t index = 0;  // 0-based, in order of appearance in this output
  std::string id;
  std::string name;
};
struct ToolCallArgsDelta {
  std::size_t index = 0;
  std::string json_fragment;
};
struct ToolCallEnd {
  std::size_t index = 0;
};
using OutputEvent = std::variant<ReasoningDelta, TextDelta, ToolCallStart, ToolCallArgsDelta, ToolCallEnd>;

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // compact JSON object, keys in the order the model wrote them
  std::string raw;             // the bytes it was parsed from (harmony: the message body)
};

// Everything emitted so far, accumulated (the final summary once finish() has run).
struct ParsedOutput {
  std::string text;
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;
  std::size_t markup_bytes = 0;  // recognised tags and trimmed whitespace (see the contract above)
};

// A tool the request declared; the schema types parameter values for the XML-style families.
struct ToolSpec {
  std::string name;
  std::string parameters_schema_json;  // JSON Schema of the arguments object; empty = unknown
};

// Makes the id of the index-th tool call of this output. Servers pass one that is unique per
// request (e.g. "call_" + request id + index); the default gives "call_<index>".
using ToolCallIdGenerator = std::function<std::string(std::size_t index)>;

struct OutputParserOptions {
  // The generation prompt already opened the reasoning block (Qwen3 thinking templates end with
  // "<think>\n", DeepSeek-R1-0528/V3.1 thinking with "<think>"): output starts inside reasoning.
  // Ignored by harmony, whose channels say what is reasoning.
  bool starts_in_reasoning = false;
  std::vector<ToolSpec> tools;
  ToolCallIdGenerator id_generator;
};

class StreamParser {
 public:
  virtual ~StreamParser() = default;
  // Feeds the next piece of output; returns the events it decided. Calls after finish() are ignored.
  virtual std::vector<OutputEvent> feed(std::string_view text_delta) = 0;
  // Declares the end of output: decides everything still held back (degrading to text).
  virtual std::vector<OutputEvent> finish() = 0;
  // The accumulation of all events returned so far.
  virtual const ParsedOutput& result() const = 0;
};

// The parser for a family name (case-insensitive; '-' and '_' are interchangeable).
Result<std::unique_ptr<StreamParser>> make_output_parser(std::string_view family,
                                                         OutputParserOptions options = {});
// Canonical family names, for help texts and tests.
std::vector<std::string> output_parser_families();

// The family whose parser reads a model's output: from the markup its chat template teaches
// (`template_markers`: ChatTemplate::markers()), else from the engine's model family (config.json
// model_type); "" when neither names one (serve then uses "plain" and says so at start).
std::string output_parser_for(std::string_view model_family, std::span<const std::string> template_markers);

// One-shot convenience: feed + finish.
Result<ParsedOutput> parse_output(std::string_view family, std::string_view text,
                                  OutputParserOptions options = {});

}  // namespace ft::protocol

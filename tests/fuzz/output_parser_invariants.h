// Invariants every output parser must keep on ANY input, shared by the libFuzzer target
// (output_parser_fuzz.cpp) and the deterministic random driver in the unit suite.
//   1. Events and result() agree (text, reasoning, tool calls; Start/ArgsDelta/End in order).
//   2. Any split of the input gives the same result as one feed() (the streaming contract).
//   3. Nothing is lost: text + reasoning + Σ raw + markup_bytes == input bytes.
//   4. Input with no '<' at all is plain text (whitespace-trimmed), whatever the family.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ft/protocol/output_parser.h"

namespace ft::fuzz {

struct Run {
  ft::protocol::ParsedOutput from_events;
  ft::protocol::ParsedOutput result;
  std::string error;  // empty when the event stream was well-formed
};

// Feeds `input` cut at the (sorted, in-range) offsets `cuts`, then finishes.
inline Run run_parser(std::string_view family, std::string_view input, const std::vector<std::size_t>& cuts,
                      const ft::protocol::OutputParserOptions& options) {
  using namespace ft::protocol;
  Run run;
  auto parser = make_output_parser(family, options);
  if (!parser.is_ok()) {
    run.error = "no parser for " + std::string(family);
    return run;
  }
  bool open_call = false;
  auto absorb = [&](const std::vector<OutputEvent>& events) {
    for (const OutputEvent& e : events) {
      auto& out = run.from_events;
      if (auto* t = std::get_if<TextDelta>(&e)) {
        if (t->text.empty()) run.error += "empty TextDelta; ";
        out.text += t->text;
      } else if (auto* r = std::get_if<ReasoningDelta>(&e)) {
        if (r->text.empty()) run.error += "empty ReasoningDelta; ";
        out.reasoning += r->text;
      } else if (auto* s = std::get_if<ToolCallStart>(&e)) {
        if (open_call || s->index != out.tool_calls.size()) run.error += "bad ToolCallStart; ";
        open_call = true;
        out.tool_calls.push_back({s->id, s->name, "", ""});
      } else if (auto* a = std::get_if<ToolCallArgsDelta>(&e)) {
        if (!open_call || a->index + 1 != out.tool_calls.size()) run.error += "bad ArgsDelta; ";
        if (!out.tool_calls.empty()) out.tool_calls.back().arguments_json += a->json_fragment;
      } else if (auto* d = std::get_if<ToolCallEnd>(&e)) {
        if (!open_call || d->index + 1 != out.tool_calls.size()) run.error += "bad ToolCallEnd; ";
        open_call = false;
      }
    }
  };
  std::size_t prev = 0;
  for (std::size_t cut : cuts) {
    if (cut < prev || cut > input.size()) continue;
    absorb((*parser)->feed(input.substr(prev, cut - prev)));
    prev = cut;
  }
  absorb((*parser)->feed(input.substr(prev)));
  absorb((*parser)->finish());
  if (open_call) run.error += "unterminated tool call events; ";
  run.result = (*parser)->result();
  return run;
}

inline std::string describe_difference(const ft::protocol::ParsedOutput& a, const ft::protocol::ParsedOutput& b,
                                       bool compare_raw_and_markup) {
  if (a.text != b.text) return "text differs: [" + a.text + "] vs [" + b.text + "]";
  if (a.reasoning != b.reasoning) return "reasoning differs: [" + a.reasoning + "] vs [" + b.reasoning + "]";
  if (a.tool_calls.size() != b.tool_calls.size()) return "tool call count differs";
  for (std::size_t i = 0; i < a.tool_calls.size(); ++i) {
    const auto& x = a.tool_calls[i];
    const auto& y = b.tool_calls[i];
    if (x.id != y.id || x.name != y.name || x.arguments_json != y.arguments_json) {
      return "tool call " + std::to_string(i) + " differs: " + x.name + x.arguments_json + " vs " + y.name +
             y.arguments_json;
    }
    if (compare_raw_and_markup && x.raw != y.raw) return "tool call raw differs";
  }
  if (compare_raw_and_markup && a.markup_bytes != b.markup_bytes) return "markup_bytes differs";
  return {};
}

// Checks invariants 1-4 for one input and one split; returns a description of the first failure.
inline std::string check_invariants(std::string_view family, std::string_view input,
                                    const std::vector<std::size_t>& cuts,
                                    const ft::protocol::OutputParserOptions& options) {
  Run whole = run_parser(family, input, {}, options);
  Run split = run_parser(family, input, cuts, options);
  for (const Run* r : {&whole, &split}) {
    if (!r->error.empty()) return r->error;
    if (auto d = describe_difference(r->from_events, r->result, false); !d.empty()) return "events vs result: " + d;
  }
  if (auto d = describe_difference(whole.result, split.result, true); !d.empty()) return "split changed result: " + d;
  const auto& out = whole.result;
  std::size_t accounted = out.text.size() + out.reasoning.size() + out.markup_bytes;
  for (const auto& call : out.tool_calls) {
    accounted += call.raw.size();
    if (call.name.empty()) return "tool call without a name";
    if (call.arguments_json.size() < 2 || call.arguments_json.front() != '{' || call.arguments_json.back() != '}') {
      return "tool call arguments are not an object: " + call.arguments_json;
    }
  }
  if (accounted != input.size()) {
    return "bytes lost or invented: accounted " + std::to_string(accounted) + " of " + std::to_string(input.size());
  }
  bool plain = input.find('<') == std::string_view::npos && input.substr(0, 4) != " to=" &&
               !options.starts_in_reasoning;
  if (plain) {
    std::string_view t = input;
    auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
    while (!t.empty() && ws(t.front())) t.remove_prefix(1);
    while (!t.empty() && ws(t.back())) t.remove_suffix(1);
    if (out.text != t || !out.reasoning.empty() || !out.tool_calls.empty()) return "plain input was not plain text";
  }
  return {};
}

}  // namespace ft::fuzz

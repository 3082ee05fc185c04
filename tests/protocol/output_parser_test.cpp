// Output parsers: per family, realistic outputs parsed one-shot, split at every byte offset and fed
// byte by byte; malformed markup degrading to text; held-back tag prefixes; and a deterministic
// random-input driver running the same invariants as the libFuzzer target.
#include "ft/protocol/output_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../fuzz/output_parser_invariants.h"

namespace ft::protocol {
namespace {

using Json = nlohmann::json;

OutputParserOptions opts(bool starts_in_reasoning = false, std::vector<ToolSpec> tools = {}) {
  OutputParserOptions o;
  o.starts_in_reasoning = starts_in_reasoning;
  o.tools = std::move(tools);
  return o;
}

ParsedOutput one_shot(std::string_view family, std::string_view input, const OutputParserOptions& o = {}) {
  auto out = parse_output(family, input, o);
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  return out.is_ok() ? *out : ParsedOutput{};
}

// One-shot parse, after checking every single split point and byte-by-byte feeding agree with it
// and the invariants hold.
ParsedOutput parse_all_ways(std::string_view family, std::string_view input, const OutputParserOptions& o = {}) {
  for (std::size_t k = 0; k <= input.size(); ++k) {
    std::string err = fuzz::check_invariants(family, input, {k}, o);
    EXPECT_EQ(err, "") << family << " split at " << k << " of: " << input;
    if (!err.empty()) break;
  }
  std::vector<std::size_t> every;
  for (std::size_t k = 1; k < input.size(); ++k) every.push_back(k);
  EXPECT_EQ(fuzz::check_invariants(family, input, every, o), "") << family << " byte-by-byte: " << input;
  return one_shot(family, input, o);
}

Json args_of(const ParsedToolCall& call) { return Json::parse(call.arguments_json); }

// Text so far after each feed() must never contain a fragment of markup.
std::string fed_text(StreamParser& p, std::string_view delta) {
  std::string text;
  for (const auto& e : p.feed(delta)) {
    if (auto* t = std::get_if<TextDelta>(&e)) text += t->text;
  }
  return text;
}

std::unique_ptr<StreamParser> parser(std::string_view family, const OutputParserOptions& o = {}) {
  auto p = make_output_parser(family, o);
  EXPECT_TRUE(p.is_ok());
  return std::move(p).value();
}

const std::vector<ToolSpec> kWeatherTools = {
    {"get_weather",
     R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},
         "metric":{"type":"boolean"},"ratio":{"type":"number"},"opts":{"type":"object"},
         "tags":{"type":"array","items":{"type":"string"}},"zip":{"type":["string","null"]}}})"},
    {"write_file",
     R"({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},
         "count":{"type":"integer"},"force":{"type":"boolean"},"meta":{"type":"object"}}})"},
};

// ---- Factory ----------------------------------------------------------------------------------

TEST(OutputParserFactory, KnownFamiliesAndAliases) {
  for (const std::string& f : output_parser_families()) EXPECT_TRUE(make_output_parser(f).is_ok()) << f;
  for (const char* alias : {"Qwen3", "qwen3-coder", "QWEN3.5", "deepseek-v3.1", "harmony", "GPT-OSS", "glm4.6"}) {
    EXPECT_TRUE(make_output_parser(alias).is_ok()) << alias;
  }
  auto bad = make_output_parser("llama9");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("qwen3"), std::string::npos);
}

TEST(OutputParserFactory, CustomToolCallIds) {
  OutputParserOptions o;
  o.id_generator = [](std::size_t i) { return "toolu_req7_" + std::to_string(i); };
  auto out = one_shot("qwen3",
                      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
                      o);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].id, "toolu_req7_0");
  EXPECT_EQ(out.tool_calls[1].id, "toolu_req7_1");
  EXPECT_EQ(one_shot("qwen3", "<tool_call>{\"name\":\"a\"}</tool_call>").tool_calls.at(0).id, "call_0");
}

// ---- Qwen3 (JSON tool calls) ------------------------------------------------------------------

TEST(OutputParserQwen3, ReasoningTextAndToolCallWithTagsInStrings) {
  const std::string input =
      "<think>\nThe user wants the weather in 東京. Nested {braces} are fine here.\n</think>\n\n"
      "I'll check the weather for you.\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\", \"opts\": "
      "{\"units\": \"c\", \"note\": \"a </tool_call> b {not a brace\\\" <think>\"}}}\n</tool_call>";
  auto out = parse_all_ways("qwen3", input);
  EXPECT_EQ(out.reasoning, "The user wants the weather in 東京. Nested {braces} are fine here.");
  EXPECT_EQ(out.text, "I'll check the weather for you.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(out.tool_calls[0]),
            Json::parse(R"({"city":"東京","opts":{"units":"c","note":"a </tool_call> b {not a brace\" <think>"}})"));
}

TEST(OutputParserQwen3, StartsInReasoningWithSeveralCalls) {
  const std::string input =
      "Two lookups are needed.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"days\": 3}}\n</tool_call>";
  auto out = parse_all_ways("qwen3", input, opts(true));
  EXPECT_EQ(out.reasoning, "Two lookups are needed.");
  EXPECT_EQ(out.text, "");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"city":"Paris"})");
  EXPECT_EQ(out.tool_calls[1].arguments_json, R"({"city":"Lyon","days":3})");  // key order kept
}

TEST(OutputParserQwen3, ThinkingDisabledEmptyBlockAndPlainText) {
  auto out = parse_all_ways("qwen3", "<think>\n\n</think>\n\nHello! 2 < 3 and <b>bold</b>; a <tool> tag.");
  EXPECT_EQ(out.reasoning, "");
  EXPECT_EQ(out.text, "Hello! 2 < 3 and <b>bold</b>; a <tool> tag.");
  // <think> later than the start is text the model writes about.
  EXPECT_EQ(parse_all_ways("qwen3", "Use <think> tags.").text, "Use <think> tags.");
}

TEST(OutputParserQwen3, TextAfterToolCallAndDoubleEncodedArguments) {
  auto out = parse_all_ways("qwen3",
                            "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>\n\nDone.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"x":1})");
  EXPECT_EQ(out.text, "Done.");
}

TEST(OutputParserQwen3, StopSequenceAteTheCloseTag) {
  auto out = parse_all_ways("qwen3", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": 2}]}}\n");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"a":[1,{"b":2}]})");
}

TEST(OutputParserQwen3, MalformedDegradesToText) {
  const std::vector<std::string> bad = {
      "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1",        // unterminated
      "<tool_call>\n{\"name\": f, \"arguments\": {}}\n</tool_call>",            // bad JSON
      "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                         // no name
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",       // not an object
      "<tool_call>\n{\"name\": \"f\"} trailing junk\n</tool_call>",             // junk before close
      "I like the <tool_call> tag, it is neat.",                                 // literal mention
      "<tool_call>",                                                              // bare opener
  };
  for (const std::string& input : bad) {
    auto out = parse_all_ways("qwen3", input);
    EXPECT_TRUE(out.tool_calls.empty()) << input;
    EXPECT_EQ(out.text, input.substr(input.find_first_not_of(" \n")));
  }
}

TEST(OutputParserQwen3, GoodCallAfterMalformedOne) {
  auto out = parse_all_ways("qwen3",
                            "<tool_call>\n{oops}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "g");
  EXPECT_EQ(out.text, "<tool_call>\n{oops}\n</tool_call>");
}

TEST(OutputParserQwen3, PartialTagsAreHeldBackPlainTextIsNot) {
  auto p = parser("qwen3");
  EXPECT_EQ(fed_text(*p, "Hello wor"), "Hello wor");  // plain text goes out at once
  EXPECT_EQ(fed_text(*p, "ld <tool_ca"), "ld");        // " <tool_ca" waits
  EXPECT_EQ(fed_text(*p, "b"), " <tool_cab");          // not a tag after all
  EXPECT_EQ(fed_text(*p, " <"), "");
  EXPECT_EQ(fed_text(*p, "tool_call>\n{\"name\": \"f\", \"argu"), "");
  auto events = p->feed("ments\": {}}\n</tool_call>");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(std::get<ToolCallStart>(events[0]).name, "f");
  EXPECT_EQ(std::get<ToolCallArgsDelta>(events[1]).json_fragment, "{}");
  EXPECT_EQ(std::get<ToolCallEnd>(events[2]).index, 0u);
  p->finish();
  EXPECT_EQ(p->result().text, "Hello world <tool_cab");
}

TEST(OutputParserQwen3, ReasoningStreamsWithoutWaitingForTheEnd) {
  auto p = parser("qwen3");
  auto ev = p->feed("<think>\nStep one");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(std::get<ReasoningDelta>(ev[0]).text, "Step one");
  ev = p->feed("</thi");
  EXPECT_TRUE(ev.empty());
  ev = p->feed("nk>\n\nAnswer");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(std::get<TextDelta>(ev[0]).text, "Answer");
}

TEST(OutputParserQwen3, Utf8SequencesAreNeverSplitAcrossDeltas) {
  auto p = parser("qwen3");
  std::string s = "é東";  // 2 + 3 bytes
  EXPECT_EQ(fed_text(*p, s.substr(0, 1)), "");
  EXPECT_EQ(fed_text(*p, s.substr(1, 2)), "é");
  EXPECT_EQ(fed_text(*p, s.substr(3)), "東");
}

// ---- Qwen3-Coder / Qwen3.5 (XML tool calls) ---------------------------------------------------

TEST(OutputParserQwen3Coder, ParametersTypedBySchema) {
  const std::string input =
      "I'll write the file.\n<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.py\n</parameter>\n"
      "<parameter=content>\ndef f():\n    return \"<tag>\" if x < 3 else {}\n\n</parameter>\n"
      "<parameter=count>\n3\n</parameter>\n<parameter=force>\nTrue\n</parameter>\n"
      "<parameter=meta>\n{\"a\": [1, 2], \"b\": \"</function>\"}\n</parameter>\n</function>\n</tool_call>";
  // The "</function>" inside a value ends the function early: the official parser has the same
  // limit, so only check the schema typing on an input without it.
  const std::string clean = input.substr(0, input.find("{\"a\"")) + "{\"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>";
  auto out = parse_all_ways("qwen3_coder", clean, opts(false, kWeatherTools));
  EXPECT_EQ(out.text, "I'll write the file.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "write_file");
  EXPECT_EQ(args_of(out.tool_calls[0]),
            Json::parse(R"({"path":"/tmp/a.py","content":"def f():\n    return \"<tag>\" if x < 3 else {}\n",
                           "count":3,"force":true,"meta":{"a":[1,2]}})"));
  EXPECT_EQ(out.tool_calls[0].arguments_json.substr(0, 9), "{\"path\":\"");  // written order
}

TEST(OutputParserQwen3Coder, WithoutSchemaValuesStayStrings) {
  auto out = parse_all_ways("qwen3.5",
                            "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
                            "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(out.tool_calls[0]), Json::parse(R"({"city":"São Paulo","days":"3"})"));
}

TEST(OutputParserQwen3Coder, ConversionsFollowTheReferenceParser) {
  auto out = parse_all_ways(
      "qwen3_coder",
      "<tool_call>\n<function=get_weather>\n<parameter=days>\n2.0\n</parameter>\n<parameter=ratio>\n2.0\n</parameter>\n"
      "<parameter=metric>\nFALSE\n</parameter>\n<parameter=zip>\nnull\n</parameter>\n"
      "<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n<parameter=city>\n\n  two newlines kept once \n\n</parameter>\n"
      "<parameter=opts>\nnot json\n</parameter>\n</function>\n</tool_call>",
      opts(false, kWeatherTools));
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(out.tool_calls[0]),
            Json::parse(R"({"days":"2.0","ratio":2,"metric":false,"zip":null,"tags":["a","b"],
                           "city":"\n  two newlines kept once \n","opts":"not json"})"));
}

TEST(OutputParserQwen3Coder, MissingParameterCloseAndManyCallsInReasoningMode) {
  const std::string input =
      "Plan: read then write.\n</think>\n\n<tool_call>\n<function=read>\n<parameter=path>\na.txt\n"
      "<parameter=lines>\n10\n</function>\n</tool_call>\n<tool_call>\n<function=write_file>\n"
      "<parameter=path>\nb.txt\n</parameter>\n</function>\n</tool_call>";
  auto out = parse_all_ways("qwen3.6", input, opts(true, kWeatherTools));
  EXPECT_EQ(out.reasoning, "Plan: read then write.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(args_of(out.tool_calls[0]), Json::parse(R"({"path":"a.txt","lines":"10"})"));
  EXPECT_EQ(args_of(out.tool_calls[1]), Json::parse(R"({"path":"b.txt"})"));
}

TEST(OutputParserQwen3Coder, BareFunctionAndUnclosedToolCallAtEnd) {
  auto out = parse_all_ways("qwen3_coder", "<function=ls>\n<parameter=dir>\n/\n</parameter>\n</function>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"dir":"/"})");
  out = parse_all_ways("qwen3_coder", "<tool_call>\n<function=ls>\n</function>\n");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, "{}");
}

TEST(OutputParserQwen3Coder, MalformedDegradesToText) {
  for (const std::string input : {
           "<tool_call>\nI cannot call tools here.",
           "<tool_call>\n<function=>\n</function>\n</tool_call>",
           "<tool_call>\n<function=f\n<parameter=a>1</parameter>",
           "Text <function=f> never closed",
           "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n<function=g>\n</function>\n</tool_call>",
       }) {
    auto out = parse_all_ways("qwen3_coder", input);
    EXPECT_TRUE(out.tool_calls.empty()) << input;
    EXPECT_EQ(out.text, input) << input;
  }
}

TEST(OutputParserQwen3Coder, JsonFormAcceptedToo) {
  auto out = parse_all_ways("qwen3_coder", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"a":1})");
}

// ---- DeepSeek ---------------------------------------------------------------------------------

TEST(OutputParserDeepSeek, V3FencedCalls) {
  const std::string input =
      "Let me look that up.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
      "```json\n{\"city\": \"Paris\", \"opts\": {\"q\": \"}<｜tool▁call▁end｜>\"}}\n```<｜tool▁call▁end｜>\n"
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"CET\"}\n```<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>";
  // A call-end marker inside a JSON string does end the call in DeepSeek's own parser (the markers
  // are special tokens); use an input without one for the success path.
  const std::string clean = input.substr(0, input.find(", \"opts\"")) + "}\n```<｜tool▁call▁end｜>\n" +
                            input.substr(input.find("<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time"));
  auto out = parse_all_ways("deepseek_v3", clean);
  EXPECT_EQ(out.text, "Let me look that up.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"city":"Paris"})");
  EXPECT_EQ(out.tool_calls[1].name, "get_time");
  EXPECT_EQ(out.tool_calls[1].arguments_json, R"({"tz":"CET"})");
}

TEST(OutputParserDeepSeek, V31ThinkingThenCalls) {
  const std::string input =
      "The user wants Paris weather.</think>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
      "<｜tool▁sep｜>{\"city\": \"Paris\", \"note\": \"💡 {x}\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time"
      "<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  auto out = parse_all_ways("deepseek_v3.1", input, opts(true));
  EXPECT_EQ(out.reasoning, "The user wants Paris weather.");
  EXPECT_EQ(out.text, "Checking.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(args_of(out.tool_calls[0]), Json::parse(R"({"city":"Paris","note":"💡 {x}"})"));
  EXPECT_EQ(out.tool_calls[1].arguments_json, "{}");
}

TEST(OutputParserDeepSeek, R1ReasoningAndAnswer) {
  auto out = parse_all_ways("deepseek_r1", "<think>\nOkay, 1+1.\n</think>\n\nThe answer is **2**.");
  EXPECT_EQ(out.reasoning, "Okay, 1+1.");
  EXPECT_EQ(out.text, "The answer is **2**.");
}

TEST(OutputParserDeepSeek, MalformedDegradesToText) {
  for (const std::string input : {
           "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"",       // no end
           "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{city}<｜tool▁call▁end｜>",   // bad JSON
           "<｜tool▁call▁begin｜>get_weather{}<｜tool▁call▁end｜>",                   // no separator
       }) {
    auto out = parse_all_ways("deepseek_v3.1", input);
    EXPECT_TRUE(out.tool_calls.empty()) << input;
    EXPECT_EQ(out.text, input);
  }
}

TEST(OutputParserDeepSeek, MarkersAreHeldBack) {
  auto p = parser("deepseek_v3");
  EXPECT_EQ(fed_text(*p, "Hi<｜tool"), "Hi");
  EXPECT_EQ(fed_text(*p, "▁calls▁begin｜>"), "");
  EXPECT_EQ(fed_text(*p, "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>"), "");
  ASSERT_EQ(p->result().tool_calls.size(), 1u);
}

// ---- gpt-oss harmony --------------------------------------------------------------------------

TEST(OutputParserHarmony, AnalysisThenToolCall) {
  const std::string input =
      "<|channel|>analysis<|message|>User asks for the weather in SF. Use get_weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"location\":\"San Francisco\",\"q\":\"<|end|> is not special inside JSON? it is.\"}<|call|>";
  const std::string clean = input.substr(0, input.find(",\"q\"")) + "}<|call|>";
  auto out = parse_all_ways("gpt-oss", clean);
  EXPECT_EQ(out.reasoning, "User asks for the weather in SF. Use get_weather.");
  EXPECT_EQ(out.text, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"location":"San Francisco"})");
}

TEST(OutputParserHarmony, RecipientBeforeChannelAndNoCallToken) {
  auto out = parse_all_ways("gpt-oss",
                            "<|channel|>analysis<|message|>Need lookup.<|end|><|start|>assistant to=functions.lookup"
                            "<|channel|>commentary json<|message|>{\"q\": [1, 2]}");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "lookup");
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"q":[1,2]})");
  // The prompt ended with "<|start|>assistant": the recipient may come first in the output.
  out = parse_all_ways("harmony", " to=functions.f<|channel|>commentary <|constrain|>json<|message|>{}<|call|>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "f");
}

TEST(OutputParserHarmony, FinalAnswerAndPreamble) {
  auto out = parse_all_ways("gpt-oss",
                            "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>commentary"
                            "<|message|>Let me think out loud.<|end|><|start|>assistant<|channel|>final<|message|>"
                            "The answer is 42 — ünïcödé ✓.<|return|>");
  EXPECT_EQ(out.reasoning, "Simple.");
  EXPECT_EQ(out.text, "Let me think out loud.The answer is 42 — ünïcödé ✓.");
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(OutputParserHarmony, PlainTextAndMalformed) {
  EXPECT_EQ(parse_all_ways("gpt-oss", "Hello <b>world</b> <|not a token").text, "Hello <b>world</b> <|not a token");
  auto out = parse_all_ways("gpt-oss", "<|channel|>commentary to=functions.f json<|message|>not json<|call|>");
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_EQ(out.text, "not json");
  out = parse_all_ways("gpt-oss", "<|channel|>analysis");  // header cut off
  EXPECT_EQ(out.text, "<|channel|>analysis");
}

TEST(OutputParserHarmony, HeldBackTerminators) {
  auto p = parser("gpt-oss");
  EXPECT_EQ(fed_text(*p, "<|channel|>final<|message|>Hi <|e"), "Hi");
  EXPECT_EQ(fed_text(*p, "nd|>"), "");
  EXPECT_EQ(fed_text(*p, "<|start|>assistant<|channel|>final<|message|>More"), "More");
}

// ---- GLM-4.5+ ---------------------------------------------------------------------------------

TEST(OutputParserGlm, ReasoningAndTypedArguments) {
  const std::string input =
      "<think>Need the weather in 北京.</think>\nSure.<tool_call>get_weather\n<arg_key>city</arg_key>\n"
      "<arg_value>北京</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n"
      "<arg_value>{\"units\": \"c\"}</arg_value>\n</tool_call>";
  auto out = parse_all_ways("glm4.5", input, opts(false, kWeatherTools));
  EXPECT_EQ(out.reasoning, "Need the weather in 北京.");
  EXPECT_EQ(out.text, "Sure.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(out.tool_calls[0]), Json::parse(R"({"city":"北京","days":3,"opts":{"units":"c"}})"));
  // Without a schema every value is the raw string.
  out = parse_all_ways("glm", input);
  EXPECT_EQ(args_of(out.tool_calls.at(0)), Json::parse(R"({"city":"北京","days":"3","opts":"{\"units\": \"c\"}"})"));
}

TEST(OutputParserGlm, CompactFormAndSeveralCalls) {
  auto out = parse_all_ways("glm4.7",
                            "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UTC</arg_value></tool_call>\n"
                            "<tool_call>ping\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"tz":"UTC"})");
  EXPECT_EQ(out.tool_calls[1].name, "ping");
  EXPECT_EQ(out.tool_calls[1].arguments_json, "{}");
}

TEST(OutputParserGlm, MalformedDegradesToText) {
  for (const std::string input : {
           "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>",  // key without value
           "<tool_call>get_weather\n<arg_key>city</arg_key><arg_value>x",     // unterminated
           "<tool_call>\n<arg_key>city</arg_key><arg_value>x</arg_value></tool_call>",  // no name
       }) {
    auto out = parse_all_ways("glm4.5", input);
    EXPECT_TRUE(out.tool_calls.empty()) << input;
    EXPECT_EQ(out.text, input);
  }
  const std::string prose = "<tool_call>" + std::string(300, 'x');
  EXPECT_EQ(parse_all_ways("glm4.5", prose).text, prose);
}

// ---- Long outputs -----------------------------------------------------------------------------

// A held-back call is rescanned only from where the last feed stopped: a 256 KB file written through
// a tool call, streamed in 3-byte pieces, must stay linear.
TEST(OutputParserLong, HugeToolCallsStreamInLinearTime) {
  std::string content;
  while (content.size() < 256 * 1024) content += "line with {braces} and \"quotes\" and <tags>\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"qwen3_coder", "<tool_call>\n<function=write_file>\n<parameter=content>\n" + content +
                          "\n</parameter>\n</function>\n</tool_call>"},
      {"qwen3", "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"content\": " +
                    Json(content).dump() + "}}\n</tool_call>"},
      {"deepseek_v3.1", "<｜tool▁call▁begin｜>write_file<｜tool▁sep｜>{\"content\": " + Json(content).dump() +
                            "}<｜tool▁call▁end｜>"},
      {"glm4.5", "<tool_call>write_file\n<arg_key>content</arg_key>\n<arg_value>" + content +
                     "</arg_value>\n</tool_call>"},
      {"gpt-oss", "<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>{\"content\": " +
                      Json(content).dump() + "}<|call|>"},
  };
  for (const auto& [family, input] : cases) {
    auto start = std::chrono::steady_clock::now();
    auto p = parser(family);
    for (std::size_t i = 0; i < input.size(); i += 3) p->feed(std::string_view(input).substr(i, 3));
    p->finish();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(p->result().tool_calls.size(), 1u) << family;
    EXPECT_EQ(Json::parse(p->result().tool_calls[0].arguments_json)["content"].get<std::string>().size(),
              content.size() - (family == "glm4.5" ? 1u : 0u))
        << family;
    EXPECT_LT(seconds, 5.0) << family;
    std::printf("%s: %zu bytes in 3-byte deltas: %.3f s\n", family.c_str(), input.size(), seconds);
  }
}

// ---- Random inputs (deterministic fuzz driver) ------------------------------------------------

// Inputs assembled from markup fragments, broken tags, JSON bits, unicode and random bytes, so the
// parsers' interesting states are reached often; splits are random too.
std::string random_input(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "\n", " ", "{", "}", "\"", "\\", "[", "]", ":", ",",
      "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "\"name\"", "\"arguments\"", "<function=f>", "</function>",
      "<parameter=a>", "</parameter>", "<function=", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
      "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>",
      "function", "```json\n", "```", "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|call|>",
      "<|return|>", "<|constrain|>", " to=functions.g", "analysis", "final", "commentary", "assistant", "json",
      "hello", "東京", "💡", "<", ">", "<tool_ca", "</thi", "<|", "｜", "null", "true", "3", "get_weather",
  };
  std::uniform_int_distribution<int> n_pieces(0, 24);
  std::uniform_int_distribution<std::size_t> pick(0, pieces.size() - 1);
  std::uniform_int_distribution<int> coin(0, 9);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s;
  for (int i = n_pieces(rng); i > 0; --i) {
    if (coin(rng) == 0) {
      s.push_back(static_cast<char>(byte(rng)));
    } else {
      s += pieces[pick(rng)];
    }
  }
  return s;
}

TEST(OutputParserRandom, TwentyThousandInputsKeepTheInvariants) {
  std::mt19937 rng(20240611);
  const std::vector<std::string> families = {"qwen3", "qwen3_coder", "deepseek_v3.1", "gpt-oss", "glm4.5"};
  auto start = std::chrono::steady_clock::now();
  int failures = 0;
  for (int i = 0; i < 20000 && failures < 5; ++i) {
    std::string input = random_input(rng);
    std::vector<std::size_t> cuts;
    std::uniform_int_distribution<std::size_t> pos(0, input.size());
    for (int c = static_cast<int>(rng() % 6); c > 0; --c) cuts.push_back(pos(rng));
    std::sort(cuts.begin(), cuts.end());
    const std::string& family = families[static_cast<std::size_t>(i) % families.size()];
    OutputParserOptions o = opts(rng() % 4 == 0, rng() % 2 == 0 ? kWeatherTools : std::vector<ToolSpec>{});
    std::string err = fuzz::check_invariants(family, input, cuts, o);
    if (!err.empty()) {
      ++failures;
      ADD_FAILURE() << family << ": " << err << "\ninput: " << Json(input).dump(-1, ' ', true, Json::error_handler_t::replace);
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 30.0);
}

}  // namespace
}  // namespace ft::protocol

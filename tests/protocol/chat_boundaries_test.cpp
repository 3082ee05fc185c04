// Boundary finding under its work budget (chat_render.h): a body of thousands of tiny messages
// costs a bounded amount of work (counted, never timed), the boundaries kept are the newest and
// exactly those an unlimited search finds, and tokenize_chat checks boundaries at added tokens
// from its one encode while other checks spend the same budget, newest first.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ft/protocol/byte_level.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/tokenizer.h"
#include "test_support.h"

namespace ft::protocol {
namespace {

using nlohmann::json;
const std::filesystem::path kTemplates = std::filesystem::path(FT_FIXTURES_DIR) / "templates";

ChatTemplate qwen3() {
  auto t = ChatTemplate::create(test::read_file(kTemplates / "qwen3.jinja"),
                                {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}});
  EXPECT_TRUE(t) << t.status().to_string();
  return std::move(t).value();
}

// `n` short messages; with `tools`, every assistant turn thinks, calls a tool and gets its result.
std::string conversation(std::size_t n, bool tools) {
  json messages = json::array();
  for (std::size_t i = 0; messages.size() < n; ++i) {
    const std::string s = std::to_string(i);
    messages.push_back({{"role", "user"}, {"content", "q" + s}});
    if (!tools) {
      messages.push_back({{"role", "assistant"}, {"content", "a" + s}});
      continue;
    }
    json call = {{"type", "function"}, {"function", {{"name", "read"}, {"arguments", {{"path", "f" + s}}}}}};
    messages.push_back(
        {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "t" + s}, {"tool_calls", json::array({call})}});
    messages.push_back({{"role", "tool"}, {"content", "r" + s}});
    messages.push_back({{"role", "assistant"}, {"content", "a" + s}});
  }
  while (messages.size() > n) messages.erase(messages.end() - 1);
  return json{{"messages", messages}}.dump();
}

// What one render of the whole conversation costs, in the budget's units.
std::size_t render_work(const std::string& text, std::size_t messages) {
  return text.size() + kBoundaryWorkPerMessage * messages;
}

// A byte-level tokenizer (id = byte value) with `added` as added tokens (ids 256, 257, ...).
Tokenizer byte_tokenizer(const std::vector<std::string>& added) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  json tokens = json::array();
  for (std::size_t i = 0; i < added.size(); ++i) {
    json t = {{"id", 256 + i}, {"content", added[i]}, {"special", true}, {"normalized", false}};
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) t[flag] = false;
    tokens.push_back(t);
  }
  json doc = {{"version", "1.0"}, {"added_tokens", tokens}, {"decoder", {{"type", "ByteLevel"}}}};
  for (const char* none : {"normalizer", "pre_tokenizer", "post_processor"}) doc[none] = nullptr;
  doc["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}};
  auto t = Tokenizer::from_json(doc.dump());
  EXPECT_TRUE(t) << t.status().to_string();
  return std::move(t).value();
}

bool same(const ChatBoundary& a, const ChatBoundary& b) {
  return a.kind == b.kind && a.message == b.message && a.item == b.item && a.char_offset == b.char_offset;
}

TEST(ChatBoundaryBudget, AgentSizedConversationsKeepEveryBoundaryByDefault) {
  const ChatTemplate tmpl = qwen3();
  auto chat = tmpl.render_with_boundaries(conversation(240, /*tools=*/true));
  ASSERT_TRUE(chat) << chat.status().to_string();
  EXPECT_EQ(chat->boundaries_skipped, 0u);
  EXPECT_LE(chat->boundary_work, chat->boundary_work_limit);
  EXPECT_EQ(chat->boundary_work_limit, default_boundary_work_limit(render_work(chat->text, 240)));
  EXPECT_GT(chat->boundaries.size(), 240u) << "message starts plus thinking, tool calls and tool results";
}

// The budget cuts the search short from the oldest end: what is kept is every boundary the
// unlimited search finds for the newest messages, and the work stays within the limit.
TEST(ChatBoundaryBudget, ALimitKeepsTheNewestMessagesBoundariesExactly) {
  const ChatTemplate tmpl = qwen3();
  const std::string conv = conversation(240, /*tools=*/true);
  auto all = tmpl.render_with_boundaries(conv);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->boundaries_skipped, 0u);
  ChatRenderOptions opts;
  opts.boundary_work_limit = all->boundary_work / 4;
  auto some = tmpl.render_with_boundaries(conv, opts);
  ASSERT_TRUE(some);
  EXPECT_EQ(some->text, all->text);
  EXPECT_LE(some->boundary_work, *opts.boundary_work_limit);
  EXPECT_GT(some->boundaries_skipped, 0u);
  ASSERT_GT(some->boundaries.size(), 10u);
  std::size_t oldest = 240;
  for (const ChatBoundary& b : some->boundaries) oldest = std::min(oldest, b.message);
  EXPECT_GT(oldest, 100u);
  // Sorted by offset, an older message's element may follow a newer message's start (Qwen3 moves
  // a message's start back to the previous turn's): compare with the unlimited search's
  // boundaries of the messages searched.
  std::vector<ChatBoundary> expected;
  for (const ChatBoundary& b : all->boundaries)
    if (b.message >= oldest) expected.push_back(b);
  ASSERT_EQ(some->boundaries.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(same(some->boundaries[i], expected[i]))
        << "boundary " << i << ": message " << some->boundaries[i].message << " @" << some->boundaries[i].char_offset
        << ", expected message " << expected[i].message << " @" << expected[i].char_offset;
  }
  EXPECT_EQ(some->boundaries.back().kind, ChatBoundary::Kind::kGenerationPrompt);
}

// A body of thousands of tiny messages: unlimited, the search would render the conversation once
// per message (n^2/2 message walks); here it stops at the limit, having searched the newest
// messages, whose boundaries keep their promise.
TEST(ChatBoundaryBudget, ThousandsOfTinyMessagesCostABoundedAmountOfWork) {
  const ChatTemplate tmpl = qwen3();
  const std::size_t n = 3000;
  const std::string conv = conversation(n, /*tools=*/false);
  auto text = tmpl.render(conv);
  ASSERT_TRUE(text);
  const std::size_t one_render = render_work(*text, n);
  ChatRenderOptions opts;
  opts.boundary_work_limit = 32 * one_render;
  auto chat = tmpl.render_with_boundaries(conv, opts);
  ASSERT_TRUE(chat);
  EXPECT_LE(chat->boundary_work, 32 * one_render);
  EXPECT_GE(chat->boundary_work, 16 * one_render) << "the budget is used, not given up early";

  std::vector<std::size_t> starts;  // where each message's turn opens
  for (std::size_t p = chat->text.find("<|im_start|>"); p != std::string::npos;
       p = chat->text.find("<|im_start|>", p + 1))
    starts.push_back(p);
  ASSERT_EQ(starts.size(), n + 1) << "one per message, and the generation prompt's";
  const json messages = json::parse(conv)["messages"];
  std::size_t kept = 0;
  for (const ChatBoundary& b : chat->boundaries) {
    if (b.kind != ChatBoundary::Kind::kMessage) continue;
    ++kept;
    ASSERT_GE(b.message, n - 40) << "only the newest messages are searched";
    // At a turn's start, at most one turn back (Qwen3 renders the last assistant turn of a shorter
    // conversation differently), and text[0, b) is what the conversation before it renders.
    EXPECT_TRUE(b.char_offset == starts[b.message] || b.char_offset == starts[b.message - 1]) << b.message;
    if (b.message + 4 < n) continue;
    json prefix = {{"messages", json::array()}, {"add_generation_prompt", false}};
    for (std::size_t k = 0; k < b.message; ++k) prefix["messages"].push_back(messages[k]);
    auto p = tmpl.render(prefix.dump());
    ASSERT_TRUE(p);
    EXPECT_EQ(p->substr(0, b.char_offset), chat->text.substr(0, b.char_offset)) << b.message;
  }
  EXPECT_GE(kept, 10u);
  EXPECT_EQ(chat->boundaries_skipped, n - kept);
  ASSERT_FALSE(chat->boundaries.empty());
  EXPECT_EQ(chat->boundaries.back().kind, ChatBoundary::Kind::kGenerationPrompt);
  EXPECT_EQ(chat->boundaries.back().char_offset, starts[n]);
}

// Two steps (render, check the size, then search) give what one call gives.
TEST(ChatBoundaryBudget, FindBoundariesOnAGivenRenderMatchesRenderWithBoundaries) {
  const ChatTemplate tmpl = qwen3();
  const std::string conv = conversation(40, /*tools=*/true);
  auto one = tmpl.render_with_boundaries(conv);
  auto text = tmpl.render(conv);
  ASSERT_TRUE(one && text);
  auto two = tmpl.find_boundaries(conv, *text);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->text, one->text);
  EXPECT_EQ(two->boundary_work, one->boundary_work);
  ASSERT_EQ(two->boundaries.size(), one->boundaries.size());
  for (std::size_t i = 0; i < one->boundaries.size(); ++i) EXPECT_TRUE(same(two->boundaries[i], one->boundaries[i]));
}

// Boundaries at added tokens are checked from the cuts of the one encode: no prefix is encoded
// again, so the token checks cost the one encode of the text and nothing more.
TEST(ChatBoundaryBudget, TokenChecksAtAddedTokensCostOneEncode) {
  const ChatTemplate tmpl = qwen3();
  const Tokenizer tok = byte_tokenizer({"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                                        "</tool_call>", "<tool_response>", "</tool_response>"});
  auto chat = tmpl.render_with_boundaries(conversation(120, /*tools=*/true));
  ASSERT_TRUE(chat);
  const std::size_t before = chat->boundary_work, found = chat->boundaries.size();
  auto ids = tokenize_chat(*chat, tmpl, tok);
  ASSERT_TRUE(ids);
  EXPECT_EQ(chat->boundary_work, before + chat->text.size());
  ASSERT_EQ(chat->boundaries.size(), found);
  for (const ChatBoundary& b : chat->boundaries) {
    ASSERT_TRUE(b.token_index.has_value());
    const std::vector<int32_t> prefix = tok.encode(std::string_view(chat->text).substr(0, b.char_offset));
    ASSERT_EQ(prefix.size(), *b.token_index);
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), ids->begin()));
  }
}

// Markers that are not added tokens need an encode of their prefix each: those come out of the
// same budget, newest first, and a boundary the budget cannot check is dropped, never reported
// unchecked.
TEST(ChatBoundaryBudget, OtherTokenChecksSpendTheBudgetNewestFirst) {
  const ChatTemplate tmpl = qwen3();
  const Tokenizer tok = byte_tokenizer({});  // id = byte: the ids of text[0, b) are its b bytes
  auto chat = tmpl.render_with_boundaries(conversation(120, /*tools=*/true));
  ASSERT_TRUE(chat);
  const std::vector<ChatBoundary> found = chat->boundaries;
  // Room for the encode of the whole text and the prefixes of the last few boundaries.
  const std::size_t size = chat->text.size();
  chat->boundary_work_limit = chat->boundary_work + size + 3 * size;
  auto ids = tokenize_chat(*chat, tmpl, tok);
  ASSERT_TRUE(ids);
  EXPECT_LE(chat->boundary_work, chat->boundary_work_limit);
  ASSERT_LT(chat->boundaries.size(), found.size());
  EXPECT_EQ(chat->boundaries_skipped, found.size() - chat->boundaries.size());
  // The kept ones are found ones, checked; the newest three among them.
  std::size_t next = 0;
  for (const ChatBoundary& b : chat->boundaries) {
    while (next < found.size() && !same(found[next], b)) ++next;
    ASSERT_LT(next, found.size()) << "boundary at " << b.char_offset << " was not found, or out of order";
    EXPECT_EQ(b.token_index, b.char_offset);
  }
  ASSERT_GE(chat->boundaries.size(), 3u);
  for (std::size_t i = 1; i <= 3; ++i)
    EXPECT_TRUE(same(chat->boundaries[chat->boundaries.size() - i], found[found.size() - i])) << i;
}

}  // namespace
}  // namespace ft::protocol

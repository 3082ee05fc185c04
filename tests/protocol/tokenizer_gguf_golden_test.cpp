// Tokenizers built from GGUF files against HF. The vocab-only GGUFs in tests/fixtures/gguf/vocab
// are what llama.cpp's converter (convert_hf_to_gguf.py --vocab-only) wrote from the same
// tokenizer.json files the other tokenizer suites read; loaded through the CLI's entry point
// (proxy::load_model_tokenizer), each must give HF's ids on the corpus (the goldens of
// tokenizer_golden_test.cpp) and agree with the tokenizer.json tokenizer on every id, the special
// tokens, bos/eos and the chat template.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "ft/engine/gguf.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/gguf_vocab.h"
#include "ft/protocol/unicode.h"
#include "ft/proxy/model_tokenizer.h"
#include "test_support.h"
#include "tokenizer_test_util.h"

namespace ft::protocol {
namespace {

using Ids = std::vector<int32_t>;

// The fixture of each tokenizer family (file names follow HF's model_type).
std::string gguf_fixture_name(const std::string& family) {
  return family == "gptoss" ? "vocab-gpt_oss.gguf" : "vocab-" + family + ".gguf";
}

// The fixtures are committed xz-compressed (a 6-13 MB GGUF is 1.2-2.5 MB): each is unpacked once
// per process into a temporary directory.
const std::filesystem::path& unpacked_dir() {
  static ft::test::TempDir dir;
  return dir.path();
}

// The decompressed GGUF of `family`, or "" with the reason in *why.
std::filesystem::path unpack_gguf(const std::string& family, std::string* why) {
  const std::string name = gguf_fixture_name(family);
  const auto xz = std::filesystem::path(FT_FIXTURES_DIR) / "gguf/vocab" / (name + ".xz");
  const auto out = unpacked_dir() / name;
  if (std::filesystem::exists(out)) return out;
  if (!std::filesystem::exists(xz)) {
    *why = "missing fixture " + xz.string();
    return {};
  }
  const std::string cmd = "xz -dc '" + xz.string() + "' > '" + out.string() + ".part' && mv '" + out.string() +
                          ".part' '" + out.string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    *why = "cannot unpack " + xz.string() + " with xz (scripts/setup.sh installs xz-utils)";
    return {};
  }
  return out;
}

// Loaded once per family and process (a 650k-merge vocabulary takes about a second).
const Tokenizer* gguf_tokenizer(const std::string& family, std::string* why) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  if (auto it = loaded.find(family); it != loaded.end()) return it->second.get();
  const auto path = unpack_gguf(family, why);
  if (path.empty()) return nullptr;
  auto t = proxy::load_model_tokenizer(path);
  if (!t) {
    *why = "FAILED to load " + path.string() + ": " + t.status().to_string();
    return nullptr;
  }
  loaded[family] = std::make_unique<Tokenizer>(std::move(t).value());
  return loaded[family].get();
}

#define FT_REQUIRE_GGUF_TOKENIZER(var, family)                               \
  std::string var##_why;                                                     \
  const ::ft::protocol::Tokenizer* var = gguf_tokenizer(family, &var##_why); \
  if (!var) FAIL() << var##_why;

std::vector<std::pair<std::string, std::string>> corpus_texts() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : std::filesystem::directory_iterator(test::corpus_dir()))
    out.emplace_back(entry.path().filename().string(), ft::test::read_file(entry.path()));
  std::sort(out.begin(), out.end());
  return out;
}

class GgufTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufTokenizer, MatchesHfTokenizersOnTheCorpus) {
  const std::string family = GetParam();
  FT_REQUIRE_GGUF_TOKENIZER(g, family);
  const auto golden_path = std::filesystem::path(FT_FIXTURES_DIR) / "tokenizer/golden" / (family + ".json");
  auto golden = nlohmann::json::parse(ft::test::read_file(golden_path), nullptr, false);
  ASSERT_TRUE(golden.is_object()) << golden_path << " is not a JSON object";
  std::size_t checked = 0;
  for (const auto& [name, text] : corpus_texts()) {
    ASSERT_TRUE(golden.contains(name)) << name << " has no golden in " << golden_path;
    const Ids want = golden[name].get<Ids>();
    const Ids got = g->encode(text);
    EXPECT_EQ(got, want) << family << " " << name;
    ++checked;
  }
  EXPECT_EQ(checked, golden.size());
}

TEST_P(GgufTokenizer, DecodeOfEncodeRoundTripsTheCorpus) {
  FT_REQUIRE_GGUF_TOKENIZER(g, GetParam());
  const bool normalizes = GetParam() == "qwen3";  // NFC, as HF's Qwen tokenizer.json says
  for (const auto& [name, raw] : corpus_texts()) {
    std::string expected = utf8_lossy(raw);
    if (normalizes) expected = nfc(expected);
    EXPECT_EQ(g->decode(g->encode(raw)), expected) << name;
  }
}

// Every id means the same token in both, with the same bytes; the GGUF's padding ids
// ("[PAD151669]") are no tokens at all, as in HF.
TEST_P(GgufTokenizer, EveryIdAgreesWithTokenizerJson) {
  FT_REQUIRE_TOKENIZER(hf, GetParam());
  FT_REQUIRE_GGUF_TOKENIZER(g, GetParam());
  EXPECT_EQ(g->vocab_size(), hf->vocab_size());
  ASSERT_EQ(g->id_limit(), hf->id_limit());
  std::size_t special_only_in_gguf = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(hf->id_limit()) + 300; ++id) {
    ASSERT_EQ(g->id_to_token(id), hf->id_to_token(id)) << "id " << id;
    ASSERT_EQ(g->token_bytes(id), hf->token_bytes(id)) << "id " << id;
    if (g->is_special(id) == hf->is_special(id)) continue;
    // The converter marks added tokens spelled like special ones (<|fim_prefix|>,
    // <｜tool▁call▁begin｜>) CONTROL even when HF calls them not special, and nothing in the GGUF
    // says otherwise. They only matter to decode(skip_special_tokens=true).
    const std::string token = *hf->id_to_token(id);
    const bool looks_special = (token.rfind("<|", 0) == 0 && token.ends_with("|>")) ||
                               (token.rfind("<\xEF\xBD\x9C", 0) == 0 && token.ends_with("\xEF\xBD\x9C>"));
    EXPECT_TRUE(g->is_special(id) && looks_special)
        << "id " << id << " '" << token << "': special " << g->is_special(id) << " in the GGUF, " << hf->is_special(id)
        << " in tokenizer.json";
    ++special_only_in_gguf;
  }
  // Qwen3's six FIM and repository tokens, DeepSeek-V3's fourteen role and tool markers.
  const std::map<std::string, std::size_t> expected = {{"qwen3", 6}, {"deepseek_v3", 14}, {"gptoss", 0}};
  EXPECT_EQ(special_only_in_gguf, expected.at(GetParam()));
}

// Added tokens (the GGUF's control and user-defined ones) are found whole, never split or merged
// with their neighbours, come back as written, and are special exactly when CONTROL.
TEST_P(GgufTokenizer, AddedTokensAreAtomic) {
  FT_REQUIRE_TOKENIZER(hf, GetParam());
  FT_REQUIRE_GGUF_TOKENIZER(g, GetParam());
  std::string why;
  auto file = engine::GgufFile::open(unpack_gguf(GetParam(), &why));
  ASSERT_TRUE(file) << file.status().to_string();
  auto vocab = proxy::read_gguf_vocab(file->metadata());
  ASSERT_TRUE(vocab) << vocab.status().to_string();
  std::size_t added = 0;
  for (std::size_t id = 0; id < vocab->tokens.size(); ++id) {
    const auto type = static_cast<GgufTokenType>(vocab->token_types[id]);
    if (type != GgufTokenType::kControl && type != GgufTokenType::kUserDefined) continue;
    const std::string& token = vocab->tokens[id];
    const std::string text = "x" + token + "y";
    const Ids ids = g->encode(text);
    ASSERT_EQ(ids.size(), 3u) << token;
    EXPECT_EQ(ids[1], static_cast<int32_t>(id)) << token;
    EXPECT_EQ(ids, hf->encode(text)) << token;
    EXPECT_EQ(g->decode(ids), text) << token;
    EXPECT_EQ(g->is_special(ids[1]), type == GgufTokenType::kControl) << token;
    EXPECT_EQ(g->decode(ids, /*skip_special_tokens=*/true), type == GgufTokenType::kControl ? "xy" : text) << token;
    ++added;
  }
  const std::map<std::string, std::size_t> expected = {{"qwen3", 26}, {"deepseek_v3", 818}, {"gptoss", 21}};
  EXPECT_EQ(added, expected.at(GetParam())) << "the added tokens of tokenizer.json";
}

TEST_P(GgufTokenizer, SpecialTokenIdsAndFlags) {
  FT_REQUIRE_TOKENIZER(hf, GetParam());
  FT_REQUIRE_GGUF_TOKENIZER(g, GetParam());
  EXPECT_EQ(g->eos_id(), hf->eos_id());
  EXPECT_EQ(g->eos_token(), hf->eos_token());
  EXPECT_EQ(g->pad_token(), hf->pad_token());
  EXPECT_EQ(g->add_bos_token(), hf->add_bos_token());
  EXPECT_EQ(g->add_eos_token(), hf->add_eos_token());
  EXPECT_EQ(g->encode("hi", true), hf->encode("hi", true));
  if (GetParam() == "qwen3") {
    // Qwen's tokenizer_config.json names no BOS; the converter records <|endoftext|> as one.
    EXPECT_FALSE(hf->bos_id().has_value());
    EXPECT_EQ(g->bos_id(), 151643);
    EXPECT_EQ(g->eos_id(), 151645);
  } else {
    EXPECT_EQ(g->bos_id(), hf->bos_id());
    EXPECT_EQ(g->bos_token(), hf->bos_token());
  }
}

// tokenizer.chat_template is the template of tokenizer_config.json, and the proxy's ChatTemplate
// renders with it as with the directory's.
TEST_P(GgufTokenizer, ChatTemplateIsTheTokenizerConfigOne) {
  FT_REQUIRE_TOKENIZER(hf, GetParam());
  FT_REQUIRE_GGUF_TOKENIZER(g, GetParam());
  auto config = nlohmann::json::parse(ft::test::read_file(test::tokenizer_dir(GetParam()) / "tokenizer_config.json"),
                                      nullptr, false);
  ASSERT_TRUE(config.is_object());
  EXPECT_EQ(g->chat_template(), config.value("chat_template", std::string()));
  EXPECT_EQ(g->chat_template(), hf->chat_template());
  if (g->chat_template().empty()) {
    EXPECT_EQ(ChatTemplate::from_tokenizer(*g).status().code(), ErrorCode::kNotFound);
    return;
  }
  auto from_gguf = ChatTemplate::from_tokenizer(*g);
  ASSERT_TRUE(from_gguf) << from_gguf.status().to_string();
  auto from_dir = ChatTemplate::from_tokenizer(*hf);
  ASSERT_TRUE(from_dir) << from_dir.status().to_string();
  const std::string conversation =
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
                      {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "2+2?"}]})";
  auto want = from_dir->render_with_boundaries(conversation);
  ASSERT_TRUE(want) << want.status().to_string();
  auto got = from_gguf->render_with_boundaries(conversation);
  ASSERT_TRUE(got) << got.status().to_string();
  EXPECT_EQ(got->text, want->text);
  auto want_ids = tokenize_chat(*want, *from_dir, *hf);
  auto got_ids = tokenize_chat(*got, *from_gguf, *g);
  ASSERT_TRUE(want_ids && got_ids);
  EXPECT_EQ(*got_ids, *want_ids);
  EXPECT_EQ(from_gguf->markers(), from_dir->markers());
}

INSTANTIATE_TEST_SUITE_P(Families, GgufTokenizer, ::testing::ValuesIn(test::tokenizer_families()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ft::protocol

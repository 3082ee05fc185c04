// Exact ids against HF `tokenizers` (Python) for every corpus file, per family. The goldens are
// made on a host with HF tokenizers by scripts/goldens/make_tokenizer_goldens.py; until they exist
// the tests skip and name the missing file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.h"
#include "tokenizer_test_util.h"

namespace ft::protocol {
namespace {

using Ids = std::vector<int32_t>;

// "first difference at id 12: expected [.. a b c ..] got [.. a x c ..]" with token spellings.
std::string describe_difference(const Tokenizer& t, const Ids& want, const Ids& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto window = [&](const Ids& ids) {
    std::ostringstream os;
    for (std::size_t k = i >= 3 ? i - 3 : 0; k < std::min(ids.size(), i + 4); ++k)
      os << (k == i ? " >" : " ") << ids[k] << "'" << t.id_to_token(ids[k]).value_or("?") << "'";
    return os.str();
  };
  std::ostringstream os;
  os << "first difference at index " << i << " (expected " << want.size() << " ids, got " << got.size()
     << ")\n  expected:" << window(want) << "\n  got:     " << window(got);
  return os.str();
}

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, MatchesHfTokenizersOnTheCorpus) {
  const std::string family = GetParam();
  const auto golden_path = std::filesystem::path(FT_FIXTURES_DIR) / "tokenizer/golden" / (family + ".json");
  if (!std::filesystem::exists(golden_path))
    GTEST_SKIP() << "missing " << golden_path.string()
                 << " (make it on a host with HF tokenizers: scripts/goldens/make_tokenizer_goldens.py)";
  FT_REQUIRE_TOKENIZER(t, family);
  auto golden = nlohmann::json::parse(ft::test::read_file(golden_path), nullptr, false);
  ASSERT_TRUE(golden.is_object()) << golden_path << " is not a JSON object";

  std::size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::corpus_dir())) {
    const std::string name = entry.path().filename().string();
    if (!golden.contains(name)) {
      ADD_FAILURE() << name << " has no golden in " << golden_path.string() << ": re-run make_tokenizer_goldens.py";
      continue;
    }
    const Ids want = golden[name].get<Ids>();
    const Ids got = t->encode(ft::test::read_file(entry.path()));
    EXPECT_TRUE(want == got) << family << " " << name << ": " << describe_difference(*t, want, got);
    ++checked;
  }
  EXPECT_EQ(checked, golden.size()) << "the golden lists files the corpus no longer has";
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerGolden, ::testing::ValuesIn(test::tokenizer_families()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ft::protocol

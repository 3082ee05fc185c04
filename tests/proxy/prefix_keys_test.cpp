#include "ft/proxy/prefix_keys.h"

#include <gtest/gtest.h>

namespace ft::proxy {
namespace {

TEST(PrefixKeys, EqualPrefixesGiveEqualKeysWhateverFollows) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8}, b = {1, 2, 3, 4, 5, 9, 9, 9, 9};
  const std::vector<std::size_t> cuts = {2, 5, 8};
  auto ka = prefix_cuts("model-A", a, cuts), kb = prefix_cuts("model-A", b, cuts);
  ASSERT_EQ(ka.size(), 3u);
  ASSERT_EQ(kb.size(), 3u);
  EXPECT_EQ(ka[0].key, kb[0].key);
  EXPECT_EQ(ka[1].key, kb[1].key);
  EXPECT_NE(ka[2].key, kb[2].key);
  EXPECT_EQ(ka[1].tokens, 5u);
}

TEST(PrefixKeys, RootedInTheModel) {
  const std::vector<int32_t> t = {1, 2, 3};
  const std::vector<std::size_t> cuts = {3};
  EXPECT_NE(prefix_cuts("model-A", t, cuts)[0].key, prefix_cuts("model-B", t, cuts)[0].key);
}

// A key names its token prefix alone: where the conversation's other boundaries fall (boundary
// finding under its work budget leaves older ones out) does not change it.
TEST(PrefixKeys, KeysNameThePrefixNotWhereOtherCutsFall) {
  const std::vector<int32_t> t = {10, 20, 30, 40};
  const std::vector<std::size_t> c1 = {1, 4}, c2 = {3, 4}, c3 = {4};
  const store::PrefixKey k = prefix_key("m", t);
  EXPECT_EQ(prefix_cuts("m", t, c1).back().key, k);
  EXPECT_EQ(prefix_cuts("m", t, c2).back().key, k);
  EXPECT_EQ(prefix_cuts("m", t, c3).back().key, k);
  EXPECT_EQ(prefix_cuts("m", t, c2).front().key, prefix_key("m", std::span(t).first(3)));
  EXPECT_NE(prefix_key("m", std::span(t).first(3)), k);
}

TEST(PrefixKeys, SkipsBoundariesOutOfOrderOrPastTheEnd) {
  const std::vector<int32_t> t = {1, 2, 3};
  const std::vector<std::size_t> cuts = {0, 2, 2, 1, 3, 7};
  auto k = prefix_cuts("m", t, cuts);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].tokens, 2u);
  EXPECT_EQ(k[1].tokens, 3u);
}

TEST(PrefixKeys, StableAcrossBuildsAndMachines) {
  // A persisted key must never change meaning: pin one value.
  const std::vector<int32_t> t = {151644, 872, 198};
  const std::vector<std::size_t> cuts = {3};
  EXPECT_EQ(prefix_cuts("qwen3_5_moe", t, cuts)[0].key.to_hex(), "cfce3e4638713bb0710841df802f86c4");
  EXPECT_EQ(root_prefix_key("").to_hex(), "99aa06d3014798d86001c324468d497f");  // XXH3-128 of ""
}

}  // namespace
}  // namespace ft::proxy

// `--api-keys FILE`: a file of "TENANT KEY" lines, refused (one line, exit 2) when others can read
// it, when a line is malformed, or together with --api-key. The refusals come before the model is
// read, so any directory serves as --model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;

fs::path keys_file(const TempDir& dir, const std::string& text, fs::perms perms) {
  const fs::path f = dir.path() / "keys";
  std::ofstream(f) << text;
  fs::permissions(f, perms);
  return f;
}

CommandResult serve(const TempDir& dir, const fs::path& keys, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"serve", "--model", dir.path().string(), "--port", "0", "--api-keys", keys.string()};
  args.insert(args.end(), more.begin(), more.end());
  return run_freetoken(args);
}

void expect_refused(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

constexpr fs::perms kOwner = fs::perms::owner_read | fs::perms::owner_write;

TEST(ApiKeysFile, RefusedWhenOthersCanReadIt) {
  TempDir dir;
  expect_refused(serve(dir, keys_file(dir, "a k1\n", kOwner | fs::perms::others_read)), "chmod 600");
}

TEST(ApiKeysFile, MalformedLinesAreNamed) {
  TempDir dir;
  expect_refused(serve(dir, keys_file(dir, "# team keys\na k1\nb\n", kOwner)), "keys:3: expected TENANT KEY");
  expect_refused(serve(dir, keys_file(dir, "a k1 extra\n", kOwner)), "keys:1: expected TENANT KEY");
  expect_refused(serve(dir, keys_file(dir, "a/b k1\n", kOwner)), "letters, digits");
  expect_refused(serve(dir, keys_file(dir, "a k1\nb k1\n", kOwner)), "keys:2: this key is already listed");
  expect_refused(serve(dir, keys_file(dir, "# nothing\n", kOwner)), "no TENANT KEY lines");
}

TEST(ApiKeysFile, NotTogetherWithASingleKey) {
  TempDir dir;
  expect_refused(serve(dir, keys_file(dir, "a k1\n", kOwner), {"--api-key", "k"}), "give one of them");
}

}  // namespace
}  // namespace ft::test

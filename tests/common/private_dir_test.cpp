// make_private_dir: the store's and captures' directories are the owner's alone, and a directory
// someone else prepared is refused rather than written into.
#include "ft/common/private_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 0777;
}

TEST(PrivateDir, CreatesNestedDirectoriesOwnerOnly) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "a" / "b" / "store";
  ASSERT_TRUE(make_private_dir(dir));
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_EQ(mode_of(dir), 0700u);
  ASSERT_TRUE(make_private_dir(dir)) << "idempotent";
}

TEST(PrivateDir, TightensAnOpenDirectoryOfOurOwn) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "open";
  fs::create_directory(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_TRUE(make_private_dir(dir));
  EXPECT_EQ(mode_of(dir), 0700u);
}

TEST(PrivateDir, RefusesALinkAFileOrAnotherUsersDirectory) {
  TempDir tmp;
  const fs::path target = tmp.path() / "elsewhere", link = tmp.path() / "link", file = tmp.path() / "file";
  fs::create_directory(target);
  fs::create_directory_symlink(target, link);
  const Status linked = make_private_dir(link);
  ASSERT_FALSE(linked);
  EXPECT_NE(linked.message().find("symbolic link"), std::string::npos) << linked.message();
  std::ofstream(file) << "x";
  EXPECT_FALSE(make_private_dir(file));
  if (::geteuid() == 0) {  // only root can hand a directory to someone else
    const fs::path theirs = tmp.path() / "theirs";
    fs::create_directory(theirs);
    ASSERT_EQ(::chown(theirs.c_str(), 54321, 54321), 0);
    const Status st = make_private_dir(theirs);
    ASSERT_FALSE(st);
    EXPECT_NE(st.message().find("belongs to another user"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace ft::test

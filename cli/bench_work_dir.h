// A fresh private directory under a base (`<base>/freetoken-<what>-XXXXXX`) for a benchmark's
// logs and store; removed when the benchmark ends unless kept (asked for, or kept on a failure so
// its logs can be read).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace ft::cli {

class WorkDir {
 public:
  WorkDir(const std::filesystem::path& base, const std::string& what) {
    std::string tmpl = (base / ("freetoken-" + what + "-XXXXXX")).string();
    if (mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~WorkDir() {
    std::error_code ec;
    if (!keep_ && !path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::filesystem::path& path() const { return path_; }  // empty: it could not be made
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

}  // namespace ft::cli

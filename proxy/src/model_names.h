// Which model names a single-model server answers. By default every name: an agent pointed at the
// server with only its base URL sends whatever model it defaults to (Claude Code: claude-opus-…,
// and a haiku model for side calls) and gets this model, with its own name reported back. With
// --strict-model-names only the served name and the alias patterns are accepted, others are 404.
#pragma once

#include <mutex>
#include <set>
#include <string>

#include "ft/proxy/server.h"

namespace ft::proxy {

// `pattern` with * (any run of characters) and ? (one character) against `name`.
bool glob_match(const std::string& pattern, const std::string& name);

class ModelNames {
 public:
  explicit ModelNames(const ServerOptions& options) : options_(options) {}
  // Whether a request for `requested` is served. The first request for each name other than the
  // served one is logged, saying which model answers it (the first kMaxLoggedNames names).
  bool serves(const std::string& requested);
  std::size_t names_remembered();

  static constexpr std::size_t kMaxLoggedNames = 64;

 private:
  bool named(const std::string& requested) const;
  const ServerOptions& options_;
  std::mutex mu_;
  std::set<std::string> logged_;
};

}  // namespace ft::proxy

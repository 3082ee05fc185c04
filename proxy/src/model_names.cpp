#include "model_names.h"

#include "ft/common/log.h"

namespace ft::proxy {

bool glob_match(const std::string& pattern, const std::string& name) {
  // Iterative with one backtrack point (the last *): linear in practice, no recursion.
  std::size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool ModelNames::named(const std::string& requested) const {
  if (requested == options_.model_id) return true;
  for (const std::string& a : options_.model_aliases)
    if (glob_match(a, requested)) return true;
  return false;
}

bool ModelNames::serves(const std::string& requested) {
  const bool named_here = named(requested);
  if (!named_here && options_.strict_model_names) return false;
  if (requested != options_.model_id) {
    std::lock_guard lock(mu_);
    // Names come from clients: remembered (and logged) up to a bound, so random names neither
    // grow the proxy's memory nor flood its log.
    if (logged_.size() < kMaxLoggedNames && logged_.insert(requested).second) {
      FT_INFO(
          "requests for model '" << requested << "' are served by '" << options_.model_id << "'"
                                 << (logged_.size() == kMaxLoggedNames ? " (further new names are not logged)" : ""));
    }
  }
  return true;
}

std::size_t ModelNames::names_remembered() {
  std::lock_guard lock(mu_);
  return logged_.size();
}

}  // namespace ft::proxy

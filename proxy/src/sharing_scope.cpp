#include "ft/proxy/sharing_scope.h"

#include <algorithm>

namespace ft::proxy {

namespace {
constexpr std::string_view kSeparator = "/scope:";
}

bool valid_scope(std::string_view scope) {
  if (scope.empty() || scope.size() > 64) return false;
  return std::all_of(scope.begin(), scope.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '-';
  });
}

std::string scope_rule() {
  return std::string(kScopeHeader) + " must be 1-64 characters of letters, digits, '.', '_', ':' and '-'";
}

std::string scoped_namespace(const std::string& tenant, std::string_view scope) {
  return tenant + std::string(kSeparator) + std::string(scope);
}

bool in_tenant(std::string_view space, std::string_view tenant) {
  if (space == tenant) return true;
  return space.size() > tenant.size() + kSeparator.size() && space.substr(0, tenant.size()) == tenant &&
         space.substr(tenant.size(), kSeparator.size()) == kSeparator;
}

}  // namespace ft::proxy

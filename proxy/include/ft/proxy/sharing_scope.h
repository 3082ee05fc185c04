// Sharing scopes: which requests of one tenant share checkpoints. By default every session and
// sub-agent of a tenant shares them (a sub-agent's system prompt is restored, not recomputed). A
// request that sends `X-FreeToken-Scope: NAME` saves and finds checkpoints only among requests of
// its tenant with the same scope: one multi-agent session, a project, a person behind a team key.
#pragma once

#include <string>
#include <string_view>

namespace ft::proxy {

inline constexpr const char* kScopeHeader = "X-FreeToken-Scope";

// 1-64 characters of [A-Za-z0-9._:-]: a name, never a path or anything to escape.
bool valid_scope(std::string_view scope);
std::string scope_rule();  // the sentence an invalid scope's error gives
// The checkpoint namespace of `tenant` narrowed to `scope`.
std::string scoped_namespace(const std::string& tenant, std::string_view scope);
// Whether checkpoint namespace `space` belongs to `tenant` (the tenant's own or one of its scopes).
bool in_tenant(std::string_view space, std::string_view tenant);

}  // namespace ft::proxy

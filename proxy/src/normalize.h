// Volatile request bytes that would defeat prefix caching, removed before rendering by an
// explicit rule list (proxy/README.md lists the rules; each is tested on captured traffic).
// A rule only drops or rewrites bytes the model does not need to see to answer the same way.
//
// What needs no rule because the canonical parse already erases it: cache_control markers,
// string vs [text-block] content, defer_loading tools (not rendered until loaded), tool-call id
// rewrites and argument re-serialisation (ids are not rendered by the templates we key on;
// arguments are re-serialised canonically), thinking signatures.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ft/protocol/conversation.h"

namespace ft::proxy {

struct NormalizationRule {
  const char* name;
  const char* why;
  protocol::Dialect dialect;
  // Edits the request body in place; true when it changed something.
  bool (*apply)(nlohmann::ordered_json& body);
};

const std::vector<NormalizationRule>& normalization_rules();

// Applies the dialect's rules; returns the names of those that changed the body.
std::vector<std::string> normalize_request(protocol::Dialect dialect, nlohmann::ordered_json& body);

}  // namespace ft::proxy

// Shared pieces of the response encoders. Private to protocol/.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ft::protocol::detail {

using OJson = nlohmann::ordered_json;  // field order as the real APIs send it

inline std::string dump(const OJson& j) { return j.dump(-1, ' ', false, OJson::error_handler_t::replace); }

inline std::string sse(const std::string& event, const OJson& data) {
  return "event: " + event + "\ndata: " + dump(data) + "\n\n";
}
inline std::string sse_data(const OJson& data) { return "data: " + dump(data) + "\n\n"; }

// Arguments are compact JSON text; parse to embed them as objects where an API wants objects.
inline OJson parse_or_empty(const std::string& text) {
  auto j = OJson::parse(text, nullptr, false);
  return j.is_discarded() ? OJson::object() : j;
}

}  // namespace ft::protocol::detail

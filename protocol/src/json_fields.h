// Typed access to request JSON fields with errors that name the field path. Private to protocol/.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "ft/common/result.h"

namespace ft::protocol::detail {

using Json = nlohmann::ordered_json;  // key order matters: it reaches the prompt

inline Status field_error(const std::string& path, const std::string& what) {
  return invalid_argument(path + ": " + what);
}

inline const char* json_type_name(const Json& j) { return j.type_name(); }

// Optional string/number/bool fields: absent or null -> leave `out` untouched.
inline Status get_string(const Json& obj, const char* key, const std::string& path, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string()) return field_error(path + "." + key, std::string("expected a string, got ") + it->type_name());
  out = it->get<std::string>();
  return {};
}

template <typename T>
Status get_number(const Json& obj, const char* key, const std::string& path, std::optional<T>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_number()) return field_error(path + "." + key, std::string("expected a number, got ") + it->type_name());
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer() && !it->is_number_unsigned())
      return field_error(path + "." + key, "expected an integer");
    // get<T>() would wrap (4294967297 -> 1 for an int): a value T cannot hold is refused.
    const bool fits = it->is_number_unsigned()
                          ? it->template get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<T>::max())
                          : std::numeric_limits<T>::is_signed
                                ? it->template get<std::int64_t>() >= std::int64_t(std::numeric_limits<T>::min()) &&
                                      it->template get<std::int64_t>() <= std::int64_t(std::numeric_limits<T>::max())
                                : it->template get<std::int64_t>() >= 0;
    if (!fits) {
      return field_error(path + "." + key, "out of range [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                                               std::to_string(std::numeric_limits<T>::max()) + "]");
    }
  }
  out = it->template get<T>();
  return {};
}

inline Status get_bool(const Json& obj, const char* key, const std::string& path, bool& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_boolean()) return field_error(path + "." + key, std::string("expected a boolean, got ") + it->type_name());
  out = it->get<bool>();
  return {};
}

inline Result<Json> parse_body(std::string_view body) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("request body is not valid JSON");
  if (!j.is_object()) return invalid_argument(std::string("request body must be a JSON object, got ") + j.type_name());
  return j;
}

// stop / stop_sequences: a string or an array of strings.
inline Status get_stop(const Json& obj, const char* key, std::vector<std::string>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
    return {};
  }
  if (!it->is_array()) return field_error(key, "expected a string or an array of strings");
  for (const auto& s : *it) {
    if (!s.is_string()) return field_error(key, "expected an array of strings");
    out.push_back(s.get<std::string>());
  }
  return {};
}

}  // namespace ft::protocol::detail

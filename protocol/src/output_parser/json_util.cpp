#include "output_parser/json_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "output_parser/stream_core.h"

namespace ft::protocol::detail {
namespace {

// ordered_json keeps keys in the order the model wrote them: clients diff and display arguments.
using Json = nlohmann::ordered_json;

std::optional<Json> parse_json(std::string_view s) {
  // No exceptions: model output is untrusted, a parse failure is an ordinary outcome.
  Json j = Json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string dump(const Json& j) {
  // replace: a model may emit invalid UTF-8 inside a string; never throw over it.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Type names as JSON Schema writes them, plus the loose ones vLLM's parsers accept.
ParamKind kind_from_type_name(std::string_view type_name) {
  std::string t = lower(trim_ws(type_name));
  auto starts = [&](std::string_view p) { return t.rfind(p, 0) == 0; };
  if (t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum") {
    return ParamKind::kString;
  }
  if (starts("int") || starts("uint") || starts("long") || starts("short") || starts("unsigned")) {
    return ParamKind::kInteger;
  }
  if (starts("num") || starts("float") || starts("double")) return ParamKind::kNumber;
  if (t == "boolean" || t == "bool" || t == "binary") return ParamKind::kBoolean;
  if (t == "object" || starts("dict")) return ParamKind::kObject;
  if (t == "array" || t == "arr" || starts("list")) return ParamKind::kArray;
  if (t == "null") return ParamKind::kNull;
  return ParamKind::kUnknown;
}

ParamKind kind_of_schema(const Json& schema, int depth = 0) {
  if (!schema.is_object() || depth > 8) return ParamKind::kUnknown;
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) return kind_from_type_name(it->get<std::string>());
    if (it->is_array()) {
      // ["integer", "null"]: the first non-null type decides; null values parse anyway.
      for (const auto& t : *it) {
        if (t.is_string() && kind_from_type_name(t.get<std::string>()) != ParamKind::kNull) {
          return kind_from_type_name(t.get<std::string>());
        }
      }
      return ParamKind::kNull;
    }
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (const auto& branch : *it) {
        ParamKind k = kind_of_schema(branch, depth + 1);
        if (k != ParamKind::kNull && k != ParamKind::kUnknown) return k;
      }
    }
  }
  if (schema.contains("enum")) return ParamKind::kString;
  if (schema.contains("properties")) return ParamKind::kObject;
  if (schema.contains("items")) return ParamKind::kArray;
  return ParamKind::kUnknown;
}

// Integral floats become integers, as Python's float→int round trip in vLLM does ("5.0" → 5).
Json integral_if_whole(const Json& j) {
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return Json(static_cast<std::int64_t>(d));
    }
  }
  return j;
}

Json convert_qwen_coder(std::string_view raw, ParamKind kind) {
  std::string value(raw);
  if (lower(value) == "null") return Json(nullptr);
  switch (kind) {
    case ParamKind::kAbsent:
    case ParamKind::kString:
      return Json(value);
    case ParamKind::kInteger:
      if (auto j = parse_json(trim_ws(value)); j && j->is_number_integer()) return *j;
      return Json(value);
    case ParamKind::kNumber:
      if (auto j = parse_json(trim_ws(value)); j && j->is_number()) return integral_if_whole(*j);
      return Json(value);
    case ParamKind::kBoolean: {
      std::string b = lower(trim_ws(value));
      if (b == "true" || b == "false") return Json(b == "true");
      return Json(value);
    }
    case ParamKind::kObject:
    case ParamKind::kArray:
    case ParamKind::kNull:
    case ParamKind::kUnknown:
      if (auto j = parse_json(value)) return *j;
      return Json(value);
  }
  return Json(value);
}

Json convert_glm(std::string_view raw, ParamKind kind) {
  if (kind == ParamKind::kAbsent || kind == ParamKind::kString) return Json(std::string(raw));
  if (auto j = parse_json(raw)) return *j;
  return Json(std::string(raw));
}

}  // namespace

std::size_t json_container_length(std::string_view s) {
  JsonScanState state;
  return json_container_length(s, state);
}

std::size_t json_container_length(std::string_view s, JsonScanState& st) {
  if (st.length != 0) return st.length;
  for (; st.pos < s.size(); ++st.pos) {
    char c = s[st.pos];
    if (st.in_string) {
      if (st.escaped) {
        st.escaped = false;
      } else if (c == '\\') {
        st.escaped = true;
      } else if (c == '"') {
        st.in_string = false;
      }
      continue;
    }
    if (c == '"') {
      st.in_string = true;
    } else if (c == '{' || c == '[') {
      ++st.depth;
    } else if (c == '}' || c == ']') {
      // depth < 0 is a stray closer: end here and let the JSON parser reject it.
      if (--st.depth <= 0) return st.length = st.pos + 1;
    }
  }
  return 0;
}

std::optional<std::string> normalize_json_object(std::string_view s) {
  auto j = parse_json(s);
  if (!j || !j->is_object()) return std::nullopt;
  return dump(*j);
}

std::optional<std::pair<std::string, std::string>> parse_named_call(std::string_view s) {
  auto j = parse_json(s);
  if (!j || !j->is_object()) return std::nullopt;
  auto name = j->find("name");
  if (name == j->end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto args = j->find("arguments");
  if (args == j->end()) args = j->find("parameters");
  std::string args_json = "{}";
  if (args != j->end()) {
    if (args->is_object()) {
      args_json = dump(*args);
    } else if (args->is_string()) {
      // Some fine-tunes double-encode the arguments; accept them when they hold an object.
      auto inner = normalize_json_object(args->get<std::string>());
      if (!inner) return std::nullopt;
      args_json = *inner;
    } else if (!args->is_null()) {
      return std::nullopt;
    }
  }
  return std::make_pair(name->get<std::string>(), std::move(args_json));
}

ToolSchemas::ToolSchemas(const std::vector<ToolSpec>& tools) {
  for (const ToolSpec& tool : tools) {
    auto& params = kinds_[tool.name];
    auto schema = parse_json(tool.parameters_schema_json);
    if (!schema || !schema->is_object()) continue;
    auto props = schema->find("properties");
    if (props == schema->end() || !props->is_object()) continue;
    for (auto it = props->begin(); it != props->end(); ++it) params[it.key()] = kind_of_schema(it.value());
  }
}

ParamKind ToolSchemas::kind(std::string_view tool, std::string_view param) const {
  auto t = kinds_.find(tool);
  if (t == kinds_.end()) return ParamKind::kAbsent;
  auto p = t->second.find(param);
  return p == t->second.end() ? ParamKind::kAbsent : p->second;
}

std::string arguments_from_raw_params(std::string_view tool,
                                      const std::vector<std::pair<std::string, std::string>>& params,
                                      RawValueStyle style, const ToolSchemas& schemas) {
  Json args = Json::object();
  for (const auto& [name, raw] : params) {
    ParamKind kind = schemas.kind(tool, name);
    args[name] = style == RawValueStyle::kQwenCoder ? convert_qwen_coder(raw, kind) : convert_glm(raw, kind);
  }
  return dump(args);
}

}  // namespace ft::protocol::detail

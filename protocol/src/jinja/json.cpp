// JSON in and out of template values. Output reproduces Python's json.dumps byte for byte (the
// `tojson` HF installs), because tool schemas and tool-call arguments reach the prompt through it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ft/protocol/jinja.h"
#include "jinja/runtime.h"
#include "jinja/text.h"

namespace ft::protocol::jinja {
namespace {

using Json = nlohmann::ordered_json;  // keeps the client's key order, as Python's dict does

void dump_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out.push_back('"');
  for (char32_t cp : text::decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[16];
        if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
          if (cp >= 0x10000) {  // ensure_ascii writes astral characters as a surrogate pair
            char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          text::append_utf8(cp, out);
        }
      }
    }
  }
  out.push_back('"');
}

struct Dumper {
  bool ensure_ascii;
  int indent;
  bool sort_keys;
  std::string item_sep;  // json.dumps separators; HF's default is (", ", ": "), or "," with indent
  std::string key_sep;
  std::string out;

  void newline(int depth) {
    out.push_back('\n');
    out.append(static_cast<size_t>(indent) * depth, ' ');
  }
  // Python's separators: item ", " when single-line, "," + newline when indented; key ": ".
  Status dump(const Value& v, int depth) {
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return {};
      case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return {};
      case Value::Kind::kInt: out += std::to_string(v.as_int()); return {};
      case Value::Kind::kFloat: {
        double d = v.as_double();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : text::float_repr(d);
        return {};
      }
      case Value::Kind::kString: dump_string(v.as_string(), ensure_ascii, out); return {};
      case Value::Kind::kList: {
        const List& items = v.as_list();
        if (items.empty()) {
          out += "[]";
          return {};
        }
        out.push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(depth + 1);
          FT_RETURN_IF_ERROR(dump(items[i], depth + 1));
        }
        if (indent >= 0) newline(depth);
        out.push_back(']');
        return {};
      }
      case Value::Kind::kDict: {
        if (v.is_namespace()) return invalid_argument("Object of type Namespace is not JSON serializable");
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.as_dict().entries()) entries.push_back(&e);
        if (sort_keys) {
          std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
        }
        if (entries.empty()) {
          out += "{}";
          return {};
        }
        out.push_back('{');
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(depth + 1);
          dump_string(entries[i]->first, ensure_ascii, out);
          out += key_sep;
          FT_RETURN_IF_ERROR(dump(entries[i]->second, depth + 1));
        }
        if (indent >= 0) newline(depth);
        out.push_back('}');
        return {};
      }
      case Value::Kind::kUndefined: return invalid_argument("Object of type Undefined is not JSON serializable");
      case Value::Kind::kCallable: return invalid_argument("Object of type function is not JSON serializable");
    }
    return {};
  }
};

Value from_json_value(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Value::number(static_cast<double>(u))
                                                   : Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value::number(j.get<double>());
    case Json::value_t::string: return Value::string(j.get<std::string>());
    case Json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_value(e));
      return Value::list(std::move(items));
    }
    case Json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json_value(it.value()));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace

Result<std::string> to_json_with(const Value& value, bool ensure_ascii, int indent, bool sort_keys,
                                 const std::string* item_sep, const std::string* key_sep) {
  Dumper d{ensure_ascii, indent, sort_keys, item_sep ? *item_sep : (indent >= 0 ? "," : ", "),
           key_sep ? *key_sep : ": ", {}};
  FT_RETURN_IF_ERROR(d.dump(value, 0));
  return std::move(d.out);
}

Result<std::string> to_json(const Value& value, bool ensure_ascii, int indent, bool sort_keys) {
  Dumper d{ensure_ascii, indent, sort_keys, indent >= 0 ? "," : ", ", ": ", {}};
  FT_RETURN_IF_ERROR(d.dump(value, 0));
  return std::move(d.out);
}

Result<Value> from_json(std::string_view json_text) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("invalid JSON");
  return from_json_value(j);
}

}  // namespace ft::protocol::jinja

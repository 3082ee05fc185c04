// Shared pieces of the evaluator: the internal error signal and the Python/Jinja2 operations that
// filters, methods and the tree walker all use.
#pragma once

#include <string>
#include <vector>

#include "ft/protocol/jinja.h"

namespace ft::protocol::jinja {

// Raised anywhere during rendering and caught once in Template::render, which returns it as a
// Status. An exception here (and only here) keeps deep recursion free of error plumbing; it never
// leaves the library.
struct RenderError {
  std::string message;
  bool positioned = false;  // already names a template line/column
};
[[noreturn]] void fail(std::string message);

// Jinja2's environment.getattr: attribute first (dict methods, str methods), then item.
Value get_attr(const Value& obj, const std::string& name);
// Jinja2's environment.getitem: item first, then attribute for string keys.
Value get_item(const Value& obj, const Value& key);
Value call_value(const Value& fn, const CallArgs& args);
// What `for x in v` visits: list items, dict keys, string characters; undefined is empty.
List iterate(const Value& v);
// Python `a in b`.
bool contains(const Value& container, const Value& item);
// Python <, for sorting and comparisons; fails on incomparable types.
bool less_than(const Value& a, const Value& b);
std::string type_name(const Value& v);

Value apply_filter(const std::string& name, const Value& in, const CallArgs& args);
bool apply_test(const std::string& name, const Value& in, const CallArgs& args);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

// to_json with explicit json.dumps separators (null: the defaults).
Result<std::string> to_json_with(const Value& value, bool ensure_ascii, int indent, bool sort_keys,
                                 const std::string* item_sep, const std::string* key_sep);

// Predefined globals: raise_exception, namespace, range, dict, strftime_now.
void add_builtin_globals(Dict& globals);

// Argument access for native functions: positional index or keyword name, else a default.
const Value* find_arg(const CallArgs& args, size_t index, const char* name);
Value arg_or(const CallArgs& args, size_t index, const char* name, Value fallback);

}  // namespace ft::protocol::jinja

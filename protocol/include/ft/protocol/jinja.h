// A Jinja2-subset interpreter for Hugging Face chat templates.
//
// Checkpoints ship their prompt format as a Jinja template (tokenizer_config.json "chat_template" or
// chat_template.jinja). Re-implementing each format by hand drifts from the model's training format
// in small ways (a missing newline, a different JSON spacing) that cost accuracy silently, so we
// execute the shipped template itself, with the semantics transformers uses: Python Jinja2 in an
// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, loop controls, Python-style
// value printing (True, None, 1.0, ['a']), and HF's own `tojson` (json.dumps, ensure_ascii=False,
// separators ", " and ": ", keys in insertion order).
//
// Values follow Python: dicts keep insertion order, strings index by code point, `undefined` is a
// value of its own (Jinja2's default Undefined: prints as "", is falsy, fails on attribute access).
// Errors (syntax, unknown filter, raise_exception, type errors) come back as a Status whose message
// names the template line and column; rendering never throws and never aborts on bad input.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ft/common/result.h"

namespace ft::protocol::jinja {

class Value;
using List = std::vector<Value>;

// An insertion-ordered mapping with string keys (JSON objects, namespace() objects, keyword args).
class Dict {
 public:
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value value);  // replaces in place, or appends
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const;  // defined below Value: a vector of an incomplete type has no size yet

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
// A function visible to templates (raise_exception, strftime_now, macros, bound string methods).
using NativeFunction = std::function<Result<Value>(const CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(List items);
  static Value dict(Dict d);
  // A namespace() object: a dict whose entries are attributes that `set ns.x = ...` may change.
  static Value ns(Dict d);
  static Value callable(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && namespace_; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& as_string() const { return *s_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }  // namespaces only: shared, mutable state
  const std::string& callable_name() const { return *s_; }
  const NativeFunction& function() const { return *fn_; }

  // Python truthiness: "", 0, 0.0, [], {}, None and undefined are false.
  bool truthy() const;
  // str(value) as Jinja2 prints it: None -> "None", True -> "True", 1.0 -> "1.0", ['a'] -> "['a']".
  std::string str() const;
  // repr(value): strings quoted the way Python quotes them.
  std::string repr() const;
  // Python ==: 1 == 1.0 == True, lists and dicts compare deeply, undefined equals only undefined.
  bool equals(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool namespace_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const NativeFunction> fn_;
};

inline size_t Dict::size() const { return entries_.size(); }

// Python json.dumps(value, ensure_ascii, indent, separators=None -> HF defaults, sort_keys).
// `indent` < 0 means None (single line). Fails on undefined and callables, like json.dumps.
Result<std::string> to_json(const Value& value, bool ensure_ascii = false, int indent = -1,
                            bool sort_keys = false);
// Parses JSON text into values (objects keep their key order; 1 is an int, 1.0 a float).
Result<Value> from_json(std::string_view json_text);

class Template {
 public:
  // Parses a template; syntax errors name the line and column.
  static Result<Template> parse(std::string_view source);
  // Renders with `context` (a dict) as the global variables. raise_exception, namespace, range
  // and strftime_now (UTC clock) are predefined; entries of `context` override them.
  Result<std::string> render(const Value& context) const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ft::protocol::jinja

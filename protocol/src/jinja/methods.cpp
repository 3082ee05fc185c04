// Attribute and item access, the Python str/dict methods templates call (content.startswith(...),
// tool.items()), iteration, membership, ordering, and the predefined global functions.
#include <ctime>

#include "jinja/runtime.h"
#include "jinja/text.h"

namespace ft::protocol::jinja {

void fail(std::string message) { throw RenderError{std::move(message)}; }

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return v.is_namespace() ? "Namespace" : "dict";
    case Value::Kind::kCallable: return "function";
  }
  return "object";
}

const Value* find_arg(const CallArgs& args, size_t index, const char* name) {
  if (index < args.positional.size()) return &args.positional[index];
  for (const auto& [k, v] : args.keyword) if (k == name) return &v;
  return nullptr;
}

Value arg_or(const CallArgs& args, size_t index, const char* name, Value fallback) {
  const Value* v = find_arg(args, index, name);
  return v ? *v : std::move(fallback);
}

namespace {

const std::string& need_string(const Value& v, const char* what) {
  if (!v.is_string()) fail(std::string(what) + " must be a string, not " + type_name(v));
  return v.as_string();
}

int64_t need_int(const Value& v, const char* what) {
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
    fail(std::string(what) + " must be an integer, not " + type_name(v));
  }
  return v.as_int();
}

Value strings(const std::vector<std::string>& parts) {
  List out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

// startswith/endswith accept a str or a tuple of str.
bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) if (one(need_string(a, "startswith/endswith argument"))) return true;
    return false;
  }
  return one(need_string(affix, "startswith/endswith argument"));
}

int64_t find_cp(const std::string& s, const std::string& sub, bool from_right) {
  size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(text::length(std::string_view(s).substr(0, at)));
}

Value string_method(const std::string& s, const std::string& name) {
  auto bind = [&](NativeFunction fn) { return Value::callable("str." + name, std::move(fn)); };
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return bind([s, prefix](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) fail("startswith/endswith needs an argument");
      return Value::boolean(affix_match(s, a.positional[0], prefix));
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return bind([s, l, r](const CallArgs& a) -> Result<Value> {
      const Value* c = find_arg(a, 0, "chars");
      if (c && !c->is_none()) return Value::string(text::strip(s, &need_string(*c, "strip chars"), l, r));
      return Value::string(text::strip(s, nullptr, l, r));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return bind([s, right](const CallArgs& a) -> Result<Value> {
      const Value* sep = find_arg(a, 0, "sep");
      int64_t maxsplit = need_int(arg_or(a, 1, "maxsplit", Value::integer(-1)), "maxsplit");
      if (sep && !sep->is_none()) {
        const std::string& sp = need_string(*sep, "separator");
        if (sp.empty()) fail("empty separator");
        return strings(text::split(s, &sp, maxsplit, right));
      }
      return strings(text::split(s, nullptr, maxsplit, right));
    });
  }
  if (name == "lower" || name == "upper") {
    bool up = name == "upper";
    return bind([s, up](const CallArgs&) -> Result<Value> {
      return Value::string(up ? text::ascii_upper(s) : text::ascii_lower(s));
    });
  }
  if (name == "title" || name == "capitalize") {
    bool title = name == "title";
    return bind([s, title](const CallArgs&) -> Result<Value> {
      // ASCII letters only (see the header's gaps): title upper-cases the first letter of each
      // run of letters, capitalize only the first character; the rest is lower-cased.
      std::string out = text::ascii_lower(s);
      bool prev_alpha = false;
      for (size_t i = 0; i < out.size(); ++i) {
        char& c = out[i];
        bool alpha = (c >= 'a' && c <= 'z');
        if (alpha && (title ? !prev_alpha : i == 0)) c = static_cast<char>(c - 'a' + 'A');
        prev_alpha = alpha || (c >= 'A' && c <= 'Z');
      }
      return Value::string(out);
    });
  }
  if (name == "replace") {
    return bind([s](const CallArgs& a) -> Result<Value> {
      if (a.positional.size() < 2) fail("replace needs two arguments");
      int64_t count = need_int(arg_or(a, 2, "count", Value::integer(-1)), "count");
      return Value::string(text::replace(s, need_string(a.positional[0], "old"), need_string(a.positional[1], "new"), count));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    bool right = name[0] == 'r';
    bool raise = name.find("index") != std::string::npos;
    return bind([s, right, raise](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) fail("find needs an argument");
      int64_t at = find_cp(s, need_string(a.positional[0], "substring"), right);
      if (at < 0 && raise) fail("substring not found");
      return Value::integer(at);
    });
  }
  if (name == "count") {
    return bind([s](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) fail("count needs an argument");
      const std::string& sub = need_string(a.positional[0], "substring");
      if (sub.empty()) return Value::integer(static_cast<int64_t>(text::length(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    });
  }
  if (name == "join") {
    return bind([s](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) fail("join needs an argument");
      std::string out;
      bool first = true;
      for (const Value& v : iterate(a.positional[0])) {
        if (!first) out += s;
        first = false;
        out += need_string(v, "join item");
      }
      return Value::string(out);
    });
  }
  if (name == "splitlines") {
    return bind([s](const CallArgs&) -> Result<Value> {
      return strings(text::split_lines(s));
    });
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    char kind = name[2] == 'd' ? 'd' : name[2] == 's' ? 's' : name[4] == 'a' && name.size() == 7 ? 'a' : 'n';
    return bind([s, kind](const CallArgs&) -> Result<Value> {
      if (s.empty()) return Value::boolean(false);
      for (char32_t cp : text::decode(s)) {
        bool ok = kind == 's' ? text::is_space(cp)
                  : kind == 'd' ? (cp >= '0' && cp <= '9')
                  : kind == 'a' ? ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
                                : ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') || (cp >= '0' && cp <= '9');
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  }
  if (name == "format") {
    return bind([](const CallArgs&) -> Result<Value> { fail("str.format is not supported"); });
  }
  return Value();
}

Value dict_method(const Value& d, const std::string& name) {
  auto bind = [&](NativeFunction fn) { return Value::callable("dict." + name, std::move(fn)); };
  if (name == "get") {
    return bind([d](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) fail("get needs a key");
      const Value& key = a.positional[0];
      const Value* v = key.is_string() ? d.as_dict().find(key.as_string()) : nullptr;
      if (v) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value::none();
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    char which = name[0];
    return bind([d, which](const CallArgs&) -> Result<Value> {
      List out;
      for (const auto& [k, v] : d.as_dict().entries()) {
        if (which == 'i') out.push_back(Value::list({Value::string(k), v}));
        else out.push_back(which == 'k' ? Value::string(k) : v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "copy") {
    return bind([d](const CallArgs&) -> Result<Value> { return Value::dict(d.as_dict()); });
  }
  return Value();
}

// Methods the immutable sandbox refuses: the lookup yields undefined, as in transformers.
bool unsafe_dict_attr(const std::string& n) {
  return n == "clear" || n == "pop" || n == "popitem" || n == "setdefault" || n == "update" || n == "fromkeys";
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: fail("'" + name + "' of an undefined value: the value is undefined");
    case Value::Kind::kString: {
      Value m = string_method(obj.as_string(), name);
      return m;
    }
    case Value::Kind::kDict: {
      if (obj.is_namespace()) {
        const Value* v = obj.as_dict().find(name);
        return v ? *v : Value();
      }
      if (unsafe_dict_attr(name)) return Value();
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.as_dict().find(name);
      return v ? *v : Value();
    }
    default: return Value();
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: fail("cannot subscript an undefined value");
    case Value::Kind::kDict: {
      if (key.is_string()) {
        if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
        return get_attr(obj, key.as_string());
      }
      return Value();
    }
    case Value::Kind::kList: {
      if (key.kind() != Value::Kind::kInt && key.kind() != Value::Kind::kBool) {
        return key.is_string() ? get_attr(obj, key.as_string()) : Value();
      }
      int64_t n = static_cast<int64_t>(obj.as_list().size());
      int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      return i >= 0 && i < n ? obj.as_list()[static_cast<size_t>(i)] : Value();
    }
    case Value::Kind::kString: {
      if (key.kind() != Value::Kind::kInt) return key.is_string() ? get_attr(obj, key.as_string()) : Value();
      std::u32string cps = text::decode(obj.as_string());
      int64_t n = static_cast<int64_t>(cps.size());
      int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      if (i < 0 || i >= n) return Value();
      return Value::string(text::encode(std::u32string(1, cps[static_cast<size_t>(i)])));
    }
    default: return key.is_string() ? get_attr(obj, key.as_string()) : Value();
  }
}

Value call_value(const Value& fn, const CallArgs& args) {
  if (fn.kind() != Value::Kind::kCallable) {
    if (fn.is_undefined()) fail("called an undefined value (no such function or method)");
    fail("'" + type_name(fn) + "' object is not callable");
  }
  Result<Value> r = fn.function()(args);
  if (!r) fail(r.status().message());
  return std::move(r).value();
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.as_list();
    case Value::Kind::kDict: {
      if (v.is_namespace()) fail("'Namespace' object is not iterable");
      List keys;
      for (const auto& [k, x] : v.as_dict().entries()) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t cp : text::decode(v.as_string())) chars.push_back(Value::string(text::encode(std::u32string(1, cp))));
      return chars;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kDict:
      if (container.is_namespace()) fail("argument of type 'Namespace' is not iterable");
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) if (v.equals(item)) return true;
      return false;
    case Value::Kind::kUndefined: return false;
    default: fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].equals(y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

void add_builtin_globals(Dict& g) {
  g.set("raise_exception", Value::callable("raise_exception", [](const CallArgs& a) -> Result<Value> {
          std::string msg = a.positional.empty() ? "" : a.positional[0].str();
          return invalid_argument("raise_exception: " + msg);
        }));
  g.set("namespace", Value::callable("namespace", [](const CallArgs& a) -> Result<Value> {
          Dict d;
          for (const Value& p : a.positional) {
            if (!p.is_dict()) return invalid_argument("namespace() positional argument must be a dict");
            for (const auto& [k, v] : p.as_dict().entries()) d.set(k, v);
          }
          for (const auto& [k, v] : a.keyword) d.set(k, v);
          return Value::ns(std::move(d));
        }));
  g.set("dict", Value::callable("dict", [](const CallArgs& a) -> Result<Value> {
          Dict d;
          for (const Value& p : a.positional) {
            if (!p.is_dict()) return invalid_argument("dict() positional argument must be a dict");
            for (const auto& [k, v] : p.as_dict().entries()) d.set(k, v);
          }
          for (const auto& [k, v] : a.keyword) d.set(k, v);
          return Value::dict(std::move(d));
        }));
  g.set("range", Value::callable("range", [](const CallArgs& a) -> Result<Value> {
          int64_t start = 0, stop = 0, step = 1;
          auto num = [](const Value& v) { return need_int(v, "range() argument"); };
          if (a.positional.size() == 1) {
            stop = num(a.positional[0]);
          } else if (a.positional.size() >= 2) {
            start = num(a.positional[0]);
            stop = num(a.positional[1]);
            if (a.positional.size() > 2) step = num(a.positional[2]);
          }
          if (step == 0) return invalid_argument("range() arg 3 must not be zero");
          List out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.size() > 1000000) return invalid_argument("range() too large for a template");
            out.push_back(Value::integer(i));
          }
          return Value::list(std::move(out));
        }));
  g.set("strftime_now", Value::callable("strftime_now", [](const CallArgs& a) -> Result<Value> {
          if (a.positional.empty() || !a.positional[0].is_string()) return invalid_argument("strftime_now needs a format");
          std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);  // transformers uses datetime.now(): local time
          char buf[256];
          size_t n = std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &tm);
          return Value::string(std::string(buf, n));
        }));
}

}  // namespace ft::protocol::jinja

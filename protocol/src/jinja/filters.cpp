// Jinja2's builtin filters and tests that chat templates use, with Jinja2 3.1 semantics, plus HF's
// replacement `tojson` (json.dumps with ensure_ascii=False; no HTML escaping, no key sorting).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "jinja/runtime.h"
#include "jinja/text.h"

namespace ft::protocol::jinja {
namespace {

using Filter = std::function<Value(const Value&, const CallArgs&)>;
using Test = std::function<bool(const Value&, const CallArgs&)>;

// Arguments after the first `skip` positionals, for filters/tests that forward the rest.
CallArgs rest_args(const CallArgs& a, size_t skip) {
  CallArgs r;
  for (size_t i = skip; i < a.positional.size(); ++i) r.positional.push_back(a.positional[i]);
  r.keyword = a.keyword;
  return r;
}

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(text::length(v.as_string()));
    case Value::Kind::kList: return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict:
      if (!v.is_namespace()) return static_cast<int64_t>(v.as_dict().size());
      [[fallthrough]];
    default: fail("object of type '" + type_name(v) + "' has no len()");
  }
}

// Jinja2's make_attrgetter: "a.b" walks items (environment.getitem) part by part; digits index.
Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur, digits ? Value::integer(std::atoll(part.c_str())) : Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// Sort key for sort/unique/dictsort: strings compare case-insensitively unless asked otherwise.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(text::ascii_lower(v.as_string()));
  return v;
}

Value to_int(const Value& v, const Value& fallback) {
  switch (v.kind()) {
    case Value::Kind::kBool:
    case Value::Kind::kInt: return Value::integer(v.as_int());
    case Value::Kind::kFloat: return std::isfinite(v.as_double()) ? Value::integer(static_cast<int64_t>(v.as_double())) : fallback;
    case Value::Kind::kString: {
      std::string s = text::strip(v.as_string(), nullptr, true, true);
      char* end = nullptr;
      long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end == s.c_str() + s.size()) return Value::integer(i);
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
      return fallback;
    }
    default: return fallback;
  }
}

Value to_float(const Value& v, const Value& fallback) {
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    std::string s = text::strip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value::number(d);
  }
  return fallback;
}

Value do_tojson(const Value& v, const CallArgs& a) {
  Value indent = arg_or(a, 0, "indent", Value::none());
  bool ensure_ascii = arg_or(a, 1, "ensure_ascii", Value::boolean(false)).truthy();
  Value separators = arg_or(a, 2, "separators", Value::none());
  bool sort_keys = arg_or(a, 3, "sort_keys", Value::boolean(false)).truthy();
  int ind = indent.is_none() ? -1 : static_cast<int>(to_int(indent, Value::integer(0)).as_int());
  std::string item_sep, key_sep;
  bool custom = separators.is_list() && separators.as_list().size() == 2;
  if (custom) {
    item_sep = separators.as_list()[0].str();
    key_sep = separators.as_list()[1].str();
  }
  Result<std::string> r = to_json_with(v, ensure_ascii, ind, sort_keys, custom ? &item_sep : nullptr,
                                       custom ? &key_sep : nullptr);
  if (!r) fail(r.status().message());
  return Value::string(std::move(r).value());
}

Value do_indent(const Value& v, const CallArgs& a) {
  Value width = arg_or(a, 0, "width", Value::integer(4));
  bool first = arg_or(a, 1, "first", Value::boolean(false)).truthy();
  bool blank = arg_or(a, 2, "blank", Value::boolean(false)).truthy();
  std::string ind = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, to_int(width, Value::integer(4)).as_int())), ' ');
  std::string s = v.str() + "\n";  // Jinja2 appends a newline so splitlines keeps a trailing empty line
  std::vector<std::string> lines = text::split_lines(s);
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 0) {
      rv = lines[0];
      continue;
    }
    rv += "\n";
    if (blank || !lines[i].empty()) rv += ind;
    rv += lines[i];
  }
  if (first) rv = ind + rv;
  return Value::string(rv);
}

Value select_like(const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  size_t skip = by_attr ? 1 : 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty() || !a.positional[0].is_string()) fail("selectattr/rejectattr need an attribute name");
    attr = a.positional[0].as_string();
  }
  std::string test;
  CallArgs targs;
  if (a.positional.size() > skip) {
    test = a.positional[skip].str();
    targs = rest_args(a, skip + 1);
  }
  List out;
  for (const Value& item : iterate(v)) {
    Value x = by_attr ? attr_path(item, attr) : item;
    bool ok = test.empty() ? x.truthy() : apply_test(test, x, targs);
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value do_map(const Value& v, const CallArgs& a) {
  List out;
  const Value* attribute = nullptr;
  for (const auto& [k, x] : a.keyword) if (k == "attribute") attribute = &x;
  if (attribute) {
    Value fallback = arg_or(CallArgs{{}, a.keyword}, 99, "default", Value());
    for (const Value& item : iterate(v)) {
      Value x = attr_path(item, attribute->str());
      out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) fail("map needs a filter name or attribute=");
  std::string filter = a.positional[0].str();
  CallArgs fargs = rest_args(a, 1);
  for (const Value& item : iterate(v)) out.push_back(apply_filter(filter, item, fargs));
  return Value::list(std::move(out));
}

Value do_sort(const Value& v, const CallArgs& a) {
  bool reverse = arg_or(a, 0, "reverse", Value::boolean(false)).truthy();
  bool cs = arg_or(a, 1, "case_sensitive", Value::boolean(false)).truthy();
  Value attribute = arg_or(a, 2, "attribute", Value());
  List items = iterate(v);
  auto key = [&](const Value& x) { return sort_key(attribute.is_undefined() ? x : attr_path(x, attribute.str()), cs); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? less_than(key(y), key(x)) : less_than(key(x), key(y));
  });
  return Value::list(std::move(items));
}

Value do_unique(const Value& v, const CallArgs& a) {
  bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  Value attribute = arg_or(a, 1, "attribute", Value());
  List out, seen;
  for (const Value& x : iterate(v)) {
    Value k = sort_key(attribute.is_undefined() ? x : attr_path(x, attribute.str()), cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(k); })) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value do_dictsort(const Value& v, const CallArgs& a) {
  if (!v.is_dict()) fail("dictsort needs a mapping");
  bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  bool by_value = arg_or(a, 1, "by", Value::string("key")).str() == "value";
  bool reverse = arg_or(a, 2, "reverse", Value::boolean(false)).truthy();
  List items;
  for (const auto& [k, x] : v.as_dict().entries()) items.push_back(Value::list({Value::string(k), x}));
  std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
    const Value& x = p.as_list()[by_value ? 1 : 0];
    const Value& y = q.as_list()[by_value ? 1 : 0];
    return reverse ? less_than(sort_key(y, cs), sort_key(x, cs)) : less_than(sort_key(x, cs), sort_key(y, cs));
  });
  return Value::list(std::move(items));
}

Value min_max(const Value& v, const CallArgs& a, bool want_max) {
  bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  Value attribute = arg_or(a, 1, "attribute", Value());
  List items = iterate(v);
  if (items.empty()) return Value();
  size_t best = 0;
  auto key = [&](const Value& x) { return sort_key(attribute.is_undefined() ? x : attr_path(x, attribute.str()), cs); };
  for (size_t i = 1; i < items.size(); ++i) {
    bool better = want_max ? less_than(key(items[best]), key(items[i])) : less_than(key(items[i]), key(items[best]));
    if (better) best = i;
  }
  return items[best];
}

Value add_values(const Value& x, const Value& y) {
  if (x.is_number() && y.is_number()) {
    if (x.kind() == Value::Kind::kFloat || y.kind() == Value::Kind::kFloat) return Value::number(x.as_double() + y.as_double());
    return Value::integer(x.as_int() + y.as_int());
  }
  fail("unsupported operand types for sum: '" + type_name(x) + "' and '" + type_name(y) + "'");
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> kFilters = [] {
    std::map<std::string, Filter> f;
    f["length"] = [](const Value& v, const CallArgs&) { return Value::integer(length_of(v)); };
    f["count"] = f["length"];
    f["string"] = [](const Value& v, const CallArgs&) { return Value::string(v.str()); };
    f["safe"] = [](const Value& v, const CallArgs&) { return v; };  // autoescape is off: a no-op
    f["escape"] = [](const Value& v, const CallArgs&) { return Value::string(html_escape(v.str())); };
    f["e"] = f["escape"];
    f["trim"] = [](const Value& v, const CallArgs& a) {
      Value chars = arg_or(a, 0, "chars", Value::none());
      std::string c = chars.is_none() || chars.is_undefined() ? "" : chars.str();
      return Value::string(text::strip(v.str(), chars.is_none() || chars.is_undefined() ? nullptr : &c, true, true));
    };
    f["upper"] = [](const Value& v, const CallArgs&) { return Value::string(text::ascii_upper(v.str())); };
    f["lower"] = [](const Value& v, const CallArgs&) { return Value::string(text::ascii_lower(v.str())); };
    f["capitalize"] = [](const Value& v, const CallArgs&) {
      return call_value(get_attr(Value::string(v.str()), "capitalize"), {});
    };
    f["title"] = [](const Value& v, const CallArgs&) { return call_value(get_attr(Value::string(v.str()), "title"), {}); };
    f["replace"] = [](const Value& v, const CallArgs& a) {
      if (a.positional.size() < 2) fail("replace needs two arguments");
      int64_t count = arg_or(a, 2, "count", Value::integer(-1)).is_none() ? -1 : arg_or(a, 2, "count", Value::integer(-1)).as_int();
      return Value::string(text::replace(v.str(), a.positional[0].str(), a.positional[1].str(), count));
    };
    f["tojson"] = do_tojson;
    f["int"] = [](const Value& v, const CallArgs& a) { return to_int(v, arg_or(a, 0, "default", Value::integer(0))); };
    f["float"] = [](const Value& v, const CallArgs& a) { return to_float(v, arg_or(a, 0, "default", Value::number(0))); };
    f["abs"] = [](const Value& v, const CallArgs&) {
      if (v.kind() == Value::Kind::kFloat) return Value::number(std::fabs(v.as_double()));
      if (v.is_number()) return Value::integer(std::llabs(v.as_int()));
      fail("bad operand type for abs(): '" + type_name(v) + "'");
    };
    f["round"] = [](const Value& v, const CallArgs& a) {
      int64_t precision = arg_or(a, 0, "precision", Value::integer(0)).as_int();
      std::string method = arg_or(a, 1, "method", Value::string("common")).str();
      double p = std::pow(10.0, static_cast<double>(precision)), x = v.as_double() * p;
      double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
      return Value::number(r / p);
    };
    f["list"] = [](const Value& v, const CallArgs&) { return Value::list(iterate(v)); };
    f["first"] = [](const Value& v, const CallArgs&) {
      List items = iterate(v);
      return items.empty() ? Value() : items.front();
    };
    f["last"] = [](const Value& v, const CallArgs&) {
      List items = iterate(v);
      return items.empty() ? Value() : items.back();
    };
    f["join"] = [](const Value& v, const CallArgs& a) {
      std::string sep = arg_or(a, 0, "d", Value::string("")).str();
      Value attribute = arg_or(a, 1, "attribute", Value());
      std::string out;
      bool first = true;
      for (const Value& x : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += (attribute.is_undefined() ? x : attr_path(x, attribute.str())).str();
      }
      return Value::string(out);
    };
    f["default"] = [](const Value& v, const CallArgs& a) {
      Value fallback = arg_or(a, 0, "default_value", Value::string(""));
      bool boolean = arg_or(a, 1, "boolean", Value::boolean(false)).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return fallback;
      return v;
    };
    f["d"] = f["default"];
    f["items"] = [](const Value& v, const CallArgs&) {
      if (v.is_undefined()) return Value::list({});
      if (!v.is_dict() || v.is_namespace()) fail("Can only get item pairs from a mapping.");
      return call_value(get_attr(v, "items"), {});
    };
    f["dictsort"] = do_dictsort;
    f["selectattr"] = [](const Value& v, const CallArgs& a) { return select_like(v, a, true, true); };
    f["rejectattr"] = [](const Value& v, const CallArgs& a) { return select_like(v, a, true, false); };
    f["select"] = [](const Value& v, const CallArgs& a) { return select_like(v, a, false, true); };
    f["reject"] = [](const Value& v, const CallArgs& a) { return select_like(v, a, false, false); };
    f["map"] = do_map;
    f["attr"] = [](const Value& v, const CallArgs& a) {
      if (a.positional.empty()) fail("attr needs a name");
      return get_attr(v, a.positional[0].str());
    };
    f["reverse"] = [](const Value& v, const CallArgs&) {
      if (v.is_string()) {
        std::u32string cps = text::decode(v.as_string());
        std::reverse(cps.begin(), cps.end());
        return Value::string(text::encode(cps));
      }
      List items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    f["sort"] = do_sort;
    f["unique"] = do_unique;
    f["min"] = [](const Value& v, const CallArgs& a) { return min_max(v, a, false); };
    f["max"] = [](const Value& v, const CallArgs& a) { return min_max(v, a, true); };
    f["sum"] = [](const Value& v, const CallArgs& a) {
      Value attribute = arg_or(a, 0, "attribute", Value());
      Value total = arg_or(a, 1, "start", Value::integer(0));
      for (const Value& x : iterate(v)) total = add_values(total, attribute.is_undefined() ? x : attr_path(x, attribute.str()));
      return total;
    };
    f["indent"] = do_indent;
    f["wordcount"] = [](const Value& v, const CallArgs&) {
      return Value::integer(static_cast<int64_t>(text::split(v.str(), nullptr, -1, false).size()));
    };
    return f;
  }();
  return kFilters;
}

bool is_int_kind(const Value& v) { return v.kind() == Value::Kind::kInt; }

const std::map<std::string, Test>& tests() {
  static const std::map<std::string, Test> kTests = [] {
    std::map<std::string, Test> t;
    auto arg0 = [](const CallArgs& a) -> const Value& {
      if (a.positional.empty()) fail("test needs an argument");
      return a.positional[0];
    };
    t["defined"] = [](const Value& v, const CallArgs&) { return !v.is_undefined(); };
    t["undefined"] = [](const Value& v, const CallArgs&) { return v.is_undefined(); };
    t["none"] = [](const Value& v, const CallArgs&) { return v.is_none(); };
    t["boolean"] = [](const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kBool; };
    t["true"] = [](const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kBool && v.as_bool(); };
    t["false"] = [](const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kBool && !v.as_bool(); };
    t["integer"] = [](const Value& v, const CallArgs&) { return is_int_kind(v); };
    t["float"] = [](const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kFloat; };
    t["number"] = [](const Value& v, const CallArgs&) { return v.is_number(); };  // bool is a Number in Python
    t["string"] = [](const Value& v, const CallArgs&) { return v.is_string(); };
    t["mapping"] = [](const Value& v, const CallArgs&) { return v.is_dict() && !v.is_namespace(); };
    // Jinja2's Undefined is iterable (empty) and a sequence (len 0), so both tests accept it.
    t["iterable"] = [](const Value& v, const CallArgs&) {
      return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
    };
    t["sequence"] = t["iterable"];
    t["callable"] = [](const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kCallable; };
    t["odd"] = [](const Value& v, const CallArgs&) { return v.is_number() && (v.as_int() % 2) != 0; };
    t["even"] = [](const Value& v, const CallArgs&) { return v.is_number() && (v.as_int() % 2) == 0; };
    t["divisibleby"] = [arg0](const Value& v, const CallArgs& a) {
      int64_t n = arg0(a).as_int();
      if (n == 0) fail("integer division or modulo by zero");
      return v.as_int() % n == 0;
    };
    t["equalto"] = [arg0](const Value& v, const CallArgs& a) { return v.equals(arg0(a)); };
    t["eq"] = t["equalto"];
    t["=="] = t["equalto"];
    t["ne"] = [arg0](const Value& v, const CallArgs& a) { return !v.equals(arg0(a)); };
    t["!="] = t["ne"];
    t["lt"] = [arg0](const Value& v, const CallArgs& a) { return less_than(v, arg0(a)); };
    t["<"] = t["lt"];
    t["gt"] = [arg0](const Value& v, const CallArgs& a) { return less_than(arg0(a), v); };
    t[">"] = t["gt"];
    t["le"] = [arg0](const Value& v, const CallArgs& a) { return !less_than(arg0(a), v); };
    t["<="] = t["le"];
    t["ge"] = [arg0](const Value& v, const CallArgs& a) { return !less_than(v, arg0(a)); };
    t[">="] = t["ge"];
    t["in"] = [arg0](const Value& v, const CallArgs& a) { return contains(arg0(a), v); };
    t["sameas"] = [arg0](const Value& v, const CallArgs& a) {
      const Value& o = arg0(a);
      if (v.kind() != o.kind()) return false;
      if (v.is_dict() || v.is_list() || v.kind() == Value::Kind::kCallable) return v.equals(o) && v.is_namespace() == o.is_namespace();
      return v.equals(o);  // None/True/False/small values: identity and equality agree
    };
    t["lower"] = [](const Value& v, const CallArgs&) {
      std::string s = v.str();
      return text::ascii_lower(s) == s && text::ascii_upper(s) != s;
    };
    t["upper"] = [](const Value& v, const CallArgs&) {
      std::string s = v.str();
      return text::ascii_upper(s) == s && text::ascii_lower(s) != s;
    };
    t["escaped"] = [](const Value&, const CallArgs&) { return false; };
    t["filter"] = [](const Value& v, const CallArgs&) { return v.is_string() && has_filter(v.as_string()); };
    t["test"] = [](const Value& v, const CallArgs&) { return v.is_string() && has_test(v.as_string()); };
    return t;
  }();
  return kTests;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }
bool has_test(const std::string& name) { return tests().count(name) > 0; }

Value apply_filter(const std::string& name, const Value& in, const CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("unknown filter '" + name + "'");
  return it->second(in, args);
}

bool apply_test(const std::string& name, const Value& in, const CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) fail("unknown test '" + name + "'");
  return it->second(in, args);
}

}  // namespace ft::protocol::jinja

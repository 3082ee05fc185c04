// Value construction and the Python behaviours every other part relies on: truthiness, str(),
// repr() and ==.
#include <cmath>

#include "ft/protocol/jinja.h"
#include "jinja/text.h"

namespace ft::protocol::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) if (k == key) return &v;
  return nullptr;
}

Value* Dict::find(std::string_view key) {
  for (auto& [k, v] : entries_) if (k == key) return &v;
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  v.i_ = b ? 1 : 0;  // Python: True == 1 and True + 1 == 2
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::ns(Dict d) {
  Value v = dict(std::move(d));
  v.namespace_ = true;
  return v;
}

Value Value::callable(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<const NativeFunction>(std::move(fn));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_->empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return namespace_ || dict_->size() > 0;  // a Namespace object is always true
    case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return text::float_repr(f_);
    case Kind::kString: return text::string_repr(*s_);
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      return out + "]";
    }
    case Kind::kDict: {
      if (namespace_) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries()) {
        if (!first) out += ", ";
        first = false;
        out += text::string_repr(k) + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::kCallable: return "<function " + *s_ + ">";
  }
  return "";
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return as_double() == o.as_double();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return *s_ == *o.s_;
    case Kind::kList: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) if (!(*list_)[i].equals((*o.list_)[i])) return false;
      return true;
    }
    case Kind::kDict: {
      if (namespace_ || o.namespace_) return dict_ == o.dict_;  // identity, like Python objects
      if (dict_->size() != o.dict_->size()) return false;
      for (const auto& [k, v] : dict_->entries()) {
        const Value* w = o.dict_->find(k);
        if (!w || !v.equals(*w)) return false;
      }
      return true;
    }
    case Kind::kCallable: return fn_ == o.fn_;
    default: return false;
  }
}

}  // namespace ft::protocol::jinja

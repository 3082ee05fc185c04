// The tree walker: Jinja2's scoping (a for-loop iteration and a macro call open a scope, `if` does
// not; macros see their defining scope at call time), Python operator semantics, and the Template
// entry points that turn internal errors into Status values.
#include <cmath>
#include <unordered_map>

#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/text.h"

namespace ft::protocol::jinja {

struct Template::Impl {
  Body body;
};

namespace {

constexpr int kMaxCallDepth = 200;  // macro recursion beyond this is a template bug, not a crash

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Signal { kNone, kBreak, kContinue };

std::string where(Pos p) {
  return "line " + std::to_string(p.line) + ", column " + std::to_string(p.column);
}

bool is_intlike(const Value& v) { return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool; }

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) fail("unsupported operand: a value is undefined (operator '" + op + "')");
  if (a.is_number() && b.is_number()) {
    bool ints = is_intlike(a) && is_intlike(b);
    if (op == "+") return ints ? Value::integer(a.as_int() + b.as_int()) : Value::number(a.as_double() + b.as_double());
    if (op == "-") return ints ? Value::integer(a.as_int() - b.as_int()) : Value::number(a.as_double() - b.as_double());
    if (op == "*") return ints ? Value::integer(a.as_int() * b.as_int()) : Value::number(a.as_double() * b.as_double());
    if (op == "/") {
      if (b.as_double() == 0) fail("division by zero");
      return Value::number(a.as_double() / b.as_double());
    }
    if (op == "//" || op == "%") {
      if (b.as_double() == 0) fail("integer division or modulo by zero");
      if (ints) {  // Python floors toward negative infinity; the remainder takes the divisor's sign
        int64_t x = a.as_int(), y = b.as_int(), q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
          --q;
          r += y;
        }
        return op == "//" ? Value::integer(q) : Value::integer(r);
      }
      double x = a.as_double(), y = b.as_double(), q = std::floor(x / y);
      return op == "//" ? Value::number(q) : Value::number(x - q * y);
    }
    if (op == "**") {
      if (ints && b.as_int() >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
        return Value::integer(r);
      }
      return Value::number(std::pow(a.as_double(), b.as_double()));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && is_intlike(b)) {
    if (a.is_string()) {
      std::string out;
      for (int64_t i = 0; i < b.as_int(); ++i) out += a.as_string();
      return Value::string(out);
    }
    List out;
    for (int64_t i = 0; i < b.as_int(); ++i) out.insert(out.end(), a.as_list().begin(), a.as_list().end());
    return Value::list(std::move(out));
  }
  if (op == "*" && is_intlike(a) && (b.is_string() || b.is_list())) return arithmetic(op, b, a);
  if (op == "%" && a.is_string()) fail("printf-style string formatting ('%') is not supported");
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Python slicing for lists and strings (strings by code point).
Value slice(const Value& obj, const Value& lo, const Value& hi, const Value& st) {
  auto opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!is_intlike(v)) fail(std::string("slice ") + what + " must be an integer");
    return v.as_int();
  };
  int64_t step = opt(st, "step").value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto pick = [&](int64_t n, auto&& emit) {
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t b = clamp(opt(lo, "start"), step > 0 ? 0 : n - 1);
    int64_t e = clamp(opt(hi, "stop"), step > 0 ? n : -1);
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) emit(static_cast<size_t>(i));
  };
  if (obj.is_list()) {
    List out;
    const List& items = obj.as_list();
    pick(static_cast<int64_t>(items.size()), [&](size_t i) { out.push_back(items[i]); });
    return Value::list(std::move(out));
  }
  if (obj.is_string()) {
    std::u32string cps = text::decode(obj.as_string()), out;
    pick(static_cast<int64_t>(cps.size()), [&](size_t i) { out.push_back(cps[i]); });
    return Value::string(text::encode(out));
  }
  if (obj.is_undefined()) fail("cannot slice an undefined value");
  fail("'" + type_name(obj) + "' object is not subscriptable");
}

class Evaluator {
 public:
  explicit Evaluator(Dict globals) : globals_(std::move(globals)) {}

  Signal exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      Signal sig = exec_one(*s, scope, out);
      if (sig != Signal::kNone) return sig;
    }
    return Signal::kNone;
  }

 private:
  Signal exec_one(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText: out += s.text; return Signal::kNone;
      case Stmt::Kind::kOutput: out += eval(*s.expr, scope).str(); return Signal::kNone;
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.conds.size(); ++i) {
          if (eval(*s.conds[i], scope).truthy()) return exec(s.bodies[i], scope, out);
        }
        return exec(s.else_body, scope, out);
      case Stmt::Kind::kFor: exec_for(s, scope, out); return Signal::kNone;
      case Stmt::Kind::kSet: exec_set(s, scope); return Signal::kNone;
      case Stmt::Kind::kMacro: scope->vars[s.text] = make_macro(s, scope); return Signal::kNone;
      case Stmt::Kind::kBreak: return Signal::kBreak;
      case Stmt::Kind::kContinue: return Signal::kContinue;
      case Stmt::Kind::kScope: return exec(s.bodies[0], scope, out);
      case Stmt::Kind::kFilterBlock: {
        std::string inner;
        exec(s.bodies[0], std::make_shared<Scope>(Scope{{}, scope}), inner);
        out += with_pos(s.pos, [&] { return apply_filter(s.expr->name, Value::string(inner), eval_args(*s.expr, scope)); }).str();
        return Signal::kNone;
      }
    }
    return Signal::kNone;
  }

  template <typename F>
  Value with_pos(Pos p, F&& f) {
    try {
      return f();
    } catch (RenderError& e) {
      if (!e.positioned) {
        e.message = "template error at " + where(p) + ": " + e.message;
        e.positioned = true;
      }
      throw;
    }
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return;
    }
    List items = iterate(v);
    if (items.size() != targets.size()) {
      fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    List items = with_pos(s.pos, [&] { return Value::list(iterate(eval(*s.expr, scope))); }).as_list();
    if (s.filter) {  // `for x in xs if cond`: filtered before loop.index and loop.length exist
      List kept;
      for (const Value& item : items) {
        auto fs = std::make_shared<Scope>(Scope{{}, scope});
        with_pos(s.pos, [&] { bind_targets(s.targets, item, *fs); return Value(); });
        if (eval(*s.filter, fs).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      auto it = std::make_shared<Scope>(Scope{{}, scope});
      with_pos(s.pos, [&] { bind_targets(s.targets, items[static_cast<size_t>(i)], *it); return Value(); });
      Dict loop;
      loop.set("index", Value::integer(i + 1));
      loop.set("index0", Value::integer(i));
      loop.set("revindex", Value::integer(n - i));
      loop.set("revindex0", Value::integer(n - i - 1));
      loop.set("first", Value::boolean(i == 0));
      loop.set("last", Value::boolean(i == n - 1));
      loop.set("length", Value::integer(n));
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      if (i > 0) loop.set("previtem", items[static_cast<size_t>(i - 1)]);
      if (i + 1 < n) loop.set("nextitem", items[static_cast<size_t>(i + 1)]);
      loop.set("cycle", Value::callable("loop.cycle", [i](const CallArgs& a) -> Result<Value> {
                 if (a.positional.empty()) return invalid_argument("no items for cycling given");
                 return a.positional[static_cast<size_t>(i) % a.positional.size()];
               }));
      it->vars["loop"] = Value::dict(std::move(loop));
      if (exec(s.bodies[0], it, out) == Signal::kBreak) break;
    }
    if (n == 0) exec(s.else_body, std::make_shared<Scope>(Scope{{}, scope}), out);
  }

  void exec_set(const Stmt& s, const ScopePtr& scope) {
    Value v;
    if (s.expr) {
      v = eval(*s.expr, scope);
    } else {
      std::string body;
      exec(s.bodies[0], scope, body);
      v = Value::string(std::move(body));
    }
    with_pos(s.pos, [&] {
      if (!s.attr_target) {
        bind_targets(s.targets, v, *scope);
        return Value();
      }
      Value target = lookup(s.targets[0], scope);
      if (!target.is_namespace()) fail("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
      target.mutable_dict().set(s.targets[1], v);
      return Value();
    });
  }

  Value make_macro(const Stmt& s, const ScopePtr& defining) {
    const Stmt* macro = &s;
    return Value::callable(s.text, [this, macro, defining](const CallArgs& a) -> Result<Value> {
      if (depth_ >= kMaxCallDepth) return invalid_argument("macro recursion too deep in '" + macro->text + "'");
      auto local = std::make_shared<Scope>(Scope{{}, defining});
      size_t np = macro->params.size();
      List varargs;
      for (size_t i = 0; i < a.positional.size(); ++i) {
        if (i < np) local->vars[macro->params[i].first] = a.positional[i];
        else varargs.push_back(a.positional[i]);
      }
      Dict kwargs;
      for (const auto& [k, v] : a.keyword) {
        bool is_param = false;
        for (const auto& p : macro->params) is_param |= p.first == k;
        if (is_param) local->vars[k] = v;
        else kwargs.set(k, v);
      }
      for (const auto& [name, def] : macro->params) {
        if (local->vars.count(name)) continue;
        local->vars[name] = def ? eval(*def, local) : Value();
      }
      local->vars["varargs"] = Value::list(std::move(varargs));
      local->vars["kwargs"] = Value::dict(std::move(kwargs));
      std::string out;
      ++depth_;
      try {
        exec(macro->bodies[0], local, out);
      } catch (...) {
        --depth_;
        throw;
      }
      --depth_;
      return Value::string(std::move(out));
    });
  }

  Value lookup(const std::string& name, const ScopePtr& scope) const {
    for (const Scope* s = scope.get(); s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return it->second;
    }
    if (const Value* g = globals_.find(name)) return *g;
    return Value();
  }

  CallArgs eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs a;
    for (const ExprPtr& x : e.args) a.positional.push_back(eval(*x, scope));
    for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, eval(*x, scope));
    return a;
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    return with_pos(e.pos, [&] { return eval_inner(e, scope); });
  }

  Value eval_inner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::kConst: return e.value;
      case Expr::Kind::kName: return lookup(e.name, scope);
      case Expr::Kind::kGetAttr: return get_attr(eval(*e.kids[0], scope), e.name);
      case Expr::Kind::kGetItem: {
        Value obj = eval(*e.kids[0], scope);
        return get_item(obj, eval(*e.kids[1], scope));
      }
      case Expr::Kind::kSlice: {
        Value obj = eval(*e.kids[0], scope);
        auto part = [&](int i) { return e.kids[i] ? eval(*e.kids[i], scope) : Value(); };
        return slice(obj, part(1), part(2), part(3));
      }
      case Expr::Kind::kCall: {
        Value fn = eval(*e.kids[0], scope);
        return call_value(fn, eval_args(e, scope));
      }
      case Expr::Kind::kFilter: {
        Value in = eval(*e.kids[0], scope);
        return apply_filter(e.name, in, eval_args(e, scope));
      }
      case Expr::Kind::kTest: {
        Value in = eval(*e.kids[0], scope);
        return Value::boolean(apply_test(e.name, in, eval_args(e, scope)) != e.negated);
      }
      case Expr::Kind::kUnary: {
        Value v = eval(*e.kids[0], scope);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (!v.is_number()) fail("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
        if (e.name == "+") return v.kind() == Value::Kind::kBool ? Value::integer(v.as_int()) : v;
        return v.kind() == Value::Kind::kFloat ? Value::number(-v.as_double()) : Value::integer(-v.as_int());
      }
      case Expr::Kind::kBinary: {
        Value a = eval(*e.kids[0], scope);
        if (e.name == "and") return a.truthy() ? eval(*e.kids[1], scope) : a;
        if (e.name == "or") return a.truthy() ? a : eval(*e.kids[1], scope);
        Value b = eval(*e.kids[1], scope);
        if (e.name == "~") return Value::string(a.str() + b.str());
        return arithmetic(e.name, a, b);
      }
      case Expr::Kind::kCompare: {
        Value left = eval(*e.kids[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.kids[i + 1], scope);
          const std::string& op = e.ops[i];
          bool ok;
          if (op == "==") ok = left.equals(right);
          else if (op == "!=") ok = !left.equals(right);
          else if (op == "<") ok = less_than(left, right);
          else if (op == ">") ok = less_than(right, left);
          else if (op == "<=") ok = !less_than(right, left);
          else if (op == ">=") ok = !less_than(left, right);
          else if (op == "in") ok = contains(right, left);
          else ok = !contains(right, left);
          if (!ok) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case Expr::Kind::kCond:
        if (eval(*e.kids[1], scope).truthy()) return eval(*e.kids[0], scope);
        return e.kids[2] ? eval(*e.kids[2], scope) : Value();
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const ExprPtr& k : e.kids) items.push_back(eval(*k, scope));
        return Value::list(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
          Value k = eval(*e.kids[i], scope);
          d.set(k.str(), eval(*e.kids[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
    }
    return Value();
  }

  Dict globals_;
  int depth_ = 0;
};

// Jinja2 rejects unknown filters and tests when it compiles the template, before rendering
// anything; so do we, so a template that fails under transformers fails here too.
Status check_names(const Expr* e);
Status check_names(const Body& body) {
  for (const StmtPtr& s : body) {
    for (const Expr* e : {s->expr.get(), s->filter.get()}) FT_RETURN_IF_ERROR(check_names(e));
    if (s->kind == Stmt::Kind::kFilterBlock && !has_filter(s->expr->name)) {
      return invalid_argument("template syntax error at " + where(s->pos) + ": no filter named '" + s->expr->name + "'");
    }
    for (const ExprPtr& c : s->conds) FT_RETURN_IF_ERROR(check_names(c.get()));
    for (const auto& p : s->params) FT_RETURN_IF_ERROR(check_names(p.second.get()));
    for (const Body& b : s->bodies) FT_RETURN_IF_ERROR(check_names(b));
    FT_RETURN_IF_ERROR(check_names(s->else_body));
  }
  return {};
}

Status check_names(const Expr* e) {
  if (!e) return {};
  if (e->kind == Expr::Kind::kFilter && !has_filter(e->name)) {
    return invalid_argument("template syntax error at " + where(e->pos) + ": no filter named '" + e->name + "'");
  }
  if (e->kind == Expr::Kind::kTest && !has_test(e->name)) {
    return invalid_argument("template syntax error at " + where(e->pos) + ": no test named '" + e->name + "'");
  }
  for (const ExprPtr& k : e->kids) FT_RETURN_IF_ERROR(check_names(k.get()));
  for (const ExprPtr& k : e->args) FT_RETURN_IF_ERROR(check_names(k.get()));
  for (const auto& k : e->kwargs) FT_RETURN_IF_ERROR(check_names(k.second.get()));
  return {};
}

}  // namespace

Result<Template> Template::parse(std::string_view source) {
  FT_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  FT_ASSIGN_OR_RETURN(Body body, parse_tokens(std::move(tokens)));
  FT_RETURN_IF_ERROR(check_names(body));
  auto impl = std::make_shared<Impl>();
  impl->body = std::move(body);
  Template t;
  t.impl_ = std::move(impl);
  return t;
}

Result<std::string> Template::render(const Value& context) const {
  if (!impl_) return invalid_argument("rendering an empty Template");
  if (!context.is_dict() && !context.is_undefined()) return invalid_argument("template context must be a dict");
  Dict globals;
  add_builtin_globals(globals);
  if (context.is_dict()) {
    for (const auto& [k, v] : context.as_dict().entries()) globals.set(k, v);
  }
  try {
    Evaluator ev(std::move(globals));
    std::string out;
    ev.exec(impl_->body, std::make_shared<Scope>(), out);
    return out;
  } catch (const RenderError& e) {
    return invalid_argument(e.message);
  } catch (const std::exception& e) {
    return internal_error(std::string("template rendering failed: ") + e.what());
  }
}

}  // namespace ft::protocol::jinja

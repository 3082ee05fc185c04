// The parsed template: expression and statement trees. One node struct per tree (kind + children)
// keeps the parser and evaluator small; every node carries its source position for error messages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ft/protocol/jinja.h"

namespace ft::protocol::jinja {

struct Pos {
  int line = 1;
  int column = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kConst,      // value
    kName,       // name
    kGetAttr,    // a.name               kids[0]
    kGetItem,    // a[b]                 kids[0], kids[1]
    kSlice,      // a[b:c:d]             kids[0..3], absent bounds are null
    kCall,       // f(args, k=v)         kids[0] callee, args, kwargs
    kFilter,     // a | name(args)       kids[0] operand (null for a {% filter %} body), args, kwargs
    kTest,       // a is [not] name(args) kids[0], args, negated
    kUnary,      // op a                 name = "-", "+", "not"
    kBinary,     // a op b               name = "+", "-", "*", "/", "//", "%", "**", "~", "and", "or"
    kCompare,    // a op b [op c ...]    kids = operands, ops = operators
    kCond,       // a if b else c        kids[0] = a, kids[1] = b, kids[2] = c or null
    kList,       // [a, b]
    kTuple,      // (a, b)  (a list at run time, as Jinja2 lists and tuples print differently only)
    kDict,       // {k: v}               kids alternate key, value
  };
  Kind kind = Kind::kConst;
  Pos pos;
  std::string name;
  Value value;
  bool negated = false;
  std::vector<ExprPtr> kids;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conds[i] -> bodies[i]; else_body
    kFor,       // targets in expr [if filter]: body; else_body
    kSet,       // targets (or attr target) = expr, or {% set x %}body{% endset %}
    kMacro,     // name(params=defaults): body
    kBreak,
    kContinue,
    kScope,     // {% generation %} and other blocks that only wrap a body
    kFilterBlock,  // {% filter name(args) %}body{% endfilter %}
  };
  Kind kind = Kind::kText;
  Pos pos;
  std::string text;
  ExprPtr expr;                     // output / for iterable / set value / filter call
  ExprPtr filter;                   // for ... if filter
  std::vector<ExprPtr> conds;       // if / elif conditions
  std::vector<Body> bodies;         // if branches, or bodies[0] for for/set/macro/scope
  Body else_body;
  std::vector<std::string> targets; // for / set names; set ns.attr: targets = {ns, attr}, attr_target
  bool attr_target = false;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters with optional defaults
};

}  // namespace ft::protocol::jinja

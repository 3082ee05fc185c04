#include "jinja/parser.h"

#include <initializer_list>
#include <stdexcept>

namespace ft::protocol::jinja {
namespace {

// Thrown inside the parser only; parse_tokens turns it into a Status (the recursion is deep and
// every level would otherwise have to check).
struct ParseError {
  std::string message;
};

using T = Token::Type;

StmtPtr new_stmt(Stmt::Kind kind, Pos pos) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->pos = pos;
  return s;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_all() {
    Body body = subparse({});
    if (cur().type != T::kEof) fail(cur(), "unexpected tag '" + tag_name() + "'");
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  Token next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op) const { return cur().type == T::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == T::kName && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  [[noreturn]] static void fail(const Token& tok, const std::string& what) {
    throw ParseError{"template syntax error at line " + std::to_string(tok.pos.line) + ", column " +
                     std::to_string(tok.pos.column) + ": " + what};
  }
  static std::string describe(const Token& tok) {
    switch (tok.type) {
      case T::kEof: return "end of template";
      case T::kVarEnd: return "end of print statement";
      case T::kBlockEnd: return "end of statement block";
      case T::kText: return "template text";
      default: return "'" + tok.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(cur(), std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != T::kName) fail(cur(), "expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != T::kBlockEnd) fail(cur(), "expected end of statement block, got " + describe(cur()));
    ++i_;
  }
  std::string tag_name() const { return peek().type == T::kName ? peek().text : ""; }

  // Statements until a block tag named in `ends` (left unconsumed) or the end of the template.
  Body subparse(std::initializer_list<const char*> ends) {
    Body body;
    while (cur().type != T::kEof) {
      const Token& tok = cur();
      if (tok.type == T::kText) {
        auto s = new_stmt(Stmt::Kind::kText, tok.pos);
        s->text = tok.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (tok.type == T::kVarBegin) {
        ++i_;
        auto s = new_stmt(Stmt::Kind::kOutput, tok.pos);
        s->expr = parse_tuple(true, false);
        if (cur().type != T::kVarEnd) fail(cur(), "expected end of print statement, got " + describe(cur()));
        ++i_;
        body.push_back(std::move(s));
      } else if (tok.type == T::kBlockBegin) {
        std::string name = tag_name();
        for (const char* e : ends) if (name == e) return body;
        ++i_;
        body.push_back(statement(tok));
      } else {
        fail(tok, "unexpected " + describe(tok));
      }
    }
    if (ends.size() > 0) {
      std::string want;
      for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
      fail(cur(), "unexpected end of template, expected " + want);
    }
    return body;
  }

  // Consumes "{% name" of a closing tag the caller knows is there.
  std::string end_tag() {
    ++i_;  // block begin
    return next().text;
  }

  StmtPtr statement(const Token& begin) {
    if (cur().type != T::kName) fail(cur(), "expected a tag name, got " + describe(cur()));
    Token name_tok = next();
    const std::string& n = name_tok.text;
    if (n == "if") return parse_if(begin);
    if (n == "for") return parse_for(begin);
    if (n == "set") return parse_set(begin);
    if (n == "macro") return parse_macro(begin);
    if (n == "break" || n == "continue") {
      expect_block_end();
      return new_stmt(n == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, begin.pos);
    }
    if (n == "generation") {  // HF's AssistantTracker tag: marks assistant text, renders its body
      expect_block_end();
      auto s = new_stmt(Stmt::Kind::kScope, begin.pos);
      s->bodies.push_back(subparse({"endgeneration"}));
      end_tag();
      expect_block_end();
      return s;
    }
    if (n == "filter") {
      auto s = new_stmt(Stmt::Kind::kFilterBlock, begin.pos);
      s->expr = parse_filter(nullptr, name_tok);
      expect_block_end();
      s->bodies.push_back(subparse({"endfilter"}));
      end_tag();
      expect_block_end();
      return s;
    }
    fail(name_tok, "unsupported or unknown tag '" + n + "'");
  }

  StmtPtr parse_if(const Token& begin) {
    auto s = new_stmt(Stmt::Kind::kIf, begin.pos);
    while (true) {
      s->conds.push_back(parse_tuple(false, false));
      expect_block_end();
      s->bodies.push_back(subparse({"elif", "else", "endif"}));
      std::string tag = end_tag();
      if (tag == "elif") continue;
      if (tag == "else") {
        expect_block_end();
        s->else_body = subparse({"endif"});
        end_tag();
      }
      expect_block_end();
      return s;
    }
  }

  void assign_targets(Stmt& s, bool allow_namespace) {
    bool paren = skip_op("(");
    s.targets.push_back(expect_name());
    if (allow_namespace && skip_op(".")) {
      s.targets.push_back(expect_name());
      s.attr_target = true;
    } else {
      while (skip_op(",")) {
        if (cur().type != T::kName) break;
        s.targets.push_back(expect_name());
      }
    }
    if (paren) expect_op(")");
  }

  StmtPtr parse_for(const Token& begin) {
    auto s = new_stmt(Stmt::Kind::kFor, begin.pos);
    assign_targets(*s, false);
    if (!skip_name("in")) fail(cur(), "expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, true, /*stop_at_if=*/true);
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name("recursive")) fail(cur(), "recursive for loops are not supported");
    expect_block_end();
    s->bodies.push_back(subparse({"endfor", "else"}));
    if (end_tag() == "else") {
      expect_block_end();
      s->else_body = subparse({"endfor"});
      end_tag();
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(const Token& begin) {
    auto s = new_stmt(Stmt::Kind::kSet, begin.pos);
    assign_targets(*s, true);
    if (skip_op("=")) {
      s->expr = parse_tuple(false, false);
      expect_block_end();
      return s;
    }
    if (s->attr_target || s->targets.size() != 1) fail(cur(), "block set needs a single name");
    expect_block_end();
    s->bodies.push_back(subparse({"endset"}));
    end_tag();
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro(const Token& begin) {
    auto s = new_stmt(Stmt::Kind::kMacro, begin.pos);
    s->text = expect_name();
    expect_op("(");
    while (!skip_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (skip_op(")")) break;
      std::string p = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression(true);
      s->params.emplace_back(std::move(p), std::move(def));
    }
    expect_block_end();
    s->bodies.push_back(subparse({"endmacro"}));
    end_tag();
    if (cur().type == T::kName) ++i_;  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  // ---- expressions --------------------------------------------------------------------------

  ExprPtr make(Expr::Kind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  bool tuple_end(bool stop_at_if) const {
    if (cur().type == T::kVarEnd || cur().type == T::kBlockEnd || cur().type == T::kEof) return true;
    if (is_op(")") || is_op("]") || is_op("}") || is_op("=")) return true;
    return stop_at_if && is_name("if");
  }

  ExprPtr parse_tuple(bool simplified_unused, bool no_condexpr, bool stop_at_if = false, bool explicit_parens = false) {
    (void)simplified_unused;
    Pos p = cur().pos;
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        comma = true;
      }
      if (tuple_end(stop_at_if)) break;
      items.push_back(parse_expression(!no_condexpr));
    }
    if (!comma && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parens) fail(cur(), "expected an expression, got " + describe(cur()));
    auto e = make(Expr::Kind::kTuple, p);
    e->kids = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      Pos p = next().pos;
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (skip_name("else")) other = parse_condexpr();
      auto c = make(Expr::Kind::kCond, p);
      c->kids.push_back(std::move(e));
      c->kids.push_back(std::move(cond));
      c->kids.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, Pos p, ExprPtr l, ExprPtr r) {
    auto e = make(Expr::Kind::kBinary, p);
    e->name = op;
    e->kids.push_back(std::move(l));
    e->kids.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      Pos p = next().pos;
      e = binary("or", p, std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      Pos p = next().pos;
      e = binary("and", p, std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::kUnary, next().pos);
      e->name = "not";
      e->kids.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    Pos p = cur().pos;
    ExprPtr first = parse_math1();
    auto e = make(Expr::Kind::kCompare, p);
    e->kids.push_back(std::move(first));
    while (true) {
      if (cur().type == T::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                   cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        e->ops.push_back(next().text);
      } else if (is_name("in")) {
        ++i_;
        e->ops.push_back("in");
      } else if (is_name("not") && peek().type == T::kName && peek().text == "in") {
        i_ += 2;
        e->ops.push_back("notin");
      } else {
        break;
      }
      e->kids.push_back(parse_math1());
    }
    if (e->ops.empty()) return std::move(e->kids[0]);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      Token op = next();
      e = binary(op.text, op.pos, std::move(e), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      Pos p = next().pos;
      e = binary("~", p, std::move(e), parse_math2());
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Token op = next();
      e = binary(op.text, op.pos, std::move(e), parse_pow());
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      Pos p = next().pos;
      e = binary("**", p, std::move(e), parse_unary(true));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Token op = next();
      e = make(Expr::Kind::kUnary, op.pos);
      e->name = op.text;
      e->kids.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    Pos p = tok.pos;
    switch (tok.type) {
      case T::kName: {
        std::string n = next().text;
        auto e = make(Expr::Kind::kConst, p);
        if (n == "true" || n == "True") e->value = Value::boolean(true);
        else if (n == "false" || n == "False") e->value = Value::boolean(false);
        else if (n == "none" || n == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::kName;
          e->name = n;
        }
        return e;
      }
      case T::kString: {
        std::string s;
        while (cur().type == T::kString) s += next().text;  // adjacent literals concatenate
        auto e = make(Expr::Kind::kConst, p);
        e->value = Value::string(std::move(s));
        return e;
      }
      case T::kInt:
      case T::kFloat: {
        auto e = make(Expr::Kind::kConst, p);
        e->value = next().number;
        return e;
      }
      case T::kOp:
        if (tok.text == "(") {
          ++i_;
          ExprPtr e = parse_tuple(false, false, false, true);
          expect_op(")");
          return e;
        }
        if (tok.text == "[") {
          ++i_;
          auto e = make(Expr::Kind::kList, p);
          while (!skip_op("]")) {
            if (!e->kids.empty()) expect_op(",");
            if (skip_op("]")) break;
            e->kids.push_back(parse_expression(true));
          }
          return e;
        }
        if (tok.text == "{") {
          ++i_;
          auto e = make(Expr::Kind::kDict, p);
          while (!skip_op("}")) {
            if (!e->kids.empty()) expect_op(",");
            if (skip_op("}")) break;
            e->kids.push_back(parse_expression(true));
            expect_op(":");
            e->kids.push_back(parse_expression(true));
          }
          return e;
        }
        break;
      default: break;
    }
    fail(tok, "unexpected " + describe(tok));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        Pos p = next().pos;
        if (cur().type == T::kName) {
          auto g = make(Expr::Kind::kGetAttr, p);
          g->name = next().text;
          g->kids.push_back(std::move(e));
          e = std::move(g);
        } else if (cur().type == T::kInt) {
          auto g = make(Expr::Kind::kGetItem, p);
          g->kids.push_back(std::move(e));
          auto idx = make(Expr::Kind::kConst, p);
          idx->value = next().number;
          g->kids.push_back(std::move(idx));
          e = std::move(g);
        } else {
          fail(cur(), "expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    Pos p = next().pos;  // [
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    while (!is_op("]")) {
      if (skip_op(":")) {
        slice = true;
        if (++part > 2) fail(cur(), "too many ':' in slice");
        continue;
      }
      if (parts[part]) fail(cur(), "expected ':' or ']', got " + describe(cur()));
      parts[part] = parse_expression(true);
    }
    expect_op("]");
    if (!slice) {
      if (!parts[0]) fail(cur(), "empty subscript");
      auto g = make(Expr::Kind::kGetItem, p);
      g->kids.push_back(std::move(obj));
      g->kids.push_back(std::move(parts[0]));
      return g;
    }
    auto s = make(Expr::Kind::kSlice, p);
    s->kids.push_back(std::move(obj));
    for (auto& x : parts) s->kids.push_back(std::move(x));
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) fail(cur(), "*args and **kwargs in calls are not supported");
      if (cur().type == T::kName && peek().type == T::kOp && peek().text == "=") {
        std::string k = next().text;
        ++i_;
        e.kwargs.emplace_back(std::move(k), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail(cur(), "positional argument after keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(Expr::Kind::kCall, cur().pos);
    c->kids.push_back(std::move(callee));
    parse_call_args(*c);
    return c;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().type == T::kName) {
      ++i_;
      n += "." + next().text;
    }
    return n;
  }

  // `operand | name(args)`; operand null for {% filter %} blocks (name_tok is then the tag).
  ExprPtr parse_filter(ExprPtr operand, const Token& at) {
    auto f = make(Expr::Kind::kFilter, at.pos);
    f->name = dotted_name();
    f->kids.push_back(std::move(operand));
    if (is_op("(")) parse_call_args(*f);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        Token bar = next();
        e = parse_filter(std::move(e), bar);
      } else if (is_name("is")) {
        auto t = make(Expr::Kind::kTest, next().pos);
        t->negated = skip_name("not");
        t->name = dotted_name();
        t->kids.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((cur().type == T::kName || cur().type == T::kString || cur().type == T::kInt ||
                    cur().type == T::kFloat || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail(cur(), "cannot chain multiple tests with 'is'");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
};

}  // namespace

Result<Body> parse_tokens(std::vector<Token> tokens) {
  try {
    return Parser(std::move(tokens)).parse_all();
  } catch (const ParseError& e) {
    return invalid_argument(e.message);
  }
}

}  // namespace ft::protocol::jinja

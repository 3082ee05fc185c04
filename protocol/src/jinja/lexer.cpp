#include "jinja/lexer.h"

#include <cctype>
#include <cstdlib>

#include "jinja/text.h"

namespace ft::protocol::jinja {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Result<std::vector<Token>> run() {
    // keep_trailing_newline=False: Jinja2 drops one newline at the very end of the source.
    if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(src_.size() >= 2 && src_[src_.size() - 2] == '\r' ? 2 : 1);
    bool line_starting = true;  // did the previous match end a line? (lstrip_blocks needs it)
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      std::string text(src_.substr(pos_, start - pos_));
      Pos text_pos = pos_at(pos_);
      if (start == src_.size()) {
        emit_text(std::move(text), text_pos);
        break;
      }
      char kind = src_[start + 1];  // '{', '%' or '#'
      char sign = start + 2 < src_.size() ? src_[start + 2] : 0;
      if (sign == '-') {
        text = text::strip(text, nullptr, false, true);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the indentation before a block or comment tag alone on its line.
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            text::strip(std::string_view(text).substr(l_pos), nullptr, true, true).empty()) {
          text.resize(l_pos);
        }
      }
      emit_text(std::move(text), text_pos);
      pos_ = start + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      Status st = kind == '#' ? comment(start) : tag(kind, start);
      if (!st.is_ok()) return st;
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Token::Type::kEof, "", {}, pos_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  Pos pos_at(size_t offset) {
    // Positions are mostly asked for in increasing order: walk forward from the last one.
    if (offset < line_pos_) {
      line_pos_ = 0;
      cur_ = Pos{};
    }
    while (line_pos_ < offset && line_pos_ < src_.size()) {
      if (src_[line_pos_] == '\n') {
        ++cur_.line;
        cur_.column = 1;
      } else if ((static_cast<unsigned char>(src_[line_pos_]) & 0xC0) != 0x80) {
        ++cur_.column;
      }
      ++line_pos_;
    }
    return cur_;
  }

  void emit_text(std::string text, Pos pos) {
    if (!text.empty()) tokens_.push_back({Token::Type::kText, std::move(text), {}, pos});
  }

  // After "-%}" all whitespace goes; after "%}" one newline (trim_blocks); after "}}" nothing.
  void after_end(char sign, bool block) {
    if (sign == '-') {
      size_t i = pos_;
      std::string rest = text::strip(src_.substr(i), nullptr, true, false);
      pos_ = src_.size() - rest.size();
    } else if (block && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  Status comment(size_t start) {
    size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) return error(start, "unterminated comment");
    char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    pos_ = end + 2;
    after_end(sign, true);
    return {};
  }

  Status tag(char kind, size_t start) {
    bool block = kind == '%';
    tokens_.push_back({block ? Token::Type::kBlockBegin : Token::Type::kVarBegin, "", {}, pos_at(start)});
    int depth = 0;  // brackets open inside the tag: "}}" there closes a dict, not the tag
    while (true) {
      while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\n' || src_[pos_] == '\r')) ++pos_;
      if (pos_ >= src_.size()) return error(start, block ? "unterminated '{%' tag" : "unterminated '{{' tag");
      std::string_view rest = src_.substr(pos_);
      const char* close = block ? "%}" : "}}";
      if (depth == 0) {
        char sign = 0;
        if ((rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close) sign = rest[0];
        if (sign || rest.substr(0, 2) == close) {
          tokens_.push_back({block ? Token::Type::kBlockEnd : Token::Type::kVarEnd, "", {}, pos_at(pos_)});
          pos_ += sign ? 3 : 2;
          after_end(sign, block);
          return {};
        }
      }
      Pos p = pos_at(pos_);
      char c = rest[0];
      if (is_name_start(c)) {
        size_t n = 1;
        while (n < rest.size() && (is_name_start(rest[n]) || is_digit(rest[n]))) ++n;
        tokens_.push_back({Token::Type::kName, std::string(rest.substr(0, n)), {}, p});
        pos_ += n;
      } else if (is_digit(c)) {
        FT_RETURN_IF_ERROR(number(p));
      } else if (c == '\'' || c == '"') {
        FT_RETURN_IF_ERROR(string_literal(c, p));
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">", "=", ".", ",", ":", "|", "(", ")", "[", "]", "{", "}"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (rest.substr(0, std::char_traits<char>::length(o)) == o) {
            op = o;
            break;
          }
        }
        if (!op) return error(pos_, std::string("unexpected character '") + c + "'");
        std::string o(op);
        if (o == "(" || o == "[" || o == "{") ++depth;
        if ((o == ")" || o == "]" || o == "}") && depth > 0) --depth;
        tokens_.push_back({Token::Type::kOp, o, {}, p});
        pos_ += o.size();
      }
    }
  }

  Status number(Pos p) {
    size_t b = pos_, i = pos_;
    auto digits = [&] {
      while (i < src_.size() && (is_digit(src_[i]) || (src_[i] == '_' && i + 1 < src_.size() && is_digit(src_[i + 1])))) ++i;
    };
    digits();
    bool is_float = false;
    if (i + 1 < src_.size() && src_[i] == '.' && is_digit(src_[i + 1])) {
      is_float = true;
      ++i;
      digits();
    }
    if (i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
      size_t j = i + 1;
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
      if (j < src_.size() && is_digit(src_[j])) {
        is_float = true;
        i = j;
        digits();
      }
    }
    std::string lit;
    for (size_t k = b; k < i; ++k) if (src_[k] != '_') lit.push_back(src_[k]);
    pos_ = i;
    Token t{is_float ? Token::Type::kFloat : Token::Type::kInt, lit, {}, p};
    t.number = is_float ? Value::number(std::strtod(lit.c_str(), nullptr))
                        : Value::integer(std::strtoll(lit.c_str(), nullptr, 10));
    tokens_.push_back(std::move(t));
    return {};
  }

  // Python's unicode-escape rules: the common escapes, \xhh, \uXXXX, \UXXXXXXXX, octal; an
  // unknown escape keeps its backslash.
  Status string_literal(char quote, Pos p) {
    size_t i = pos_ + 1;
    std::string out;
    while (true) {
      if (i >= src_.size()) return error(pos_, "unterminated string literal");
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        out.push_back(c);
        ++i;
        continue;
      }
      char e = src_[i + 1];
      i += 2;
      auto hex = [&](int n) -> long {
        if (i + n > src_.size()) return -1;
        std::string h(src_.substr(i, n));
        for (char ch : h) if (!std::isxdigit(static_cast<unsigned char>(ch))) return -1;
        i += n;
        return std::strtol(h.c_str(), nullptr, 16);
      };
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\n': break;  // line continuation
        case 'x': case 'u': case 'U': {
          long cp = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
          if (cp < 0) return error(i, "invalid escape in string literal");
          text::append_utf8(static_cast<char32_t>(cp), out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) v = v * 8 + (src_[i++] - '0');
            text::append_utf8(static_cast<char32_t>(v), out);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    tokens_.push_back({Token::Type::kString, std::move(out), {}, p});
    pos_ = i + 1;
    return {};
  }

  Status error(size_t offset, const std::string& what) {
    Pos p = pos_at(offset);
    return invalid_argument("template syntax error at line " + std::to_string(p.line) + ", column " +
                            std::to_string(p.column) + ": " + what);
  }

  std::string_view src_;
  size_t pos_ = 0;
  size_t line_pos_ = 0;
  Pos cur_;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace ft::protocol::jinja

// See json_reader.h. Strict JSON (RFC 8259) for the parts it scans itself; errors name the byte
// offset so a truncated download is easy to spot.
#include "tokenizer/json_reader.h"

#include <cstring>

#include "tokenizer/utf8.h"

namespace ft::protocol::tok {
namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  Status error(const std::string& what) const {
    return corrupt("tokenizer.json: " + what + " at byte " + std::to_string(pos_));
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  char peek() {
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }

  Status string(std::string& out) {
    out.clear();
    if (!consume('"')) return error("expected a string");
    for (;;) {
      // Copy the run up to the next quote or backslash in one go.
      const char* start = s_.data() + pos_;
      const char* end = s_.data() + s_.size();
      const char* p = start;
      while (p < end && *p != '"' && *p != '\\') ++p;
      out.append(start, p);
      pos_ = p - s_.data();
      if (p == end) return error("unterminated string");
      ++pos_;
      if (*p == '"') return Status::ok();
      if (pos_ >= s_.size()) return error("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          char32_t cp = 0;
          FT_RETURN_IF_ERROR(hex4(cp));
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            char32_t lo = 0;
            if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') return error("lone surrogate");
            pos_ += 2;
            FT_RETURN_IF_ERROR(hex4(lo));
            if (lo < 0xDC00 || lo > 0xDFFF) return error("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return error("lone surrogate");
          }
          append_code_point(cp, out);
          break;
        }
        default:
          return error("bad escape");
      }
    }
  }

  Status integer(int64_t& out) {
    skip_ws();
    bool neg = pos_ < s_.size() && s_[pos_] == '-';
    if (neg) ++pos_;
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return error("expected an integer");
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (INT64_MAX - 9) / 10) return error("integer too large");
      v = v * 10 + (s_[pos_++] - '0');
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      return error("expected an integer");
    out = neg ? -v : v;
    return Status::ok();
  }

  // Skips one JSON value of any kind; returns the text it spans.
  Result<std::string_view> skip_value() {
    skip_ws();
    const std::size_t start = pos_;
    if (pos_ >= s_.size()) return error("unexpected end");
    char c = s_[pos_];
    if (c == '"') {
      FT_RETURN_IF_ERROR(string(scratch_));
    } else if (c == '{' || c == '[') {
      // Depth count, stepping over strings (which may hold brackets).
      int depth = 0;
      while (pos_ < s_.size()) {
        char d = s_[pos_];
        if (d == '"') {
          FT_RETURN_IF_ERROR(string(scratch_));
          continue;
        }
        ++pos_;
        if (d == '{' || d == '[') ++depth;
        if ((d == '}' || d == ']') && --depth == 0) break;
      }
      if (depth != 0) return error("unterminated object or array");
    } else {
      while (pos_ < s_.size() && std::strchr(",}] \n\r\t", s_[pos_]) == nullptr) ++pos_;
      if (pos_ == start) return error("expected a value");
    }
    return s_.substr(start, pos_ - start);
  }

  bool at_end() {
    skip_ws();
    return pos_ == s_.size();
  }

 private:
  Status hex4(char32_t& cp) {
    if (pos_ + 4 > s_.size()) return error("short \\u escape");
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      int v = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (v < 0) return error("bad \\u escape");
      cp = cp * 16 + v;
    }
    return Status::ok();
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string scratch_;
};

Result<nlohmann::json> parse_small(std::string_view text, Scanner& sc) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return sc.error("malformed value");
  return j;
}

Status read_vocab(Scanner& sc, TokenizerJson& out) {
  if (!sc.consume('{')) return sc.error("model.vocab is not an object");
  out.has_vocab = true;
  if (sc.consume('}')) return Status::ok();
  std::string key;
  do {
    FT_RETURN_IF_ERROR(sc.string(key));
    if (!sc.consume(':')) return sc.error("expected ':'");
    int64_t id = 0;
    FT_RETURN_IF_ERROR(sc.integer(id));
    out.vocab.emplace_back(key, id);
  } while (sc.consume(','));
  if (!sc.consume('}')) return sc.error("expected '}' after model.vocab");
  return Status::ok();
}

Status read_merges(Scanner& sc, TokenizerJson& out) {
  if (!sc.consume('[')) return sc.error("model.merges is not an array");
  if (sc.consume(']')) return Status::ok();
  std::string a, b;
  do {
    if (sc.peek() == '[') {  // ["a", "b"]
      sc.consume('[');
      FT_RETURN_IF_ERROR(sc.string(a));
      if (!sc.consume(',')) return sc.error("a merge pair needs two strings");
      FT_RETURN_IF_ERROR(sc.string(b));
      if (!sc.consume(']')) return sc.error("a merge pair needs exactly two strings");
    } else {  // "a b": the halves never contain a space (it is spelled Ġ)
      FT_RETURN_IF_ERROR(sc.string(a));
      auto sp = a.find(' ');
      if (sp == std::string::npos || a.find(' ', sp + 1) != std::string::npos)
        return sc.error("merge \"" + a + "\" is not \"a b\"");
      b = a.substr(sp + 1);
      a.resize(sp);
    }
    out.merges.emplace_back(a, b);
  } while (sc.consume(','));
  if (!sc.consume(']')) return sc.error("expected ']' after model.merges");
  return Status::ok();
}

Status read_model(Scanner& sc, TokenizerJson& out) {
  if (!sc.consume('{')) return sc.error("\"model\" is not an object");
  nlohmann::json model = nlohmann::json::object();
  if (!sc.consume('}')) {
    std::string key;
    do {
      FT_RETURN_IF_ERROR(sc.string(key));
      if (!sc.consume(':')) return sc.error("expected ':'");
      if (key == "vocab") {
        FT_RETURN_IF_ERROR(read_vocab(sc, out));
      } else if (key == "merges") {
        FT_RETURN_IF_ERROR(read_merges(sc, out));
      } else {
        FT_ASSIGN_OR_RETURN(std::string_view raw, sc.skip_value());
        FT_ASSIGN_OR_RETURN(model[key], parse_small(raw, sc));
      }
    } while (sc.consume(','));
    if (!sc.consume('}')) return sc.error("expected '}' after \"model\"");
  }
  out.doc["model"] = std::move(model);
  return Status::ok();
}

}  // namespace

Result<TokenizerJson> read_tokenizer_json(std::string_view text) {
  Scanner sc(text);
  TokenizerJson out;
  out.doc = nlohmann::json::object();
  if (!sc.consume('{')) return sc.error("tokenizer.json is not a JSON object");
  if (!sc.consume('}')) {
    std::string key;
    do {
      FT_RETURN_IF_ERROR(sc.string(key));
      if (!sc.consume(':')) return sc.error("expected ':'");
      if (key == "model" && sc.peek() == '{') {
        FT_RETURN_IF_ERROR(read_model(sc, out));
      } else {
        FT_ASSIGN_OR_RETURN(std::string_view raw, sc.skip_value());
        FT_ASSIGN_OR_RETURN(out.doc[key], parse_small(raw, sc));
      }
    } while (sc.consume(','));
    if (!sc.consume('}')) return sc.error("expected '}' at the end");
  }
  if (!sc.at_end()) return sc.error("trailing characters");
  return out;
}

}  // namespace ft::protocol::tok

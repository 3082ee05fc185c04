// PCRE2 wrapper: compile once with JIT, match with per-thread scratch (match data and a JIT stack
// are not shareable between threads, and allocating them per call would dominate short matches).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

namespace ft::protocol::tok {
namespace {

// Unicode White_Space, the set Oniguruma's \s matches.
constexpr std::string_view kWhiteSpaceItems =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Long runs of whitespace or letters backtrack deeply; 32 KiB (the default) is not enough.
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

void Regex::CodeDeleter::operator()(pcre2_real_code_8* code) const { pcre2_code_free(code); }

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      ++i;
      if (n == 's') {
        if (in_class) {
          out.append(kWhiteSpaceItems);
        } else {
          out.append("[").append(kWhiteSpaceItems).append("]");
        }
        continue;
      }
      if (n == 'S' && !in_class) {
        out.append("[^").append(kWhiteSpaceItems).append("]");
        continue;
      }
      // \S inside a class cannot be spelled as a list; keep PCRE2's (differs only at U+180E).
      out.push_back('\\');
      out.push_back(n);
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

Result<Regex> Regex::compile(std::string_view pattern) {
  const std::string translated = onig_to_pcre2(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    return invalid_argument("bad pre-tokenizer regex at offset " + std::to_string(offset) + ": " +
                            pcre2_message(error) + ": " + std::string(pattern));
  }
  Regex r;
  r.code_ = std::shared_ptr<pcre2_real_code_8>(code, CodeDeleter{});
  r.pattern_ = std::string(pattern);
  // Without JIT (e.g. a PCRE2 built without it) matching still works through the interpreter.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return r;
}

Result<Regex> Regex::literal(std::string_view literal) {
  std::string escaped;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) escaped.push_back('\\');
    escaped.push_back(c);
  }
  return compile(escaped);
}

bool Regex::find(std::string_view subject, std::size_t start, std::size_t& match_begin,
                 std::size_t& match_end) const {
  MatchScratch& s = scratch();
  const auto* sp = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = pcre2_match(code_.get(), sp, subject.size(), start, PCRE2_NO_UTF_CHECK, s.data, s.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // Pathological input: retry with the interpreter, which keeps its frames on the heap.
    rc = pcre2_match(code_.get(), sp, subject.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s.data, s.context);
  }
  if (rc < 0) return false;  // no match (or a resource limit: the rest stays one piece)
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
  match_begin = ov[0];
  match_end = ov[1];
  return true;
}

}  // namespace ft::protocol::tok

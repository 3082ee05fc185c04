// PCRE2 (UTF + UCP + JIT) behind a small RAII type, speaking the Oniguruma dialect HF tokenizers
// uses for tokenizer.json patterns. The one difference that matters for the patterns in use is
// \s: Oniguruma matches exactly Unicode White_Space, PCRE2 10.42 also matches U+180E, so \s and
// \S are rewritten into explicit White_Space classes before compiling.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "ft/common/result.h"

struct pcre2_real_code_8;

namespace ft::protocol::tok {

class Regex {
 public:
  // Compiles an Oniguruma-style pattern (as found in tokenizer.json).
  static Result<Regex> compile(std::string_view pattern);
  // A pattern that matches `literal` exactly.
  static Result<Regex> literal(std::string_view literal);

  // First match in subject[start..] (subject must be valid UTF-8, start on a character boundary).
  // Lookarounds see the whole subject. Returns false when there is none.
  bool find(std::string_view subject, std::size_t start, std::size_t& match_begin, std::size_t& match_end) const;

  // Calls fn(begin, end) for each successive non-overlapping match. An empty match is reported
  // and the search resumes one character later, as Oniguruma's find_iter does.
  template <typename Fn>
  void for_each_match(std::string_view subject, Fn&& fn) const {
    std::size_t pos = 0, b = 0, e = 0;
    while (pos <= subject.size() && find(subject, pos, b, e)) {
      fn(b, e);
      if (e > b) {
        pos = e;
      } else {
        if (e >= subject.size()) break;
        pos = e + 1;
        while (pos < subject.size() && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80) ++pos;
      }
    }
  }

  const std::string& pattern() const { return pattern_; }

 private:
  struct CodeDeleter {
    void operator()(pcre2_real_code_8* code) const;
  };
  std::shared_ptr<pcre2_real_code_8> code_;  // shared: compiled code is immutable and thread-safe
  std::string pattern_;
};

// Rewrites \s / \S in an Oniguruma pattern into explicit Unicode White_Space classes.
std::string onig_to_pcre2(std::string_view pattern);

}  // namespace ft::protocol::tok

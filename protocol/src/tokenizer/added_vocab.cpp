// Added-token matching; see added_vocab.h.
#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/regex.h"

namespace ft::protocol::tok {
namespace {

// The helpers HF uses for single_word/lstrip/rstrip: Rust regex \w and \s (Unicode). PCRE2's
// \w (UCP) is letters, digits and '_', close to Rust's; none of the supported files set these flags.
struct FlagRegexes {
  Regex ends_word = *Regex::compile("\\w$");
  Regex starts_word = *Regex::compile("^\\w");
  Regex leading_space = *Regex::compile("^\\s*");
  Regex trailing_space = *Regex::compile("\\s*$");
};

const FlagRegexes& flag_regexes() {
  static const FlagRegexes r;  // constant patterns: compile cannot fail
  return r;
}

bool has_match(const Regex& re, std::string_view s) {
  std::size_t b = 0, e = 0;
  return re.find(s, 0, b, e);
}

}  // namespace

void TokenTrie::add(std::string_view pattern, int32_t token_index) {
  if (pattern.empty()) return;
  first_[static_cast<unsigned char>(pattern[0])] = true;
  uint32_t node = 0;
  for (unsigned char c : pattern) {
    auto& next = nodes_[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), c, [](const auto& e, unsigned char k) { return e.first < k; });
    if (it != next.end() && it->first == c) {
      node = it->second;
      continue;
    }
    const auto child = static_cast<uint32_t>(nodes_.size());
    next.insert(it, {c, child});
    nodes_.emplace_back();
    node = child;
  }
  if (nodes_[node].token < 0) nodes_[node].token = token_index;  // first spelling wins, like HF's id map
}

int32_t TokenTrie::longest_at(std::string_view text, std::size_t pos, std::size_t& len) const {
  int32_t best = -1;
  uint32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto& next = nodes_[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), c, [](const auto& e, unsigned char k) { return e.first < k; });
    if (it == next.end() || it->first != c) break;
    node = it->second;
    if (nodes_[node].token >= 0) {
      best = nodes_[node].token;
      len = i + 1 - pos;
    }
  }
  return best;
}

void AddedVocab::build(std::vector<AddedToken> tokens, FunctionRef<std::string(std::string_view)> normalize) {
  tokens_ = std::move(tokens);
  any_single_word_ = std::any_of(tokens_.begin(), tokens_.end(), [](const AddedToken& t) { return t.single_word; });
  raw_ = TokenTrie();
  normalized_ = TokenTrie();
  // HF builds its matchers from special tokens first, then the others, each in file order.
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      const AddedToken& t = tokens_[i];
      if (t.special != (pass == 0)) continue;
      if (t.normalized) {
        normalized_.add(normalize(t.content), static_cast<int32_t>(i));
      } else {
        raw_.add(t.content, static_cast<int32_t>(i));
      }
    }
  }
}

void AddedVocab::split(std::string_view text, bool normalized_set, FunctionRef<void(std::string_view)> on_text,
                       FunctionRef<void(int32_t id, std::size_t cut)> on_token) const {
  const TokenTrie& trie = normalized_set ? normalized_ : raw_;
  if (trie.empty()) {
    if (!text.empty()) on_text(text);
    return;
  }
  std::size_t emitted = 0;  // text[..emitted] has been handed out
  std::size_t pos = 0;      // where the next search starts (after the previous match)
  while (pos < text.size()) {
    // Leftmost position where some token starts, then the longest token there.
    std::size_t len = 0;
    int32_t index = -1;
    for (; pos < text.size(); ++pos) {
      if (!trie.may_start(static_cast<unsigned char>(text[pos]))) continue;
      index = trie.longest_at(text, pos, len);
      if (index >= 0) break;
    }
    if (index < 0) break;
    std::size_t start = pos, stop = pos + len;
    pos = stop;  // a match discarded below still consumes its text, as in HF's find_iter loop
    const AddedToken& t = tokens_[index];
    const FlagRegexes& fr = flag_regexes();
    if (t.single_word) {
      bool start_space = start == 0 || !has_match(fr.ends_word, text.substr(0, start));
      bool stop_space = stop == text.size() || !has_match(fr.starts_word, text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      std::size_t b = start, e = start;
      fr.trailing_space.find(text.substr(0, start), 0, b, e);
      start = std::max(b, emitted);
    }
    if (t.rstrip) {
      std::size_t b = 0, e = 0;
      fr.leading_space.find(text.substr(stop), 0, b, e);
      stop += e;  // HF's search still resumes at the end of the token itself
    }
    if (emitted < start) on_text(text.substr(emitted, start - emitted));
    on_token(t.id, t.lstrip || any_single_word_ ? std::string_view::npos : start);
    emitted = stop;
  }
  if (emitted < text.size()) on_text(text.substr(emitted));
}

}  // namespace ft::protocol::tok

// Added tokens (tokenizer.json "added_tokens"): found in the text before anything else and never
// split. Mirrors HF's AddedVocabulary: two leftmost-longest matchers, one over the raw text for
// tokens with normalized=false, one over normalized pieces for normalized=true; patterns in HF's
// order (special tokens first); lstrip/rstrip/single_word applied to each match as HF does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/function_ref.h"

namespace ft::protocol::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = true, single_word = false;
};

// A byte trie answering "longest token starting here".
class TokenTrie {
 public:
  void add(std::string_view pattern, int32_t token_index);
  bool empty() const { return nodes_.size() <= 1; }
  // Longest pattern at text[pos..]: returns its token index and sets `len`, or -1.
  int32_t longest_at(std::string_view text, std::size_t pos, std::size_t& len) const;
  bool may_start(unsigned char c) const { return first_[c]; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> next;  // sorted by byte
    int32_t token = -1;
  };
  std::vector<Node> nodes_ = std::vector<Node>(1);
  bool first_[256] = {};
};

class AddedVocab {
 public:
  // `normalize` turns a token's content into its normalized spelling (for normalized=true ones).
  void build(std::vector<AddedToken> tokens, FunctionRef<std::string(std::string_view)> normalize);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

  // Splits `text` on tokens of one matcher (raw: normalized=false ones; else normalized=true
  // ones): calls on_text for the pieces between (non-empty) and on_token for each match, with the
  // match's start as `cut` when splitting text.substr(0, cut) alone gives exactly the pieces and
  // tokens handed out before it (else npos). That holds at a match that strips nothing before it
  // (no lstrip): earlier matches all end by `cut` and are found the same way without the rest, and
  // the piece before it ends at `cut` either way. single_word is the exception (whether a match
  // ending at `cut` counts depends on the byte after it), so no match is a cut while any token has it.
  void split(std::string_view text, bool normalized_set, FunctionRef<void(std::string_view)> on_text,
             FunctionRef<void(int32_t id, std::size_t cut)> on_token) const;

 private:
  std::vector<AddedToken> tokens_;
  TokenTrie raw_, normalized_;
  bool any_single_word_ = false;
};

}  // namespace ft::protocol::tok

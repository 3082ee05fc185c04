// The BPE model of HF tokenizers (models/bpe), for byte-level vocabularies: a word (raw bytes of
// one pre-token) starts as one symbol per byte and adjacent pairs are merged lowest rank first,
// exactly in the order HF's merge_all() does (a min-heap on (rank, position), with its check
// that a queued merge still yields the same token).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ft/common/result.h"
#include "tokenizer/token_index.h"

namespace ft::protocol::tok {

// Transparent string hashing so lookups by string_view do not allocate.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class WordCache;

class Bpe {
 public:
  // From tokenizer.json's "model" options (type, ignore_merges, ...) and its vocab and merges,
  // which are consumed.
  static Result<Bpe> build(const nlohmann::json& options, std::vector<std::pair<std::string, int64_t>>& vocab,
                           std::vector<std::pair<std::string, std::string>>& merges);

  Bpe();  // empty; from_json() fills one in
  Bpe(Bpe&&) noexcept;
  Bpe& operator=(Bpe&&) noexcept;
  ~Bpe();

  // Appends the ids of one pre-token (raw bytes, non-empty) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // The model vocabulary, indexed by id ("" for ids it does not use): the tokenizer.json spelling
  // and the raw bytes the ByteLevel decoder turns it into.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  const std::vector<std::string>& id_bytes() const { return id_bytes_; }
  int32_t token_to_id(std::string_view token) const { return token_index_.find(token, id_to_token_); }
  std::size_t size() const { return token_index_.size(); }  // distinct tokens

 private:
  void merge(std::string_view word, std::vector<int32_t>& out) const;

  // (left id, right id) -> (rank, merged id), open addressing: the hot lookup of encoding.
  class PairMap {
   public:
    void reserve(std::size_t n);
    void insert_or_assign(uint32_t a, uint32_t b, uint32_t rank, uint32_t merged);
    // False when the pair has no merge.
    bool find(uint32_t a, uint32_t b, uint32_t& rank, uint32_t& merged) const {
      if (mask_ == 0) return false;
      const uint64_t key = (uint64_t{a} << 32) | b;
      for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
        const Slot& s = slots_[i];
        if (s.key == key) {
          rank = s.rank;
          merged = s.merged;
          return true;
        }
        if (s.key == kEmpty) return false;
      }
    }

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    struct Slot {
      uint64_t key = kEmpty;
      uint32_t rank = 0, merged = 0;
    };
    std::size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    int shift_ = 64;
  };

  std::vector<std::string> id_to_token_;
  std::vector<std::string> id_bytes_;
  TokenIndex token_index_;  // over id_to_token_
  TokenIndex bytes_index_;  // over id_bytes_, pure byte-level tokens only; built for ignore_merges
  int32_t byte_id_[256];     // id of each single byte, -1 when absent
  PairMap merges_;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace ft::protocol::tok

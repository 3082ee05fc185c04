// BPE model: loading tokenizer.json's model section, and the merge loop.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ft/protocol/byte_level.h"
#include "tokenizer/word_cache.h"

namespace ft::protocol::tok {

using nlohmann::json;

void Bpe::PairMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  int bits = 4;
  while (cap < n * 2) {
    cap <<= 1;
    ++bits;
  }
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  shift_ = 64 - bits;
}

void Bpe::PairMap::insert_or_assign(uint32_t a, uint32_t b, uint32_t rank, uint32_t merged) {
  const uint64_t key = (uint64_t{a} << 32) | b;
  for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == kEmpty || s.key == key) {
      s = Slot{key, rank, merged};
      return;
    }
  }
}

Bpe::Bpe() : cache_(std::make_unique<WordCache>()) { std::fill(std::begin(byte_id_), std::end(byte_id_), -1); }
Bpe::Bpe(Bpe&&) noexcept = default;
Bpe& Bpe::operator=(Bpe&&) noexcept = default;
Bpe::~Bpe() = default;

Result<Bpe> Bpe::build(const json& model, std::vector<std::pair<std::string, int64_t>>& vocab,
                       std::vector<std::pair<std::string, std::string>>& merges) {
  if (!model.is_object()) return corrupt("tokenizer.json: \"model\" is missing");
  const std::string type =
      model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "BPE";
  if (type != "BPE") return unsupported("tokenizer.json: model type " + type + " (only BPE is supported)");
  auto set = [&](const char* key) { return model.contains(key) && !model[key].is_null(); };
  if (set("dropout") && !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    return unsupported("tokenizer.json: BPE dropout");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (set(key) && !(model[key].is_string() && model[key].get<std::string>().empty()))
      return unsupported(std::string("tokenizer.json: BPE ") + key);
  }
  if (set("byte_fallback") && model["byte_fallback"] != false) return unsupported("tokenizer.json: BPE byte_fallback");
  if (set("unk_token")) return unsupported("tokenizer.json: BPE unk_token (byte-level vocabularies need none)");
  if (vocab.empty()) return corrupt("tokenizer.json: model.vocab is missing or empty");

  Bpe bpe;
  bpe.ignore_merges_ = model.contains("ignore_merges") && model["ignore_merges"] == true;
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) return corrupt("tokenizer.json: negative vocab id for " + token);
    max_id = std::max(max_id, id);
  }
  if (max_id > INT32_MAX) return corrupt("tokenizer.json: vocab id out of range");
  bpe.id_to_token_.resize(max_id + 1);
  bpe.id_bytes_.resize(max_id + 1);
  std::vector<uint8_t> byte_level(max_id + 1, 0);
  for (auto& [token, id] : vocab) bpe.id_to_token_[id] = std::move(token);
  vocab.clear();
  vocab.shrink_to_fit();
  for (std::size_t id = 0; id < bpe.id_to_token_.size(); ++id) {
    const std::string& token = bpe.id_to_token_[id];
    if (token.empty()) continue;
    // Encoding works on raw bytes. HF's ByteLevel decoder falls back to a token's own UTF-8 when
    // it holds a character outside the byte-level alphabet; such tokens can never come out of
    // merging bytes, so they stay out of the byte-keyed index.
    if (auto bytes = byte_level_to_bytes(token)) {
      byte_level[id] = 1;
      if (bytes->size() == 1) bpe.byte_id_[static_cast<unsigned char>((*bytes)[0])] = static_cast<int32_t>(id);
      bpe.id_bytes_[id] = std::move(*bytes);
    } else {
      bpe.id_bytes_[id] = token;
    }
  }
  // A token listed under two ids resolves to the higher one.
  bpe.token_index_.build(bpe.id_to_token_, [&](std::size_t id) { return !bpe.id_to_token_[id].empty(); });
  if (bpe.ignore_merges_) bpe.bytes_index_.build(bpe.id_bytes_, [&](std::size_t id) { return byte_level[id] != 0; });

  bpe.merges_.reserve(merges.size());
  auto lookup = [&](const std::string& t) -> int64_t { return bpe.token_to_id(t); };
  std::string joined;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    joined.assign(a).append(b);
    const int64_t ia = lookup(a), ib = lookup(b), im = lookup(joined);
    if (ia < 0 || ib < 0 || im < 0)
      return corrupt("tokenizer.json: merge " + std::to_string(rank) + " (" + a + " " + b + ") is out of vocabulary");
    // Like HF's HashMap collect, a repeated pair keeps its last rank.
    bpe.merges_.insert_or_assign(ia, ib, rank, im);
  }
  merges.clear();
  merges.shrink_to_fit();
  return bpe;
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    if (int32_t id = byte_id_[static_cast<unsigned char>(word[0])]; id >= 0) out.push_back(id);
    return;
  }
  if (ignore_merges_) {
    if (int32_t id = bytes_index_.find(word, id_bytes_); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() < WordCache::kMaxWordBytes;
  if (cacheable && cache_->get(word, out)) return;
  const std::size_t first = out.size();
  merge(word, out);
  if (cacheable) cache_->put(word, out.data() + first, out.size() - first);
}

namespace {

struct Symbol {
  uint32_t id;
  int32_t prev, next;
  bool removed;
};

struct Candidate {
  uint32_t rank, pos, merged;
  // std heap functions build a max-heap; invert so the lowest (rank, pos) is on top.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

struct MergeScratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

}  // namespace

void Bpe::merge(std::string_view word, std::vector<int32_t>& out) const {
  thread_local MergeScratch scratch;
  auto& sym = scratch.symbols;
  auto& heap = scratch.heap;
  sym.clear();
  heap.clear();
  for (unsigned char c : word) {
    int32_t id = byte_id_[c];
    if (id < 0) continue;  // HF drops characters missing from the vocabulary when there is no unk
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back(Symbol{static_cast<uint32_t>(id), n - 1, n + 1, false});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  uint32_t rank = 0, merged = 0;
  for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
    if (merges_.find(sym[i].id, sym[i + 1].id, rank, merged))
      heap.push_back(Candidate{rank, static_cast<uint32_t>(i), merged});
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = sym[top.pos];
    if (left.removed || left.next < 0) continue;
    const Symbol& right = sym[left.next];
    // Stale entry: the pair at this position changed since it was queued.
    if (!merges_.find(left.id, right.id, rank, merged) || merged != top.merged) continue;
    const int32_t right_pos = left.next;
    left.id = top.merged;
    left.next = right.next;
    sym[right_pos].removed = true;
    if (left.next >= 0) sym[left.next].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0 && merges_.find(sym[left.prev].id, left.id, rank, merged)) {
      heap.push_back(Candidate{rank, static_cast<uint32_t>(left.prev), merged});
      std::push_heap(heap.begin(), heap.end());
    }
    if (left.next >= 0 && merges_.find(left.id, sym[left.next].id, rank, merged)) {
      heap.push_back(Candidate{rank, top.pos, merged});
      std::push_heap(heap.begin(), heap.end());
    }
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(static_cast<int32_t>(sym[i].id));
}

}  // namespace ft::protocol::tok

// Streaming detokenisation. Token bytes are appended to a pending buffer; everything up to the
// start of a trailing, still-completable UTF-8 sequence is emitted (repairing invalid bytes with
// the same maximal-subpart rule decode() uses), so pieces concatenate to decode()'s result.
#include "ft/protocol/tokenizer.h"
#include "ft/protocol/unicode.h"

namespace ft::protocol {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string IncrementalDecoder::take_complete() {
  std::string out;
  const std::size_t used = append_utf8_lossy(pending_, /*final=*/false, out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::push(int32_t id) {
  if (skip_special_ && tokenizer_->is_special(id)) return {};
  pending_.append(tokenizer_->token_bytes(id));
  return take_complete();
}

std::string IncrementalDecoder::push(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (skip_special_ && tokenizer_->is_special(id)) continue;
    pending_.append(tokenizer_->token_bytes(id));
  }
  return take_complete();
}

std::string IncrementalDecoder::flush() {
  std::string out;
  append_utf8_lossy(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace ft::protocol

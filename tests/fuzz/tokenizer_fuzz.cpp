// libFuzzer target for the tokenizer (Qwen3's, DeepSeek-V3's and gpt-oss's real tokenizer.json),
// picked by the first byte. Text: encoding stays inside the vocabulary, and valid UTF-8 decodes
// back to itself or its NFC form (byte-level BPE loses nothing; a normalizer composes). Ids (the rest read as int32s,
// any value): decoding never crashes, and the streaming decoder's pieces add up to the one-shot decode.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ft/protocol/unicode.h"
#include "fuzz_data.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ft::fuzz::load_all();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ft;
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  const fuzz::Vocab vocab = mode % 3 == 0   ? fuzz::Vocab::kQwen3
                            : mode % 3 == 1 ? fuzz::Vocab::kDeepSeekV3
                                            : fuzz::Vocab::kGptOss;
  const protocol::Tokenizer& tok = fuzz::tokenizer(vocab);
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool skip_special = (mode & 0x40) != 0;

  if ((mode & 0x80) == 0) {  // text
    const std::vector<int32_t> ids = tok.encode(rest);
    for (int32_t id : ids)
      if (id < 0 || std::size_t(id) >= tok.id_limit()) fuzz::fail("encode gave id " + std::to_string(id));
    // A tokenizer with an NFC normalizer (Qwen3's) gives back the text's NFC form.
    if (protocol::is_valid_utf8(rest)) {
      const std::string back = tok.decode(ids);
      if (back != rest && back != protocol::nfc(rest))
        fuzz::fail("decode(encode(text)) is neither the text nor its NFC form (" + std::to_string(rest.size()) +
                   " bytes)");
    }
    return 0;
  }
  std::vector<int32_t> ids(rest.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
  // Mostly ids near the vocabulary, some anywhere: the high byte 0x80 keeps a value as it is.
  for (int32_t& id : ids)
    if ((static_cast<std::uint32_t>(id) >> 24) != 0x80)
      id = int32_t(static_cast<std::uint32_t>(id) % (tok.id_limit() + 16));
  const std::string whole = tok.decode(ids, skip_special);
  if (!protocol::is_valid_utf8(whole)) fuzz::fail("decode gave invalid UTF-8");
  protocol::IncrementalDecoder stream(tok, skip_special);
  std::string pieces;
  for (int32_t id : ids) pieces += stream.push(id);
  pieces += stream.flush();
  if (pieces != whole) fuzz::fail("the streaming decode differs from the one-shot decode");
  return 0;
}

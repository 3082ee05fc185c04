// The tokenizer.ggml.pre names Tokenizer::from_gguf accepts. Each entry is the normalizer and
// pre-tokenizer of the HF tokenizer.json the name was detected from (llama.cpp's converter hashes
// the ids of a probe text to pick the name), written exactly as that file has them, so the regexes
// run with HF's semantics through the same builder as tokenizer.json. A name is listed only when
// its tokenizer.json is known and the GGUF tests check the ids against HF's; everything else is
// refused rather than guessed.
#include "tokenizer/gguf_pre_tokenizers.h"

#include <array>

#include "ft/protocol/gguf_vocab.h"

namespace ft::protocol {
namespace tok {
namespace {

// Qwen1.5 / Qwen2 / Qwen2.5 / Qwen3: NFC, then one split (single digits) and the byte mapping.
constexpr std::string_view kQwen2Pre = R"json({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})json";

// DeepSeek-V3 (and R1, V3.1): digits in threes, CJK runs, then the word pattern; no normalizer.
// The literal CR/LF escapes (\r, \n without a second backslash) are as in DeepSeek's file.
constexpr std::string_view kDeepseekV3Pre = R"json({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
  {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": false},
  {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})json";

// o200k (gpt-oss, GPT-4o): case-aware words with contractions, digits in threes; no normalizer;
// whole words found in the vocabulary are taken without merging (ignore_merges).
constexpr std::string_view kO200kPre = R"json({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})json";

constexpr std::string_view kNfc = R"json({"type": "NFC"})json";
constexpr std::string_view kNone = "null";

// "joyai-llm" is what the converter names DeepSeek-V3's tokenizer as published today: its probe
// ids hash to JoyAI-LLM-Flash's entry (a DeepSeek-V3 tokenizer), not to the older "deepseek-v3"
// one; llama.cpp runs both with DeepSeek-V3's regexes.
constexpr std::array<GgufPreTokenizer, 4> kKnown = {{
    {"qwen2", kNfc, kQwen2Pre, false},
    {"deepseek-v3", kNone, kDeepseekV3Pre, false},
    {"joyai-llm", kNone, kDeepseekV3Pre, false},
    {"gpt-4o", kNone, kO200kPre, true},
}};

}  // namespace

const GgufPreTokenizer* find_gguf_pre_tokenizer(std::string_view name) {
  for (const auto& p : kKnown)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace tok

std::string gguf_pre_tokenizer_names() {
  std::string out;
  for (const auto& p : tok::kKnown) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

}  // namespace ft::protocol

// `freetoken tokenize`: text -> token ids with a HF tokenizer directory (or a GGUF file's
// vocabulary), printed as a JSON array (no special tokens added), so results can be diffed against
// HF `tokenizers` directly.
// --bench repeats the encode and reports throughput on stderr.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "commands.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/model_tokenizer.h"

namespace ft::cli {
namespace {

constexpr const char* kName = "tokenize";

int run_tokenize(const Args& args) {
  if (args.has("text") == args.has("text-file")) return usage_error(kName, "give exactly one of --text or --text-file");
  std::string text;
  if (args.has("text")) {
    text = args.get("text");
  } else {
    std::ifstream in(args.get("text-file"), std::ios::binary);
    if (!in) return runtime_error(kName, "cannot open " + args.get("text-file"));
    std::ostringstream os;
    os << in.rdbuf();
    text = os.str();
  }
  const int repeat = args.get_int("repeat");
  if (repeat < 1) return usage_error(kName, "--repeat must be at least 1");

  auto load_start = std::chrono::steady_clock::now();
  auto tokenizer = proxy::load_model_tokenizer(args.get("tokenizer"));
  if (!tokenizer) return runtime_error(kName, tokenizer.status().to_string());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  std::vector<int32_t> ids = tokenizer->encode(text);
  if (args.has("bench")) {
    // The first encode above warmed the word cache, as a long-running server's would be.
    auto start = std::chrono::steady_clock::now();
    std::size_t tokens = 0;
    for (int i = 0; i < repeat; ++i) tokens += tokenizer->encode(text).size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr,
                 "tokenize: load %.2f s; %d x %zu bytes -> %zu tokens each in %.3f s: %.0f tokens/s, %.1f MB/s "
                 "(one thread)\n",
                 load_s, repeat, text.size(), ids.size(), s, tokens / s, repeat * text.size() / s / 1e6);
  }
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

const Command kTokenizeCommand = {
    kName,
    "print the token ids of a text as a JSON array (HF tokenizer.json directory or GGUF file)",
    "freetoken tokenize --tokenizer DIR|FILE.gguf (--text S | --text-file F) [--bench [--repeat N]]",
    {{"tokenizer", "DIR|FILE.gguf", "directory with tokenizer.json (+ tokenizer_config.json), or a GGUF model file", "",
      true},
     {"text", "S", "the text to encode", ""},
     {"text-file", "F", "read the text from this file (raw bytes; invalid UTF-8 becomes U+FFFD)", ""},
     {"bench", "", "also time encoding and print tokens/s on stderr", ""},
     {"repeat", "N", "encodes timed by --bench", "20"}},
    0,
    run_tokenize,
};

}  // namespace ft::cli

// `freetoken make-demo-model DIR`: write a small random-weight Qwen3.5-MoE checkpoint in the real
// HF layout, with the real Qwen3 tokenizer, to exercise the whole stack without downloading a model.
#include <cstdio>

#include "commands.h"
#include "demo_model.h"

namespace ft::cli {
namespace {

int run_make_demo_model(const Args& args) {
  if (args.positional().size() != 1) return usage_error("make-demo-model", "expected one argument: the output DIR");
  const std::string dir = args.positional()[0];
  const auto from = args.has("tokenizer-from") ? std::filesystem::path(args.get("tokenizer-from"))
                                               : default_demo_tokenizer_dir();
  if (Status s = write_demo_model(dir, from, uint64_t(args.get_int("seed"))); !s)
    return usage_error("make-demo-model", s.message());
  std::printf("wrote a DEMO qwen3_5_moe checkpoint with RANDOM weights (and the Qwen3 tokenizer) to %s\n", dir.c_str());
  return 0;
}

}  // namespace

const Command kMakeDemoModelCommand = {
    "make-demo-model",
    "write a small random-weight qwen3_5_moe checkpoint (HF layout, Qwen3 tokenizer) for trying the engine",
    "freetoken make-demo-model DIR [--seed S] [--tokenizer-from DIR]",
    {{"seed", "S", "random seed of the weights", "20240601", false},
     {"tokenizer-from", "DIR", "folder with the Qwen3 tokenizer.json + tokenizer_config.json to copy", "", false}},
    1,
    run_make_demo_model,
};

}  // namespace ft::cli

// `freetoken logits`: run the model over a token list and save every position's logits, the
// engine's half of a golden comparison against HF transformers.
#include <cstring>

#include "commands.h"
#include "ft/engine/checkpoint.h"
#include "model_flags.h"

namespace ft::cli {
namespace {

int run_logits(const Args& args) {
  const std::string cmd = "logits";
  auto tokens = parse_token_list(args.get("tokens"));
  if (!tokens) return usage_error(cmd, tokens.status().message());
  auto model = load_model_from_flags(args);
  if (!model) return usage_error(cmd, model.status().message());

  const std::size_t T = tokens->size(), V = std::size_t((*model)->vocab_size());
  std::vector<float> logits(T * V);
  engine::SequenceState state = (*model)->new_state();
  if (Status s = (*model)->forward(state, *tokens, logits.data(), engine::LogitsMode::kAll); !s) {
    return usage_error(cmd, s.message());
  }
  engine::OwnedTensor out;
  out.name = "logits";
  out.dtype = engine::DType::kF32;
  out.shape = {int64_t(T), int64_t(V)};
  out.data.resize(logits.size() * sizeof(float));
  std::memcpy(out.data.data(), logits.data(), out.data.size());
  if (Status s = engine::write_safetensors(args.get("out"), {out}); !s) return usage_error(cmd, s.message());
  return 0;
}

}  // namespace

const Command kLogitsCommand = {
    "logits",
    "compute the logits of every position of a token list and save them (F32 safetensors)",
    "freetoken logits --model DIR --tokens 1,2,3 --out FILE.safetensors [--device cpu]",
    with_model_runtime_flags({
        model_flag(),
        tokens_flag(),
        {"out", "FILE", "output .safetensors file; tensor 'logits' F32 [tokens, vocab]", "", true},
    }),
    0,
    run_logits,
};

}  // namespace ft::cli

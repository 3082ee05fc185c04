// `freetoken generate`: prefill a token list, then decode new tokens (greedy or sampled) until
// --max-new-tokens or a stop token from generation_config.json; prints the new ids as JSON.
#include <cstdio>

#include "commands.h"
#include "ft/engine/sampling.h"
#include "model_flags.h"

namespace ft::cli {
namespace {

int run_generate(const Args& args) {
  const std::string cmd = "generate";
  auto tokens = parse_token_list(args.get("tokens"));
  if (!tokens) return usage_error(cmd, tokens.status().message());
  const int max_new = args.get_int("max-new-tokens");
  if (max_new < 0) return usage_error(cmd, "--max-new-tokens must be >= 0");
  engine::SamplingParams sp;
  sp.greedy = args.has("greedy");
  sp.temperature = float(args.get_double("temperature"));
  sp.top_k = args.get_int("top-k");
  sp.top_p = float(args.get_double("top-p"));
  sp.min_p = float(args.get_double("min-p"));
  sp.seed = uint64_t(args.get_int("seed"));
  if (sp.top_k < 0 || sp.top_p <= 0 || sp.top_p > 1 || sp.min_p < 0 || sp.min_p > 1) {
    return usage_error(cmd, "need --top-k >= 0, 0 < --top-p <= 1 and 0 <= --min-p <= 1");
  }
  auto model = load_model_from_flags(args);
  if (!model) return usage_error(cmd, model.status().message());

  const engine::Model& m = **model;
  const std::vector<int32_t>& stops = m.config().eos_token_ids;
  std::vector<float> logits(std::size_t(m.vocab_size()));
  engine::SequenceState state = m.new_state();
  engine::Sampler sampler(sp);
  std::vector<int32_t> out;
  std::vector<int32_t> input = *tokens;
  for (int i = 0; i < max_new; ++i) {
    if (Status s = m.forward(state, input, logits.data(), engine::LogitsMode::kLast); !s) {
      return usage_error(cmd, s.message());
    }
    const int32_t next = sampler.sample(logits);
    out.push_back(next);
    if (engine::is_stop_token(next, stops)) break;
    input = {next};
  }
  std::string json = "[";
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i) json += ',';
    json += std::to_string(out[i]);
  }
  std::printf("%s]\n", json.c_str());
  return 0;
}

}  // namespace

const Command kGenerateCommand = {
    "generate",
    "generate new tokens after a token list and print their ids as a JSON array",
    "freetoken generate --model DIR --tokens 1,2,3 --max-new-tokens N [--greedy] [--temperature T] "
    "[--top-k K] [--top-p P] [--min-p P] [--seed S] [--device cpu]",
    with_model_runtime_flags({
        model_flag(),
        tokens_flag(),
        {"max-new-tokens", "N", "tokens to generate at most (stops early at an eos token)", "16"},
        {"greedy", "", "always take the most likely token (else sample)", ""},
        {"temperature", "T", "sampling temperature; 0 means greedy", "1.0"},
        {"top-k", "K", "sample among the K most likely tokens; 0: off", "0"},
        {"top-p", "P", "sample among the smallest set of tokens with probability >= P; 1: off", "1.0"},
        {"min-p", "P", "drop tokens less likely than P x the most likely; 0: off", "0"},
        {"seed", "S", "random seed; the same seed gives the same tokens", "0"},
    }),
    0,
    run_generate,
};

}  // namespace ft::cli

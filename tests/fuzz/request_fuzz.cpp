// libFuzzer target for one client route's request reader, built once per route (FT_FUZZ_ROUTE:
// 0 Anthropic Messages, 1 OpenAI Chat Completions, 2 OpenAI Responses, 3 count_tokens). The
// input is the request body; it goes where the server sends it: the nesting guard, then
// prepare_turn (normalise, parse, render with the real Qwen3 template, cut at boundaries,
// tokenize). Any body must end in a turn or an error to send, never a crash, and a turn must hold:
// a prompt, boundaries increasing inside it, and token ids inside the vocabulary.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "chat_turn.h"
#include "ft/protocol/json_depth.h"
#include "fuzz_data.h"

#ifndef FT_FUZZ_ROUTE
#error "build with -DFT_FUZZ_ROUTE=0..3 (see tests/fuzz/CMakeLists.txt)"
#endif

namespace ft::fuzz {
namespace {

// An engine that is never reached: preparing a turn only reads the model's description.
class NoEngine final : public proxy::GenerationBackend {
 public:
  NoEngine() {
    info_.family = "qwen3_moe";
    info_.fingerprint = "fuzz";
    info_.eos_ids = {151645};
    info_.context_length = 262144;
    info_.vocab_size = 151936;
  }
  Result<proxy::wire::LookupReply> lookup(const proxy::wire::LookupRequest&) override { return unavailable("none"); }
  Result<std::unique_ptr<proxy::Generation>> start(const proxy::wire::GenerateRequest&) override {
    return unavailable("none");
  }
  const proxy::ModelInfo& info() const override { return info_; }
  nlohmann::json status() override { return nlohmann::json::object(); }
  nlohmann::json memory() override { return nlohmann::json::object(); }
  Result<nlohmann::json> resize_gpu_memory(std::uint64_t) override { return unavailable("none"); }

 private:
  proxy::ModelInfo info_;
};

void check(const proxy::PreparedTurn& turn, const protocol::Tokenizer& tok) {
  if (turn.prompt.empty()) fail("a prepared turn has an empty prompt");
  for (int32_t id : turn.prompt)
    if (id < 0 || std::size_t(id) >= tok.id_limit()) fail("token id " + std::to_string(id) + " outside the vocabulary");
  for (std::size_t i = 0; i < turn.boundaries.size(); ++i) {
    if (turn.boundaries[i] > turn.prompt.size()) fail("a boundary past the prompt");
    if (i > 0 && turn.boundaries[i] <= turn.boundaries[i - 1]) fail("boundaries not increasing");
  }
}

}  // namespace
}  // namespace ft::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ft::fuzz::load_all();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ft;
  static const proxy::ServerOptions options;
  static fuzz::NoEngine engine;
  static proxy::PinLedger pins(4);
  static proxy::ModelNames names(options);
  const protocol::Tokenizer& tok = fuzz::tokenizer(fuzz::Vocab::kQwen3);
  const proxy::ChatContext ctx{options, engine, tok, fuzz::chat_template(fuzz::Vocab::kQwen3), pins, names};

  const std::string body(reinterpret_cast<const char*>(data), size);
  if (!protocol::json_depth_within(body)) return 0;  // the server refuses it before reading it
  protocol::ApiError error;
  Result<proxy::PreparedTurn> turn = [&] {
    switch (FT_FUZZ_ROUTE) {
      case 0:
        return proxy::prepare_turn(ctx, protocol::Dialect::kAnthropic, body, "t", error);
      case 1:
        return proxy::prepare_turn(ctx, protocol::Dialect::kOpenAIChat, body, "t", error);
      case 2:
        return proxy::prepare_turn(ctx, protocol::Dialect::kOpenAIResponses, body, "t", error);
      default:
        return proxy::prepare_count_tokens(ctx, body, "t", error);
    }
  }();
  static const bool verbose = std::getenv("FT_FUZZ_VERBOSE") != nullptr;  // what each input came to
  if (!turn) {
    if (verbose) std::fprintf(stderr, "refused: %s\n", error.message.c_str());
    if (error.message.empty()) fuzz::fail("a refused request without an error message");
    return 0;
  }
  if (verbose) std::fprintf(stderr, "turn: %zu tokens, %zu boundaries\n", turn->prompt.size(), turn->boundaries.size());
  fuzz::check(*turn, tok);
  return 0;
}

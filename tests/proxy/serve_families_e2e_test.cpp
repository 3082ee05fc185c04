// Every model family the engine runs, served end to end by `freetoken serve` on the CPU: a tiny
// random checkpoint of the family with the real Qwen3 tokenizer and chat template answers an
// Anthropic request, the engine reports the family, and serve says which markup replies are read
// in. A template that teaches no tool markup, on a family without a parser of its own, is said
// plainly at start and served as text.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../engine/gguf_from_hf.h"
#include "../engine/tiny_models.h"
#include "ft/engine/model_config.h"
#include "serve_process.h"
#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The family's tiny shapes (tiny_models.h), the Qwen3 vocabulary, the tokenizer beside it.
void write_family_chat_model(engine::ModelFamily family, const fs::path& dir) {
  engine::RandomCheckpointSpec spec = tiny_spec(family, false);
  spec.vocab_size = 151936;
  spec.eos_token_ids = {151645};  // <|im_end|>
  ASSERT_TRUE(engine::write_random_checkpoint(dir, spec));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(qwen3_tokenizer_dir() / f, dir / f, fs::copy_options::overwrite_existing);
}

json ask_body() {
  return {{"model", "tiny"},
          {"max_tokens", 6},
          {"temperature", 0},
          {"messages", json::array({{{"role", "user"}, {"content", "Say hi"}}})},
          {"tools", json::array({{{"name", "read_file"},
                                  {"description", "Read a file"},
                                  {"input_schema",
                                   {{"type", "object"},
                                    {"properties", {{"path", {{"type", "string"}}}}},
                                    {"required", json::array({"path"})}}}}})}};
}

// POSTs ask_body() to serve at `port`: the reply (discarded JSON when the request failed, which is
// recorded as a failure).
json ask(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  auto r = c.Post("/v1/messages", ask_body().dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json::value_t::discarded;
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, false);
}

// The family /v1/stats reports for the engine.
std::string served_family(int port) {
  httplib::Client c("127.0.0.1", port);
  auto st = c.Get("/v1/stats");
  if (!st || st->status != 200) return "(no stats)";
  return json::parse(st->body)["engine"]["model"]["family"].get<std::string>();
}

class ServeFamilies : public ::testing::TestWithParam<engine::ModelFamily> {
 protected:
  void SetUp() override {
    if (!have_qwen3_tokenizer()) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
  }
  std::unique_ptr<ServeProcess> serve(const fs::path& model, std::string* log) {
    return ServeProcess::start({"serve", "--model", model.string(), "--model-name", "tiny", "--port", "0", "--ctx",
                                "2048", "--no-store", "--device", "cpu", "--threads", "2"},
                               work_.path() / "serve.log", 120, log);
  }
  TempDir work_;
};

TEST_P(ServeFamilies, AnswersAnAnthropicRequestAndSaysHowRepliesAreRead) {
  const std::string family = engine::model_family_name(GetParam());
  TempDir model;
  write_family_chat_model(GetParam(), model.path());
  std::string log;
  auto s = serve(model.path(), &log);
  ASSERT_TRUE(s) << log;
  const json reply = ask(s->port());
  ASSERT_FALSE(reply.is_discarded());
  EXPECT_EQ(reply["type"], "message");
  EXPECT_TRUE(reply["stop_reason"] == "max_tokens" || reply["stop_reason"] == "end_turn" ||
              reply["stop_reason"] == "tool_use")
      << reply.dump();
  EXPECT_EQ(served_family(s->port()), family);
  // The Qwen3 template teaches <tool_call>: a Qwen parser reads every family's replies (Qwen3.5's
  // own for its family).
  const std::string parser = family == "qwen3_5_moe" ? "qwen3.5" : "qwen3";
  EXPECT_NE(s->log().find("replies read as " + parser + " output"), std::string::npos) << s->log();
}

INSTANTIATE_TEST_SUITE_P(Families, ServeFamilies, ::testing::ValuesIn(engine::model_families()),
                         [](const auto& info) { return engine::model_family_name(info.param); });

TEST(ServeFamiliesPlain, AFamilyWithoutAParserIsSaidAtStartAndServedAsText) {
  if (!have_qwen3_tokenizer()) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
  TempDir model, work;
  write_family_chat_model(engine::ModelFamily::kDots1, model.path());
  // A chat template without tool markup (ChatML only).
  json config = json::parse(read_file(model.path() / "tokenizer_config.json"));
  config["chat_template"] =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  std::ofstream(model.path() / "tokenizer_config.json") << config.dump();
  std::string log;
  auto s = ServeProcess::start({"serve", "--model", model.path().string(), "--model-name", "tiny", "--port", "0",
                                "--ctx", "2048", "--no-store", "--device", "cpu", "--threads", "2"},
                               work.path() / "serve.log", 120, &log);
  ASSERT_TRUE(s) << log;
  EXPECT_NE(s->log().find("model family 'dots1' has no tool-call parser here"), std::string::npos) << s->log();
  EXPECT_FALSE(ask(s->port()).is_discarded());
}

// One GGUF file is a whole model: weights, tokenizer and chat template. A tiny random Qwen3-MoE with
// the Qwen3 vocabulary, written as llama.cpp lays a GGUF out, its tokenizer.* metadata copied from the
// vocab-only GGUF llama.cpp's converter made of the real Qwen3 tokenizer (tests/fixtures/gguf/vocab).
TEST(ServeGguf, AnswersFromASingleGgufFile) {
  TempDir model, work;
  const fs::path xz = fs::path(FT_FIXTURES_DIR) / "gguf/vocab/vocab-qwen3.gguf.xz";
  const fs::path vocab = work.path() / "vocab-qwen3.gguf";
  ASSERT_EQ(std::system(("xz -dc '" + xz.string() + "' > '" + vocab.string() + "'").c_str()), 0)
      << "cannot unpack " << xz << " (scripts/setup.sh installs xz-utils)";
  auto vocab_file = engine::GgufFile::open(vocab);
  ASSERT_TRUE(vocab_file.is_ok()) << vocab_file.status().to_string();
  std::vector<std::string> tokenizer_kvs;
  for (const engine::GgufKv& kv : vocab_file->metadata().entries()) {
    if (kv.key.starts_with("tokenizer.")) tokenizer_kvs.push_back(gguf_from_hf::kv_copy(kv));
  }
  engine::RandomCheckpointSpec spec = tiny_spec(engine::ModelFamily::kQwen3Moe, false);
  spec.vocab_size = 151936;
  ASSERT_TRUE(engine::write_random_checkpoint(model.path() / "hf", spec));
  const fs::path gguf = model.path() / "tiny-qwen3-moe.gguf";
  gguf_from_hf::write(model.path() / "hf", gguf, tokenizer_kvs);

  std::string log;
  auto s = ServeProcess::start({"serve", "--model", gguf.string(), "--port", "0", "--ctx", "2048", "--no-store",
                                "--device", "cpu", "--threads", "2"},
                               work.path() / "serve.log", 120, &log);
  ASSERT_TRUE(s) << log;
  EXPECT_NE(s->log().find("replies read as qwen3 output"), std::string::npos) << s->log();
  const json reply = ask(s->port());
  ASSERT_FALSE(reply.is_discarded());
  EXPECT_EQ(reply["type"], "message");
  EXPECT_GT(reply["usage"]["input_tokens"].get<int>(), 20) << "the Qwen3 template and tools were rendered";
  EXPECT_EQ(served_family(s->port()), "qwen3_moe");
}

}  // namespace
}  // namespace ft::test

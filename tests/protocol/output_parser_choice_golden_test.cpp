// Which output parser reads a model: the real chat templates (Qwen3, Qwen3.5, DeepSeek-V3,
// gpt-oss, GLM-4.5/4.6) pick their own family from the markup they teach, whatever the engine calls
// the model; a template without tool markup falls back to the engine's family, and a family with
// neither gets "" (serve uses "plain").
#include <gtest/gtest.h>

#include <filesystem>

#include "ft/protocol/chat_render.h"
#include "ft/protocol/output_parser.h"
#include "test_support.h"

namespace ft::protocol {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = fs::path(FT_FIXTURES_DIR) / "templates";

std::vector<std::string> markers_of(const std::string& file) {
  auto t = ChatTemplate::create(test::read_file(kDir / file));
  EXPECT_TRUE(t.is_ok()) << file << ": " << t.status().to_string();
  return t.is_ok() ? t->markers() : std::vector<std::string>{};
}

TEST(OutputParserChoice, EachRealTemplatePicksItsOwnFamily) {
  // The engine family given is deliberately unrelated: the template decides.
  EXPECT_EQ(output_parser_for("mixtral", markers_of("qwen3.jinja")), "qwen3");
  EXPECT_EQ(output_parser_for("qwen3_5_moe", markers_of("qwen3_5.jinja")), "qwen3.5");
  EXPECT_EQ(output_parser_for("mixtral", markers_of("deepseek_v3.jinja")), "deepseek_v3");
  EXPECT_EQ(output_parser_for("mixtral", markers_of("gpt_oss.jinja")), "gpt_oss");
  EXPECT_EQ(output_parser_for("mixtral", markers_of("glm4_5.jinja")), "glm4.5");
  EXPECT_EQ(output_parser_for("mixtral", markers_of("glm4_6.jinja")), "glm4.5");
}

TEST(OutputParserChoice, WithoutToolMarkupTheEngineFamilyDecidesOrNothingDoes) {
  const std::vector<std::string> none = {"<|im_start|>", "<|im_end|>"};
  EXPECT_EQ(output_parser_for("qwen3_moe", none), "qwen3");
  EXPECT_EQ(output_parser_for("qwen2_moe", none), "qwen3");
  EXPECT_EQ(output_parser_for("qwen3_5_moe", none), "qwen3.5");
  EXPECT_EQ(output_parser_for("deepseek_v3", none), "deepseek_v3");
  EXPECT_EQ(output_parser_for("glm4_moe", none), "glm4.5");
  EXPECT_EQ(output_parser_for("glm4_moe_lite", none), "glm4.5");
  for (const char* family : {"mixtral", "olmoe", "dots1", "ernie4_5_moe", "minimax_m2", "hunyuan_v1_moe", ""})
    EXPECT_EQ(output_parser_for(family, none), "") << family;
}

TEST(OutputParserChoice, ThePlainParserKeepsToolMarkupAsTextAndReadsLeadingReasoning) {
  const std::string out = "<think>why</think>\n\nhello <tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>";
  auto parsed = parse_output("plain", out);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->reasoning, "why");
  EXPECT_EQ(parsed->text, "hello <tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>");
  EXPECT_TRUE(parsed->tool_calls.empty());
}

}  // namespace
}  // namespace ft::protocol

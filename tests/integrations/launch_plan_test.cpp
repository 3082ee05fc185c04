// The per-agent config writers: what each plan sets, writes and runs, and that nothing lands
// outside the FreeToken-owned config directory.
#include "ft/integrations/launch_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "test_support.h"

namespace ft::integrations {
namespace {

using nlohmann::json;

LaunchOptions options() {
  LaunchOptions o;
  o.host = "127.0.0.1";
  o.port = 4242;
  o.api_key = "k-123";
  o.model = "my-model";
  o.max_output_tokens = 123;
  o.context_tokens = 4096;
  o.config_dir = "/ft-agents/x";
  return o;
}

std::optional<std::string> env(const LaunchPlan& plan, const std::string& name) {
  for (const EnvVar& v : plan.set_env)
    if (v.name == name) return v.value;
  return std::nullopt;
}

bool unsets(const LaunchPlan& plan, const std::string& name) {
  for (const std::string& n : plan.unset_env)
    if (n == name) return true;
  return false;
}

TEST(LaunchPlan, AgentNamesRoundTrip) {
  for (Agent a : all_agents()) EXPECT_EQ(parse_agent(agent_name(a)), a);
  EXPECT_EQ(parse_agent("claude"), Agent::kClaudeCode);
  EXPECT_FALSE(parse_agent("cursor"));
  EXPECT_FALSE(parse_agent(""));
}

TEST(LaunchPlan, ServerOriginBracketsIpv6) {
  LaunchOptions o = options();
  EXPECT_EQ(server_origin(o), "http://127.0.0.1:4242");
  o.host = "::1";
  EXPECT_EQ(server_origin(o), "http://[::1]:4242");
}

TEST(LaunchPlan, ClaudeCodeIsConfiguredByEnvironmentOnly) {
  const LaunchPlan plan = plan_launch(Agent::kClaudeCode, options());
  EXPECT_TRUE(plan.files.empty());
  EXPECT_EQ(plan.argv, std::vector<std::string>{"claude"});
  EXPECT_EQ(env(plan, "ANTHROPIC_BASE_URL"), "http://127.0.0.1:4242");  // the client appends /v1/messages
  EXPECT_EQ(env(plan, "ANTHROPIC_API_KEY"), "k-123");
  for (const char* slot : {"ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                           "ANTHROPIC_DEFAULT_OPUS_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"})
    EXPECT_EQ(env(plan, slot), "my-model") << slot;
  EXPECT_EQ(env(plan, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), "1");
  EXPECT_EQ(env(plan, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"), "123");
  EXPECT_TRUE(unsets(plan, "ANTHROPIC_AUTH_TOKEN"));
}

TEST(LaunchPlan, ClaudeCodeKeepsItsOwnOutputCapWhenNoneIsGiven) {
  LaunchOptions o = options();
  o.max_output_tokens = 0;
  EXPECT_FALSE(env(plan_launch(Agent::kClaudeCode, o), "CLAUDE_CODE_MAX_OUTPUT_TOKENS"));
}

TEST(LaunchPlan, OpenCodeGetsAnOpenAICompatibleProvider) {
  const LaunchPlan plan = plan_launch(Agent::kOpenCode, options());
  ASSERT_EQ(plan.files.size(), 1u);
  EXPECT_EQ(plan.files[0].path, "/ft-agents/x/opencode.json");
  EXPECT_EQ(env(plan, "OPENCODE_CONFIG"), "/ft-agents/x/opencode.json");
  EXPECT_EQ(env(plan, "OPENCODE_DISABLE_MODELS_FETCH"), "1");
  EXPECT_EQ(plan.argv, std::vector<std::string>{"opencode"});
  const json c = json::parse(plan.files[0].content);
  const json& p = c["provider"]["freetoken"];
  EXPECT_EQ(p["npm"], "@ai-sdk/openai-compatible");
  EXPECT_EQ(p["options"]["baseURL"], "http://127.0.0.1:4242/v1");
  EXPECT_EQ(p["options"]["apiKey"], "k-123");
  EXPECT_EQ(p["models"]["my-model"]["limit"]["output"], 123);
  EXPECT_EQ(p["models"]["my-model"]["limit"]["context"], 4096);
  EXPECT_EQ(c["model"], "freetoken/my-model");
  EXPECT_EQ(c["small_model"], "freetoken/my-model");
  EXPECT_EQ(c["autoupdate"], false);
}

TEST(LaunchPlan, OpenCodeFillsTheOtherLimitWhenOnlyOneIsGiven) {
  LaunchOptions o = options();
  o.max_output_tokens = 0;
  json limit = json::parse(plan_launch(Agent::kOpenCode, o).files[0].content)["provider"]["freetoken"]["models"]
                   ["my-model"]["limit"];
  EXPECT_EQ(limit["context"], 4096);
  EXPECT_EQ(limit["output"], 1024);  // a quarter of the context, so compaction still has room
  o.context_tokens = 0;
  EXPECT_FALSE(json::parse(plan_launch(Agent::kOpenCode, o).files[0].content)["provider"]["freetoken"]["models"]
                   ["my-model"]
                       .contains("limit"));
}

TEST(LaunchPlan, OpenClawGetsConfigAndStateUnderItsDirectory) {
  const LaunchPlan plan = plan_launch(Agent::kOpenClaw, options());
  ASSERT_EQ(plan.files.size(), 1u);
  EXPECT_EQ(plan.files[0].path, "/ft-agents/x/openclaw.json");
  EXPECT_EQ(env(plan, "OPENCLAW_CONFIG_PATH"), "/ft-agents/x/openclaw.json");
  EXPECT_EQ(env(plan, "OPENCLAW_STATE_DIR"), "/ft-agents/x/state");
  const json c = json::parse(plan.files[0].content);
  const json& p = c["models"]["providers"]["freetoken"];
  EXPECT_EQ(p["baseUrl"], "http://127.0.0.1:4242/v1");
  EXPECT_EQ(p["api"], "openai-completions");
  EXPECT_EQ(p["apiKey"], "k-123");
  ASSERT_EQ(p["models"].size(), 1u);
  EXPECT_EQ(p["models"][0]["id"], "my-model");
  EXPECT_EQ(p["models"][0]["maxTokens"], 123);
  EXPECT_EQ(p["models"][0]["contextWindow"], 4096);
  EXPECT_EQ(c["agents"]["defaults"]["model"]["primary"], "freetoken/my-model");
}

TEST(LaunchPlan, CodexGetsItsOwnHomeWithAResponsesProvider) {
  const LaunchPlan plan = plan_launch(Agent::kCodex, options());
  ASSERT_EQ(plan.files.size(), 1u);
  EXPECT_EQ(plan.files[0].path, "/ft-agents/x/config.toml");
  EXPECT_EQ(env(plan, "CODEX_HOME"), "/ft-agents/x");
  EXPECT_EQ(env(plan, "FREETOKEN_API_KEY"), "k-123");
  const std::string& toml = plan.files[0].content;
  for (const char* line : {"model = \"my-model\"\n", "model_provider = \"freetoken\"\n",
                           "model_context_window = 4096\n", "[model_providers.freetoken]\n",
                           "base_url = \"http://127.0.0.1:4242/v1\"\n", "env_key = \"FREETOKEN_API_KEY\"\n",
                           "wire_api = \"responses\"\n", "check_for_update_on_startup = false\n"})
    EXPECT_NE(toml.find(line), std::string::npos) << line << "\nin:\n" << toml;
}

TEST(LaunchPlan, CodexEscapesTomlStrings) {
  LaunchOptions o = options();
  o.model = "a\"b\\c";
  EXPECT_NE(plan_launch(Agent::kCodex, o).files[0].content.find("model = \"a\\\"b\\\\c\"\n"), std::string::npos);
}

// --scope reaches every request through each agent's own header setting; without it, no header.
TEST(LaunchPlan, ASharingScopeIsSentAsAHeaderByEveryAgent) {
  LaunchOptions o = options();
  o.scope = "team.one:s-1";
  EXPECT_EQ(env(plan_launch(Agent::kClaudeCode, o), "ANTHROPIC_CUSTOM_HEADERS"), "X-FreeToken-Scope: team.one:s-1");
  const json opencode = json::parse(plan_launch(Agent::kOpenCode, o).files[0].content);
  EXPECT_EQ(opencode["provider"]["freetoken"]["options"]["headers"]["X-FreeToken-Scope"], "team.one:s-1");
  const json openclaw = json::parse(plan_launch(Agent::kOpenClaw, o).files[0].content);
  EXPECT_EQ(openclaw["models"]["providers"]["freetoken"]["headers"]["X-FreeToken-Scope"], "team.one:s-1");
  const std::string toml = plan_launch(Agent::kCodex, o).files[0].content;
  const std::size_t table = toml.find("[model_providers.freetoken]\n");
  const std::size_t header = toml.find("http_headers = { \"X-FreeToken-Scope\" = \"team.one:s-1\" }\n");
  ASSERT_NE(header, std::string::npos) << toml;
  EXPECT_GT(header, table);
  EXPECT_LT(header, toml.find("\n[", table + 1)) << "inside the provider's table";

  for (Agent a : all_agents()) {
    const LaunchPlan plan = plan_launch(a, options());
    EXPECT_FALSE(env(plan, "ANTHROPIC_CUSTOM_HEADERS"));
    for (const FileToWrite& f : plan.files) EXPECT_EQ(f.content.find("X-FreeToken-Scope"), std::string::npos);
  }
}

TEST(LaunchPlan, EveryFileAndPathStaysInsideTheConfigDir) {
  for (Agent a : all_agents()) {
    const LaunchPlan plan = plan_launch(a, options());
    for (const FileToWrite& f : plan.files)
      EXPECT_EQ(f.path.string().rfind("/ft-agents/x/", 0), 0u) << agent_name(a) << ": " << f.path;
    for (const EnvVar& v : plan.set_env) {
      if (!v.value.empty() && v.value.front() == '/') {
        EXPECT_EQ(v.value.rfind("/ft-agents/x", 0), 0u) << agent_name(a) << ": " << v.name << "=" << v.value;
      }
    }
    EXPECT_EQ(plan.argv.size(), 1u) << agent_name(a);
  }
}

TEST(LaunchPlan, DefaultConfigDirFollowsXdgDataHome) {
  {
    const test::ScopedEnv xdg("XDG_DATA_HOME", "/xdg");
    EXPECT_EQ(default_agent_config_dir(Agent::kOpenClaw), "/xdg/freetoken/agents/openclaw");
  }
  const test::ScopedEnv no_xdg("XDG_DATA_HOME", nullptr);
  if (const char* home = std::getenv("HOME"); home && *home) {
    EXPECT_EQ(default_agent_config_dir(Agent::kCodex), std::filesystem::path(home) / ".local/share/freetoken/agents/codex");
  }
}

}  // namespace
}  // namespace ft::integrations

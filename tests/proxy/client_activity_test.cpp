// The per-client rows of /v1/stats: agent names from User-Agents, counts per tenant and agent,
// requests in flight until they end, and the bound on rows.
#include <gtest/gtest.h>

#include "../../proxy/src/client_activity.h"

namespace ft::proxy {
namespace {

TEST(AgentName, IsTheUserAgentsProductName) {
  EXPECT_EQ(agent_name("claude-cli/2.1.332 (external, sdk-cli)"), "claude-cli");
  EXPECT_EQ(agent_name("opencode/1.18.33 ai-sdk/provider-utils/4.0.23 runtime/bun/1.3.14"), "opencode");
  EXPECT_EQ(agent_name("codex_exec/0.171.0 (Debian 12.0.0; x86_64)"), "codex_exec");
  EXPECT_EQ(agent_name("OpenAI/JS 7.15.0"), "OpenAI");
  EXPECT_EQ(agent_name(""), "unknown");
  EXPECT_EQ(agent_name("<script>alert(1)</script>"), "unknown");
  EXPECT_EQ(agent_name(std::string(100, 'a')), std::string(40, 'a'));
}

TEST(ClientActivity, CountsPerTenantAndAgentAndShowsOneTenantAlone) {
  ClientActivity ledger;
  {
    auto r = ledger.begin("tenant:a", "claude-cli");
    r.tokens(100, 60);
  }
  {
    auto r = ledger.begin("tenant:a", "claude-cli");
    r.tokens(120, 100);
    r.failed();
  }
  auto other = ledger.begin("tenant:b", "opencode");
  const nlohmann::json all = ledger.to_json();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["agent"], "opencode") << "most recently seen first";
  EXPECT_EQ(all[0]["in_flight"], 1);
  const nlohmann::json a = ledger.to_json("tenant:a");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["requests"], 2);
  EXPECT_EQ(a[0]["errors"], 1);
  EXPECT_EQ(a[0]["in_flight"], 0);
  EXPECT_EQ(a[0]["prompt_tokens"], 220);
  EXPECT_EQ(a[0]["restored_tokens"], 160);
}

TEST(ClientActivity, ForgetsTheLeastRecentIdleRowPastTheBound) {
  ClientActivity ledger(2);
  auto busy = ledger.begin("t", "busy");  // oldest, but in flight: kept
  ledger.begin("t", "idle-1");
  ledger.begin("t", "idle-2");
  const nlohmann::json rows = ledger.to_json();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["agent"], "idle-2");
  EXPECT_EQ(rows[1]["agent"], "busy");
}

}  // namespace
}  // namespace ft::proxy

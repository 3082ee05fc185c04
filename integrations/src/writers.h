// One plan builder per agent (launch_plan.cpp dispatches to them).
#pragma once

#include "ft/integrations/launch_plan.h"

namespace ft::integrations::detail {

LaunchPlan claude_code_plan(const LaunchOptions& options);
LaunchPlan opencode_plan(const LaunchOptions& options);
LaunchPlan openclaw_plan(const LaunchOptions& options);
LaunchPlan codex_plan(const LaunchOptions& options);

}  // namespace ft::integrations::detail

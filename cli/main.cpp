// freetoken: one binary, one subcommand per job (serve, proxy, engine, logits, ...).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"

namespace {

void print_help() {
  std::printf(
      "freetoken: serve giant Mixture-of-Experts models to coding agents on one machine\n\n"
      "Usage: freetoken <command> [flags]   (freetoken <command> --help for its flags)\n\nCommands:\n");
  // The summaries start in one column, two spaces after the longest name.
  std::size_t width = 0;
  for (const ft::cli::Command* c : ft::cli::all_commands()) width = std::max(width, c->name.size() + 2);
  for (const ft::cli::Command* c : ft::cli::all_commands()) {
    std::string name = c->name;
    name.resize(width, ' ');
    std::printf("  %s%s\n", name.c_str(), c->summary.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_help();
    return 2;
  }
  const std::string& name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    print_help();
    return 0;
  }
  if (name == "--version") args[0] = "version";
  for (const ft::cli::Command* c : ft::cli::all_commands()) {
    if (c->name != args[0]) continue;
    int exit_code = 0;
    auto parsed = ft::cli::parse(*c, std::vector<std::string>(args.begin() + 1, args.end()), exit_code);
    if (!parsed) return exit_code;
    return c->run(*parsed);
  }
  std::fprintf(stderr, "freetoken: unknown command '%s' (see freetoken --help)\n", name.c_str());
  return 2;
}

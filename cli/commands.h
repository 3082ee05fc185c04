// The table of `freetoken` subcommands. Each lives in its own cmd_<name>.cpp and is listed once in
// commands.cpp.
#pragma once

#include <vector>

#include "flags.h"

namespace ft::cli {

const std::vector<const Command*>& all_commands();

extern const Command kBenchCommand;
extern const Command kCtlCommand;
extern const Command kDeviceCommand;
extern const Command kEngineCommand;
extern const Command kProxyCommand;
extern const Command kRenderCommand;
extern const Command kVersionCommand;
extern const Command kLogitsCommand;
extern const Command kGenerateCommand;
extern const Command kLaunchCommand;
extern const Command kMakeDemoModelCommand;
extern const Command kMakeSyntheticModelCommand;
extern const Command kModelsCommand;
extern const Command kServeCommand;
extern const Command kTokenizeCommand;

}  // namespace ft::cli

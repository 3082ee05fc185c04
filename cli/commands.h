// The table of `freetoken` subcommands. Each lives in its own cmd_<name>.cpp and is listed once in
// commands.cpp.
#pragma once

#include <vector>

#include "flags.h"

namespace ft::cli {

const std::vector<const Command*>& all_commands();

extern const Command kDeviceCommand;
extern const Command kVersionCommand;

}  // namespace ft::cli

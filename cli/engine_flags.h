// The engine's runtime flags (checkpoint store, memory, batching), declared once: `engine` takes
// them, `serve` takes the same ones and passes them on to the engine process it starts.
#pragma once

#include <string>
#include <vector>

#include "flags.h"

namespace ft::cli {

std::vector<Flag> engine_runtime_flags();

// The engine runtime flags given on this command line, as engine arguments ("--ctx", "4096", ...).
std::vector<std::string> forward_engine_flags(const Args& args);

}  // namespace ft::cli

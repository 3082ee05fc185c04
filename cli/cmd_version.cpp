#include <cstdio>

#include "commands.h"
#include "ft/engine/device.h"

namespace ft::cli {
namespace {

int run_version(const Args&) {
  std::printf("freetoken %s (CUDA %s)\n", FT_VERSION, engine::built_with_cuda() ? "built in" : "not built");
  return 0;
}

}  // namespace

const Command kVersionCommand = {"version", "print the version and build features", "freetoken version",
                                 {}, 0, run_version};

}  // namespace ft::cli

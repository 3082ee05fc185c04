// `freetoken ctl memory --gpu-mem GiB`: resizes a running server's GPU memory (its engine's expert
// cache) through POST /v1/gpu-memory, and prints the placement after it.
#pragma once

#include "flags.h"

namespace ft::cli {

int run_ctl_memory(const Args& args);

}  // namespace ft::cli

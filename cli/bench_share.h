// `freetoken bench share`: an offloaded layer's CPU share (CpuExperts) timed as the engine calls it,
// between gaps, on TBB's workers and on the spinning team (bench_share.cpp). No GPU needed.
#pragma once

#include "flags.h"

namespace ft::cli {

int bench_share(const Args& args);

}  // namespace ft::cli

// `freetoken bench share`: an offloaded layer's CPU share (CpuExperts) timed as the engine calls it,
// between gaps: a fixed cost a call and an expert's rate (bench_share.cpp). No GPU needed.
#pragma once

#include "flags.h"

namespace ft::cli {

int bench_share(const Args& args);

}  // namespace ft::cli

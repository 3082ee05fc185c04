// `freetoken bench restore`: restoring a real-sized model-state checkpoint from the checkpoint
// store on disk, against the disk's own read bandwidth and against recomputing the prefix.
#pragma once

#include "flags.h"

namespace ft::cli {

// Reads --tokens (default 30000), --dir, --keep and --prefill-tok-s. Exit 0, 1 on an IO failure,
// 2 on bad flags.
int bench_restore(const Args& args);

}  // namespace ft::cli

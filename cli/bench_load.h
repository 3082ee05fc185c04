// `freetoken bench load`: a bounded load and chaos test of `serve` on loopback. N sessions replay
// captured agent conversations (load_traffic.h) at once for S seconds, retrying what the server
// says to retry; optionally the engine is SIGKILLed every K seconds (serve restarts it) and every
// answer is compared with the one a no-cache server gives alone. Reports requests completed /
// failed / retried, TTFT p50/p99, tok/s, the proxy's and the engine's RSS after warm-up vs at the
// end, and the checkpoint store's verification.
#pragma once

#include "flags.h"

namespace ft::cli {

// Exit 0 when every request completed or was retried to completion, no answer was wrong, both
// processes' RSS stayed flat and the store verified; 1 otherwise; 2 on bad flags.
int bench_load(const Args& args);

}  // namespace ft::cli

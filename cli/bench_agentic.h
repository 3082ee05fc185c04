// `freetoken bench agentic`: does an agent's multi-turn traffic decode as fast as a plain request?
// One session replays the captured agent conversations turn by turn through a real `serve` (each
// turn restores its prefix from the checkpoint store and prefills only what is new), and right
// beside every turn the same prompt is sent as a new conversation (a one-request session: nothing
// of it restored but the agent's shared system prompt and tools), so both have the same length and
// run on the same server in the same state. Decode speed is timed as the client sees it: output
// tokens after the first, over the time from the first content delta to the end of the stream.
// Prints each turn's pair and the ratio of the two aggregate decode rates (the expert offload must
// keep it within 10%).
#pragma once

#include "flags.h"

namespace ft::cli {

// Exit 0 when every request completed, 1 when one failed, 2 on bad flags.
int bench_agentic(const Args& args);

}  // namespace ft::cli

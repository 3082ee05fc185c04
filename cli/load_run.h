// The running part of `bench load`: sessions replaying conversations against a server until a
// deadline, each request retried while the server says to retry; alongside, the RSS of the
// server's processes sampled, a progress line now and then, and (chaos) its engine SIGKILLed
// every few seconds. Also the reference pass: every request's answer from a no-cache server.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "load_client.h"
#include "load_stats.h"
#include "load_traffic.h"

namespace ft::cli {

struct RunPlan {
  std::vector<Conversation> conversations;
  int sessions = 64;
  // Session s replays the conversations in turn as variant v = s % variants, from conversation
  // v + s / variants on; the answers to compare with are computed for each variant, so fewer
  // variants than sessions keep the reference pass short.
  int variants = 64;
  int max_tokens = 16;
  double seconds = 600;
  int timeout_s = 600;  // longest silence from the server on one request
  // Sessions start no request after `seconds`; a request the server keeps refusing is retried
  // until this long after that (for the reference pass: after its first try), then it fails.
  double drain_s = 300;
};

// The name of request `index` of `conversation` sent as `variant`: "conversation/index/variant".
std::string replay_key(const Conversation& conversation, std::size_t index, int variant);

// Every request of every conversation in every variant, answered by `reference` (a server
// computing each prompt in full), `concurrency` at a time: answers by replay_key.
Result<std::map<std::string, std::string>> reference_answers(const Endpoint& reference, const RunPlan& plan,
                                                             int concurrency);

struct Watch {
  pid_t serve_pid = -1;             // -1: unknown (no RSS, no chaos)
  std::filesystem::path serve_log;  // its output, when known: when a restarted engine is back
  double chaos_every_s = 0;  // 0: no chaos
  double progress_every_s = 30;
  double sample_every_s = 2;  // RSS
};

struct RunSummary {
  double wall_s = 0;                // until the last session ended
  int kills = 0;                    // engines SIGKILLed
  int engines = 0;                  // distinct engine processes seen
  std::vector<double> downtimes_s;  // per kill: until serve said a new engine is back
};

// Runs plan.sessions sessions for plan.seconds against `server`. With `expected`, every completed
// answer is compared with expected[replay_key] (a mismatch is a wrong output).
RunSummary run_load(const Endpoint& server, const RunPlan& plan, const Watch& watch,
                    const std::map<std::string, std::string>* expected, LoadStats& stats, RssTrack& rss);

}  // namespace ft::cli

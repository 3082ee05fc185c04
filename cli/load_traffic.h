// The agent traffic `freetoken bench load` replays: the exchanges scripts/capture-traffic.sh
// recorded from the real agents (tests/fixtures/traffic/<name>/NNNNNN.json), one conversation per
// directory, and each captured request made ready for one session to send: greedy, with a small
// output cap, and tagged with the session's variant in its first user message, so that sessions
// share the system prompt and tools (the prefix cache's first cut) but not their conversations.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ft/common/result.h"
#include "ft/protocol/conversation.h"

namespace ft::cli {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct CapturedRequest {
  std::string path;  // "/v1/messages", "/v1/chat/completions" or "/v1/responses"
  protocol::Dialect dialect = protocol::Dialect::kAnthropic;
  nlohmann::ordered_json body;  // as the agent sent it
  HeaderList headers;           // the agent's identity (User-Agent, anthropic-*), nothing secret
};

struct Conversation {
  std::string name;                       // the traffic directory
  std::vector<CapturedRequest> requests;  // in capture order: later ones extend earlier ones
};

// The captures next to this executable (build/freetoken -> tests/fixtures/traffic).
std::filesystem::path default_traffic_dir();

// The conversations under `root`: every directory, or those named in `only`, in name order; in
// each, the *.json captures of successful chat requests in file-name order.
Result<std::vector<Conversation>> load_conversations(const std::filesystem::path& root,
                                                     const std::vector<std::string>& only);

struct ReplayRequest {
  std::string path;
  protocol::Dialect dialect = protocol::Dialect::kAnthropic;
  bool stream = true;
  std::string body;  // JSON
  HeaderList headers;
};

// Request `index` of a conversation as session variant `variant` sends it: temperature 0 (greedy:
// the same request always gets the same answer), at most `max_tokens` out, "[session variant V]"
// in front of the first user message. The captures all stream; every fourth request (by variant
// and index) is sent without streaming, so both response paths carry load, unless `always_stream`.
ReplayRequest make_replay(const CapturedRequest& request, int variant, std::size_t index, int max_tokens,
                          bool always_stream = false);

}  // namespace ft::cli

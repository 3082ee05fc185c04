// One replayed request sent to a FreeToken server over loopback HTTP, timed, and judged the way a
// well-behaved agent judges it: completed, retryable (429/503/529, or an overloaded error in the
// middle of a stream: wait and send it again) or failed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ft/common/result.h"
#include "load_response.h"
#include "load_traffic.h"

namespace ft::cli {

struct Endpoint {
  std::string host;
  int port = 0;
};

// "http://HOST:PORT" (a trailing slash allowed) as an endpoint.
Result<Endpoint> parse_endpoint(const std::string& url);

struct Outcome {
  enum class Kind { kCompleted, kRetryable, kFailed };
  Kind kind = Kind::kFailed;
  int http_status = 0;       // 0: no HTTP answer at all
  double retry_after_s = 1;  // what the server asked for (Retry-After), for kRetryable
  double ttft_s = 0;         // streaming: until the first content delta; otherwise the whole request
  double latency_s = 0;      // until the response ended
  ResponseSummary response;
  std::string why;  // for kRetryable and kFailed: what went wrong, one line
};

// Sends `request` on a connection of its own (an agent's keep-alive connection would pin one of
// the server's HTTP threads between its requests). `timeout_s`: longest silence before giving up.
Outcome send_replay(const Endpoint& server, const ReplayRequest& request, int timeout_s);

// The server's GET /v1/stats as JSON; null when it does not answer with a JSON object.
nlohmann::json server_stats(const Endpoint& server);

}  // namespace ft::cli

#include "http_limit_flags.h"

#include <string>

namespace ft::cli {

std::vector<Flag> http_limit_flags(int default_max_queued_requests) {
  return {
      {"max-queued-requests", "N",
       "connections that wait while every HTTP worker is busy; past them, new ones get 503 + Retry-After at once",
       std::to_string(default_max_queued_requests), false},
      {"request-read-timeout", "SECONDS",
       "a request's headers and body must arrive within this, else 408 and closed (slow clients; responses are "
       "not timed; 0: no bound)",
       "30", false},
  };
}

Result<HttpLimitFlags> http_limits_from(const Args& args) {
  HttpLimitFlags out;
  out.max_queued_requests = args.get_int("max-queued-requests");
  out.request_read_timeout_s = args.get_int("request-read-timeout");
  if (out.max_queued_requests < 0) return invalid_argument("--max-queued-requests must be 0 or more");
  if (out.request_read_timeout_s < 0) return invalid_argument("--request-read-timeout must be 0 or more");
  return out;
}

}  // namespace ft::cli

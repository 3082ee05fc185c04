// The flags bounding slow and numerous HTTP clients (ft/common/http_server.h), declared once for
// the API (`serve`, `proxy`) and the engine, each with its own defaults.
#pragma once

#include <vector>

#include "flags.h"
#include "ft/common/result.h"

namespace ft::cli {

std::vector<Flag> http_limit_flags(int default_max_queued_requests);

struct HttpLimitFlags {
  int max_queued_requests = 0;
  int request_read_timeout_s = 0;
};
// kInvalidArgument for a negative value.
Result<HttpLimitFlags> http_limits_from(const Args& args);

}  // namespace ft::cli

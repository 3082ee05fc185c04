#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "ft/protocol/client_responses.h"

namespace ft::protocol {

std::string make_response_id(Dialect dialect) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%06llx", static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(counter.fetch_add(1) & 0xffffff));
  switch (dialect) {
    case Dialect::kAnthropic: return std::string("msg_") + buf;
    case Dialect::kOpenAIChat: return std::string("chatcmpl-") + buf;
    case Dialect::kOpenAIResponses: return std::string("resp_") + buf;
  }
  return buf;
}

}  // namespace ft::protocol

#include "ft/common/loopback.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace ft {

bool loopback_host(std::string_view host_in) {
  std::string host(host_in);
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (!host.empty() && host.front() == '[') {
    host = host.substr(1, host.find(']') - 1);
  } else if (const auto colon = host.find(':'); colon != std::string::npos && host.find(':', colon + 1) == std::string::npos) {
    host = host.substr(0, colon);  // one colon: host:port (more: a bare IPv6 address)
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace ft

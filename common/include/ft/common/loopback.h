// Whether an address (a bind address, or a Host header's host[:port]) names this machine's
// loopback: what decides if a server is reachable from elsewhere and whether a Host is ours.
#pragma once

#include <string_view>

namespace ft {

// "127.x.y.z", "localhost", "::1", "[::1]", each with or without ":port"; case-insensitive.
bool loopback_host(std::string_view host);

}  // namespace ft

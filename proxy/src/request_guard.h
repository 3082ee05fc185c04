// What the proxy refuses before reading a request's body: requests a browser page could forge
// against a server on loopback (cross-site POSTs, DNS rebinding) and bodies whose size is not
// declared (chunked, compressed: buffered and inflated without bound before any limit applies).
// The real agents send none of these.
#pragma once

#include <httplib.h>

#include <optional>
#include <string>

namespace ft::proxy {

struct Refusal {
  int status = 400;
  std::string message;
};

// The refusal of `req`, or nothing. `loopback_only`: the server listens on loopback, so a Host
// naming anything else is a rebound DNS name.
std::optional<Refusal> refuse_early(const httplib::Request& req, bool loopback_only);

}  // namespace ft::proxy

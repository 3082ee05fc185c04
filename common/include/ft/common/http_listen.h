// Starting a cpp-httplib server on a background thread, shared by the proxy and the engine.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "ft/common/result.h"

namespace ft {

// Binds `http` to host:port (0: any free port), runs its accept loop on `thread` and returns the
// bound port once the loop is running: httplib's stop() is a no-op before that, so a stop() right
// after a start() would otherwise leave it serving (httplib 0.11 has no wait_until_ready()).
// kUnavailable when the address cannot be bound.
template <typename HttpServer>
Result<int> listen_in_background(HttpServer& http, const std::string& host, int port, std::thread& thread) {
  if (port == 0) {
    port = http.bind_to_any_port(host);
    if (port <= 0) return unavailable("cannot bind " + host);
  } else if (!http.bind_to_port(host, port)) {
    return unavailable("cannot bind " + host + ":" + std::to_string(port) + " (in use?)");
  }
  thread = std::thread([&http] { http.listen_after_bind(); });
  while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

}  // namespace ft
